package text

import (
	"unicode"
	"unicode/utf8"
)

// QwenPattern is the pre-tokenizer regular expression of the Qwen2/Qwen3
// tokenizer.json ("Split", behaviour "Isolated"). Load accepts only a
// tokenizer whose pre-tokenizer carries exactly this pattern, because the
// splitter below re-states it by hand.
const QwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// SplitPieces calls emit for each pre-token of s in order, as the Qwen
// pre-tokenizer regex (QwenPattern) with Oniguruma semantics would split it:
// \s is Unicode White_Space, \p{L}/\p{N} use Go's Unicode tables, the
// contraction group is case-insensitive over ASCII only (as Hugging Face's
// JS port does; ids agree with the Rust library on the golden corpus), and
// the look-ahead of \s+(?!\S) is honoured. The pieces
// concatenate to s and are sub-strings of it.
//
// s must be valid UTF-8 (invalid bytes are treated as U+FFFD, one byte each).
// SplitPieces never backtracks: it is linear in len(s). It is a pure function
// and safe for concurrent use.
func SplitPieces(s string, emit func(piece string)) {
	for i := 0; i < len(s); {
		j := matchAt(s, i)
		emit(s[i:j])
		i = j
	}
}

// AppendPieces appends the pre-tokens of s (see SplitPieces) to dst.
func AppendPieces(dst []string, s string) []string {
	SplitPieces(s, func(p string) { dst = append(dst, p) })
	return dst
}

// decodeAt decodes one rune at s[i]; i < len(s).
func decodeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func isLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return (r|0x20) >= 'a' && (r|0x20) <= 'z'
	}
	return unicode.IsLetter(r)
}

func isNumber(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= '0' && r <= '9'
	}
	return unicode.IsNumber(r)
}

// isSpace reports Unicode White_Space, the set Oniguruma (and .NET, and
// Hugging Face's JS port) use for \s.
func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || (r >= '\t' && r <= '\r')
	}
	return unicode.Is(unicode.White_Space, r)
}

// isPunct is [^\s\p{L}\p{N}].
func isPunct(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// scanLetters returns the end of the run of letters starting at i.
func scanLetters(s string, i int) int {
	for i < len(s) {
		r, n := decodeAt(s, i)
		if !isLetter(r) {
			break
		}
		i += n
	}
	return i
}

// matchAt returns the end of the pre-token that starts at s[i], trying the
// alternatives of QwenPattern in order, exactly as a backtracking engine
// would settle them.
func matchAt(s string, i int) int {
	// 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' && i+1 < len(s) {
		switch lowerASCII(s[i+1]) {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && lowerASCII(s[i+2]) == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && lowerASCII(s[i+2]) == 'l' {
				return i + 3
			}
		}
	}
	r, n := decodeAt(s, i)
	// 2. [^\r\n\p{L}\p{N}]?\p{L}+
	if isLetter(r) {
		return scanLetters(s, i+n)
	}
	num := isNumber(r)
	if r != '\r' && r != '\n' && !num && i+n < len(s) {
		if r2, n2 := decodeAt(s, i+n); isLetter(r2) {
			return scanLetters(s, i+n+n2)
		}
	}
	// 3. \p{N}
	if num {
		return i + n
	}
	// 4. ' '?[^\s\p{L}\p{N}]+[\r\n]*
	k := i
	if r == ' ' {
		k = i + 1
	}
	if k < len(s) {
		if rk, nk := decodeAt(s, k); isPunct(rk) {
			j := k + nk
			for j < len(s) {
				rj, nj := decodeAt(s, j)
				if !isPunct(rj) {
					break
				}
				j += nj
			}
			for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
				j++
			}
			return j
		}
	}
	// r is white space from here on (letters, numbers and punctuation were
	// handled above).
	// 5. \s*[\r\n]+ : up to and including the last CR/LF of the run.
	j, lastNL, prev := i, -1, i
	for j < len(s) {
		rj, nj := decodeAt(s, j)
		if !isSpace(rj) {
			break
		}
		if rj == '\r' || rj == '\n' {
			lastNL = j
		}
		prev = j
		j += nj
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	// 6. \s+(?!\S): the whole run at the end of input, else all but its
	// last character.
	if j == len(s) {
		return j
	}
	if prev > i {
		return prev
	}
	// 7. \s+ (the guard keeps the loop advancing whatever the input).
	if j == i {
		return i + n
	}
	return j
}
