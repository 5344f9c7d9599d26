//go:build !wasm

package wasmstr

import "unicode/utf8"

// Equal reports a == b.
func Equal(a, b string) bool { return a == b }

// HasPrefix reports strings.HasPrefix(s, prefix).
func HasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// RuneCount returns utf8.RuneCountInString(s).
func RuneCount(s string) int { return utf8.RuneCountInString(s) }

// Is reports a == k.String().
func (k *Key) Is(a string) bool { return a == k.s }
