package wasmstr

import (
	"unicode/utf8"
	"unsafe"
)

// equalWords is Equal for wasm.
func equalWords(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || sameString(a, b))
}

// sameString compares two non-empty strings of equal length. It stays a
// call so that Equal inlines.
//
//go:noinline
func sameString(a, b string) bool {
	pa, pb := unsafe.Pointer(unsafe.StringData(a)), unsafe.Pointer(unsafe.StringData(b))
	return pa == pb || same(pa, pb, len(a))
}

// hasPrefixWords is HasPrefix for wasm.
func hasPrefixWords(s, prefix string) bool {
	n := len(prefix)
	if n > len(s) {
		return false
	}
	if n == 0 {
		return true
	}
	return same(unsafe.Pointer(unsafe.StringData(s)), unsafe.Pointer(unsafe.StringData(prefix)), n)
}

// same compares n ≥ 1 bytes: 8 bytes per step and an overlapping last
// word, or two overlapping 4-byte words, or bytes for n < 4.
func same(a, b unsafe.Pointer, n int) bool {
	switch {
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			if *(*uint64)(unsafe.Add(a, i)) != *(*uint64)(unsafe.Add(b, i)) {
				return false
			}
		}
		return *(*uint64)(unsafe.Add(a, n-8)) == *(*uint64)(unsafe.Add(b, n-8))
	case n >= 4:
		return *(*uint32)(a) == *(*uint32)(b) && *(*uint32)(unsafe.Add(a, n-4)) == *(*uint32)(unsafe.Add(b, n-4))
	default:
		x := *(*uint8)(a) ^ *(*uint8)(b)
		if n > 1 {
			x |= *(*uint8)(unsafe.Add(a, 1)) ^ *(*uint8)(unsafe.Add(b, 1))
		}
		if n > 2 {
			x |= *(*uint8)(unsafe.Add(a, 2)) ^ *(*uint8)(unsafe.Add(b, 2))
		}
		return x == 0
	}
}

// runeCountWords is RuneCount for wasm: ASCII 8 bytes at a time.
func runeCountWords(s string) int {
	n := len(s)
	p := unsafe.Pointer(unsafe.StringData(s))
	i := 0
	for ; i+8 <= n; i += 8 {
		if *(*uint64)(unsafe.Add(p, i))&0x8080808080808080 != 0 {
			return i + utf8.RuneCountInString(s[i:])
		}
	}
	return i + utf8.RuneCountInString(s[i:])
}
