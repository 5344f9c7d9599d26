package text

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// FormalizeLanguage is GR00T's formalize_language step with CPython 3
// semantics: re.sub(r"[^\w\s]", "", s.lower()).
//
//   - lower() is Python's full Unicode lowercase: U+0130 'İ' becomes
//     "i\u0307", and capital sigma becomes final 'ς' when it ends a word
//     (preceded by a cased letter and not followed by one, skipping
//     case-ignorable characters), else 'σ'.
//   - \w keeps letters (L*), numbers (N*, so '½', '²', 'Ⅻ' stay) and '_';
//     combining marks (M*) are removed ("cafe\u0301" → "cafe").
//   - \s keeps everything str.isspace() accepts: Unicode White_Space plus
//     U+001C–U+001F (U+0085 and U+3000 included; U+200B and U+FEFF not).
//
// Nothing else happens: runs of spaces are kept and there is no strip.
// Invalid UTF-8 bytes are dropped (Python never sees them; callers should
// reject such input first). Go's Unicode tables (15.0) are newer than
// Debian Python 3.11's (14.0): characters first assigned in 15.0 may be kept
// here and removed by Python. Pure function, safe for concurrent use.
func FormalizeLanguage(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			i += max(n, 1)
			continue
		}
		switch {
		case r == 'İ': // SpecialCasing: lower is "i" + COMBINING DOT ABOVE
			b.WriteByte('i') // U+0307 is a mark: removed
		case r == 'Σ':
			if finalSigma(s, i, i+n) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			if l := pyLower(r); isPyWord(l) || isPySpace(l) {
				b.WriteRune(l)
			}
		}
		i += n
	}
	return b.String()
}

func pyLower(r rune) rune {
	if r < utf8.RuneSelf {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(r)
}

// isPyWord is Python re's \w for str patterns: str.isalnum() or '_'.
func isPyWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || (r|0x20) >= 'a' && (r|0x20) <= 'z' || r >= '0' && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}

// isPySpace is Python's str.isspace(): bidirectional class WS, B or S, or
// category Zs.
func isPySpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || (r >= '\t' && r <= '\r') || (r >= 0x1c && r <= 0x1f)
	}
	return unicode.Is(unicode.White_Space, r)
}

// finalSigma implements CPython's handle_capital_sigma for the Σ at
// s[start:end]: \p{cased}\p{case-ignorable}* Σ !(\p{case-ignorable}*\p{cased}).
func finalSigma(s string, start, end int) bool {
	before := false
	for j := start; j > 0; {
		r, n := utf8.DecodeLastRuneInString(s[:j])
		j -= n
		if !isCaseIgnorable(r) {
			before = isCased(r)
			break
		}
	}
	if !before {
		return false
	}
	for j := end; j < len(s); {
		r, n := utf8.DecodeRuneInString(s[j:])
		j += n
		if !isCaseIgnorable(r) {
			return !isCased(r)
		}
	}
	return true
}

// isCased is the Unicode Cased property: Lu, Ll, Lt, Other_Lowercase,
// Other_Uppercase.
func isCased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

// isCaseIgnorable is the Unicode Case_Ignorable property: Mn, Me, Cf, Lm,
// Sk, and Word_Break MidLetter, MidNumLet or Single_Quote.
func isCaseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
