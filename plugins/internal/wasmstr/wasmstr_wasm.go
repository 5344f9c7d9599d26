//go:build wasm

package wasmstr

import "unsafe"

// Equal reports a == b. It inlines: unequal lengths, and equal strings
// with the same data pointer (a key compared with the constant it was
// canonicalised to, see pdk.Runner), cost no call.
func Equal(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || sameString(a, b))
}

// HasPrefix reports strings.HasPrefix(s, prefix).
func HasPrefix(s, prefix string) bool { return hasPrefixWords(s, prefix) }

// RuneCount returns utf8.RuneCountInString(s).
func RuneCount(s string) int { return runeCountWords(s) }

// Is reports a == k.String(). It inlines: two 8-byte compares, no call.
func (k *Key) Is(a string) bool { return k.isWords(a) }
