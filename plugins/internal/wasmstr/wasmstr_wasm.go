//go:build wasm

package wasmstr

// Equal reports a == b. It inlines: unequal lengths cost no call.
func Equal(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || sameString(a, b))
}

// HasPrefix reports strings.HasPrefix(s, prefix).
func HasPrefix(s, prefix string) bool { return hasPrefixWords(s, prefix) }

// RuneCount returns utf8.RuneCountInString(s).
func RuneCount(s string) int { return runeCountWords(s) }
