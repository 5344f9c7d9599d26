package text

import "strings"

// byteToRune is GPT-2's bytes_to_unicode table: printable bytes 33–126,
// 161–172 and 174–255 map to themselves, the other 68 bytes (0–32, 127–160,
// 173), in increasing order, to U+0100, U+0101, … (space → 'Ġ', '\n' → 'Ċ').
var byteToRune [256]rune

// runeFromByteLevel maps U+0000–U+0143 back to bytes; -1 = not a byte rune.
var runeFromByteLevel [0x144]int16

func init() {
	for i := range runeFromByteLevel {
		runeFromByteLevel[i] = -1
	}
	next := rune(0x100)
	for b := range 256 {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeFromByteLevel[byteToRune[b]] = int16(b)
	}
}

// runeToByte inverts byteToRune.
func runeToByte(r rune) (byte, bool) {
	if r < 0 || int(r) >= len(runeFromByteLevel) || runeFromByteLevel[r] < 0 {
		return 0, false
	}
	return byte(runeFromByteLevel[r]), true
}

// byteLevel maps every byte of s to its byte-level rune (the form vocabulary
// entries are stored in).
func byteLevel(s string) string {
	var b strings.Builder
	b.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}
