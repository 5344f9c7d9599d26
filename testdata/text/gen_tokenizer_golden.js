// Generates testdata/text/tokenizer_golden.jsonl: Qwen3 token ids for a
// corpus of adversarial strings, encoded with the pure-JS Hugging Face
// tokenizer (npm @huggingface/tokenizers 0.2.0) and, when it loads,
// cross-checked with the Rust implementation (npm tokenizers 0.23.2, native
// addon). Every line is {"text": ..., "ids": [...]}; add_special_tokens=false.
//
//   (from the repository root)
//   mkdir -p build/tokref && (cd build/tokref && npm init -y >/dev/null &&
//     npm install @huggingface/tokenizers@0.2.0 tokenizers@0.23.2)
//   NODE_PATH=build/tokref/node_modules node testdata/text/gen_tokenizer_golden.js [--check]
//
// --check compares with the committed file instead of writing it (exit 1 on
// any difference). The corpus is deterministic (seeded PRNG).
"use strict";
const fs = require("fs");
const path = require("path");

const here = __dirname;
const tokDir = path.join(here, "..", "tokenizer", "qwen3");
const out = path.join(here, "tokenizer_golden.jsonl");

const HAND = [
  "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\n ", "a", "A", "0",
  "put the blue block in the green bowl",
  "Put the blue block in the green bowl",
  "Hello, world! 12345 don't  I'LL  \n\n  café naïve 你好世界 🤖",
  "<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|vision_end|>put the blue block in the green bowl<|im_end|>\n<|im_start|>assistant\n",
  // whitespace runs and look-ahead
  "a  b", "a   b", "a \t b", "a\t\tb", "a \n b", "a\n\n\nb", "a \r\n \r\n b", "a  ", "  a", "a\n", "a\n ", "a \n",
  "x\r\ny\r\n\r\nz", "line1\rline2", "\r\r\n\n", " \t\n\t ", "end with spaces   ", "   start with spaces",
  // unicode white space
  "nbsp\u00a0x", "nbsp\u00a0\u00a0x", "x\u00a0_a", "ideo\u3000space", "ideo\u3000\u3000x", "nel\u0085x", "nel \u0085 x",
  "ls\u2028ps\u2029x", "em\u2003en\u2002thin\u2009hair\u200ax", "nnbsp\u202fx", "mmsp\u205fx", "ogham\u1680x",
  "zwsp\u200bx", "bom\ufeffx", "\ufeffbom at start", "wj\u2060x", "soft\u00adhyphen", "vt\u000bff\u000cx", "fs\u001cgs\u001dx",
  "a\u00a0 b", "a \u00a0b", "\u3000\u3000", "\u0085", "\u00a0", "\u2028\n",
  // digits
  "12345", "3.14159", "1,000,000", "x2 + y2", "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳", "x² y³ z¹ ⁴⁵", "½ ⅓ ¼", "Ⅻ ⅻ", "①②③", "𝟘𝟙𝟚", "१२३", "๑๒๓", "12abc34", "abc123def", "v1.2.3-rc4",
  // contractions
  "don't", "DON'T", "Don'T", "it's", "IT'S", "It'S", "we're", "WE'RE", "we'Re", "I've", "I'VE", "I'm", "I'M", "you'll", "YOU'LL", "You'Ll", "he'd", "HE'D",
  "'s", "'S", "'t", "'re", "'ve", "'m", "'ll", "'d", "'x", "''s", "'sa", "'Sa", "it'ſ ok", "it'ſab", "I'LL'VE", "don’t", "rock'n'roll", " 'll", "'", "''",
  "K'\u212a", "'\u212a", "'\u0130", "'ss'",
  // CJK and other scripts
  "你好", "你好，世界！", "把蓝色积木放进绿色碗里。", "日本語のテキスト、カタカナ、ｶﾀｶﾅ", "한국어 텍스트", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
  "नमस्ते दुनिया", "สวัสดีครับ", "مرحبا بالعالم", "שלום עולם", "Привет, мир!", "Γειά σου Κόσμε", "ΟΔΟΣ", "Ελληνικά ς σ Σ", "ქართული", "Հայերեն", "አማርኛ", "ᚠᛇᚻ",
  "mixed中文English日本語한국어", "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３", "𝐁𝐨𝐥𝐝 𝕯𝖔𝖚𝖇𝖑𝖊",
  // emoji
  "🤖", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🇫🇷🇩🇪", "🏳️‍🌈", "❤️", "#️⃣", "a🤖b", " 🤖 ", "🤖🤖🤖", "emoji 👍 ok",
  // combining marks and NFC
  "cafe\u0301", "CAFE\u0301", "nai\u0308ve", "a\u0300\u0301\u0302", "e\u0301\u0301", "\u0301start", " \u0301x", "x \u0301", "Å", "A\u030a", "\u212b", "ﬁ ﬂ", "Ǆ ǅ ǆ",
  "\u0915\u094d\u0937", "Z\u0351\u0351\u0351algo", "o\u0308\u0304",
  // punctuation
  "!!!", "...", "?!", "a...b", "a, b; c: d", "(x)", "[y]", "{z}", "\"quoted\"", "«guillemets»", "„low“", "a—b–c-d", "foo_bar", "__init__", "a/b\\c",
  "x\n!!\ny", "!!\r\n", " !!\n\n", "#hash @at $dollar %pct ^caret &amp *star", "~`|<>", "<", "<|", "<|im", "<|im_end", "|>", "<||>", "<|unknown|>",
  // special tokens glued to text
  "<|im_end|>", "<|im_end|><|im_end|>", "a<|im_end|>b", " <|im_end|> ", "<|im_start|>system", "text<|endoftext|>more", "<|image_pad|><|image_pad|>",
  "<|vision_start|>x<|vision_end|>", "<think>reasoning</think>answer", "<tool_call>{}</tool_call>", "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
  "<|im_start|><|im_start|>", "<|im_start|user", "<|box_start|>(1,2)<|box_end|>", "<|object_ref_start|>cup<|object_ref_end|>", "x<|video_pad|>", "<|im_end|>\n\n",
  // robot instructions
  "pick up the red cube and place it on the plate", "move the gripper 5 cm to the left", "open the top drawer", "close the microwave door",
  "put the marker in the cup", "wipe the table with the sponge", "turn on the faucet", "stack the blocks: red, green, blue",
  "pick up the can of soda", "place the spoon next to the bowl", "fold the towel in half", "put   the blue block\tin the green bowl",
  // long-ish
  "a".repeat(100), " ".repeat(50), "ab ".repeat(40), "\n".repeat(20), "😀".repeat(10), "x\u00a0".repeat(20),
];

// Mulberry32, deterministic.
function rng(seed) {
  return function () {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ATOMS = [
  "a", "b", "Z", "e", "s", "S", "t", "T", "l", "L", "d", "m", "r", "v", "0", "7", "9", " ", " ", " ", "  ", "\t", "\n", "\r", "\r\n",
  "'", "'", "'s", "'LL", "'re", "'Ve", "’", ".", ",", "!", "?", "-", "_", "(", ")", "\"", "#", "$", "%", "&", "*", "/", "\\", "<", ">", "|",
  "\u00a0", "\u3000", "\u0085", "\u2028", "\u2029", "\u2003", "\u200b", "\ufeff", "\u00ad", "\u000b", "\u000c", "\u001c", "\u001f",
  "\u0301", "\u0308", "\u0327", "\u1100", "\u1161", "\u11a8", "é", "ü", "ß", "ſ", "\u212a", "\u0130", "ı", "Σ", "ς", "λ", "Ж", "я",
  "中", "文", "日", "本", "の", "カ", "ｶ", "한", "글", "न", "्", "ा", "ก", "ี", "ع", "ب", "ש",
  "٣", "۴", "²", "³", "½", "Ⅻ", "①", "𝟘", "🤖", "👍", "🏽", "\u200d", "👨", "👩", "🇫", "🇷", "❤", "\ufe0f", "🏳",
  "<|im_end|>", "<|im_start|>", "<|image_pad|>", "<|endoftext|>", "<think>", "<|im_", "|>", "<tool_call>",
];

function randomCorpus(n) {
  const r = rng(20261130);
  const outp = [];
  for (let i = 0; i < n; i++) {
    const len = 1 + Math.floor(r() * 24);
    let s = "";
    for (let k = 0; k < len; k++) s += ATOMS[Math.floor(r() * ATOMS.length)];
    outp.push(s);
  }
  return outp;
}

async function main() {
  const check = process.argv.includes("--check");
  const corpus = HAND.concat(randomCorpus(300));
  const { Tokenizer } = require("@huggingface/tokenizers");
  const tj = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer.json"), "utf8"));
  const tc = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer_config.json"), "utf8"));
  const js = new Tokenizer(tj, tc);
  let rust = null;
  try {
    rust = require("tokenizers").Tokenizer.fromFile(path.join(tokDir, "tokenizer.json"));
  } catch (e) {
    console.error("rust tokenizers addon not available, skipping cross-check:", e.message);
  }
  const lines = [];
  let disagree = 0;
  for (const text of corpus) {
    const ids = Array.from(js.encode(text, { add_special_tokens: false }).ids);
    if (rust) {
      const enc = await rust.encode(text, null, { addSpecialTokens: false });
      const rids = Array.from(enc.getIds());
      if (JSON.stringify(rids) !== JSON.stringify(ids)) {
        disagree++;
        console.error("JS and Rust disagree on", JSON.stringify(text), JSON.stringify(ids), JSON.stringify(rids));
      }
    }
    lines.push(JSON.stringify({ text, ids }));
  }
  const body = lines.join("\n") + "\n";
  console.error(`${corpus.length} strings; rust cross-check: ${rust ? disagree + " disagreements" : "skipped"}`);
  if (check) {
    const old = fs.readFileSync(out, "utf8");
    if (old !== body) {
      console.error("tokenizer_golden.jsonl differs from a fresh run");
      process.exit(1);
    }
    console.error("tokenizer_golden.jsonl matches");
  } else {
    fs.writeFileSync(out, body);
    console.error("wrote", out);
  }
  if (disagree) process.exit(2);
}

main().catch((e) => { console.error(e); process.exit(1); });
