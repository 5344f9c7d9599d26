#!/usr/bin/python3
"""Generate the FormalizeLanguage goldens with CPython's own str.lower and re.

Run from the repository root with Debian's interpreter:
    /usr/bin/python3 testdata/text/gen_formalize.py
Writes testdata/text/formalize_golden.jsonl (corpus: {"in", "out"} per line)
and testdata/text/formalize_codepoints.json (per code point classification).
With --check it compares instead of writing (used by VERIFY_PYREF=1).
"""
import json, re, sys, unicodedata, os

HERE = os.path.dirname(os.path.abspath(__file__))

def formalize(s):
    return re.sub(r"[^\w\s]", "", s.lower())

CORPUS = [
    "Put the blue block in the green bowl",
    "Pick up the RED cube; place it on the plate.",
    "put   the\tblue\nblock\r\nin  the bowl  ",
    "  leading and trailing  ",
    "",
    "!!!",
    "...   ",
    "don't DON'T Don’t",
    "Move 3 cm left, then 2.5 cm up!",
    "½ ² ³ ⅓ Ⅻ ① ٣ ۴ ߅ ໓",
    "café (composed) cafe\u0301 (decomposed)",
    "naïve NAÏVE nai\u0308ve",
    "İstanbul ISTANBUL ıi",
    "ΟΔΟΣ ΟΔΟΣ. Σ ΑΣ'Α ΣΑ Σ́Α ΑΣ\u0301 ΌΣΟΣ",
    "straße STRASSE ẞ",
    "Ǆ ǅ ǆ ǈ",
    "नमस्ते दुनिया",
    "สวัสดีครับ",
    "你好，世界！把蓝色积木放进绿色碗里。",
    "こんにちは、世界。カタカナ ｶﾀｶﾅ",
    "안녕하세요 \u1100\u1161\u11a8",
    "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３",
    "emoji 🤖👍🏽 👨\u200d👩\u200d👧 🇫🇷 ok",
    "zero\u200bwidth\ufeffbom\u2060joiner\u00adsoft",
    "nbsp\u00a0em\u2003ideo\u3000nel\u0085ls\u2028ps\u2029",
    "fs\x1cgs\x1drs\x1eus\x1f vt\x0bff\x0c",
    "under_score __init__ a-b a–b a—b",
    "quotes «guillemets» „low“ 'single' \"double\"",
    "math: x² + y² = z², 10% of $5 ≥ €3",
    "Tab\tseparated\tvalues",
    "ﬁ ﬂ ligatures Ꮳ ꭰ",
    "Ⓐⓑ Ⓒ 🄰",
    "Kelvin K Angstrom Å ohm Ω",
    "العربية ١٢٣ עברית",
    "𝐁𝐨𝐥𝐝 𝕯𝖔𝖚𝖇𝖑𝖊",
    "a\u0300\u0301\u0302b",
    "ǅungla ǈubljana",
    "ΣΑΣ σας ΣΣ",
    "Σ̈Σ",
    "ᾼ ᾈ ῼ",
    "ABC\u0345XYZ",
    "ΑΣ\u00ad",
    "ΑΣ:Β ΑΣ.",
]

def classify():
    ranges = []  # [start, end_inclusive, kind]
    maps = {}
    def kind_of(c):
        ch = chr(c)
        if unicodedata.category(ch) == "Cn" or 0xD800 <= c <= 0xDFFF:
            return "skip"
        out = formalize(ch)
        if out == ch:
            return "keep"
        if out == "":
            return "drop"
        maps[c] = out
        return "map"
    cur = None
    for c in range(0x110000):
        k = kind_of(c)
        if k == "map":
            k = "map"
        if cur and cur[2] == k and cur[1] == c - 1:
            cur[1] = c
        else:
            cur = [c, c, k]
            ranges.append(cur)
    return {"python": sys.version.split()[0], "unidata": unicodedata.unidata_version,
            "ranges": ranges, "maps": {str(k): v for k, v in sorted(maps.items())}}

def main():
    check = "--check" in sys.argv
    lines = [json.dumps({"in": s, "out": formalize(s)}, ensure_ascii=False) for s in CORPUS]
    golden = "\n".join(lines) + "\n"
    table = json.dumps(classify(), ensure_ascii=True, separators=(",", ":")) + "\n"
    p1 = os.path.join(HERE, "formalize_golden.jsonl")
    p2 = os.path.join(HERE, "formalize_codepoints.json")
    if check:
        ok = open(p1, encoding="utf-8").read() == golden and open(p2).read() == table
        print("formalize goldens", "match" if ok else "DIFFER")
        sys.exit(0 if ok else 1)
    open(p1, "w", encoding="utf-8").write(golden)
    open(p2, "w").write(table)
    print("wrote", p1, p2)

main()
