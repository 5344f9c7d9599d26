package wasmstr

import (
	"unicode/utf8"
	"unsafe"
)

// equalWords is Equal for wasm.
func equalWords(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || sameString(a, b))
}

// sameString compares two strings of equal length (0 included). It stays a
// call so that Equal inlines.
//
//go:noinline
func sameString(a, b string) bool {
	n := len(a)
	pa, pb := unsafe.StringData(a), unsafe.StringData(b)
	if pa == pb {
		return true
	}
	// Up to 64 bytes without a loop or a second call (in a wasm guest each
	// costs more than the compare itself): overlapping 8-byte words.
	x, y := unsafe.Pointer(pa), unsafe.Pointer(pb)
	w := func(p unsafe.Pointer, i int) uint64 { return *(*uint64)(unsafe.Add(p, i)) }
	switch {
	case n > 64:
		return same(pa, pb, n)
	case n > 32:
		return (w(x, 0)^w(y, 0))|(w(x, 8)^w(y, 8))|(w(x, 16)^w(y, 16))|(w(x, 24)^w(y, 24))|
			(w(x, n-32)^w(y, n-32))|(w(x, n-24)^w(y, n-24))|(w(x, n-16)^w(y, n-16))|(w(x, n-8)^w(y, n-8)) == 0
	case n > 16:
		return (w(x, 0)^w(y, 0))|(w(x, 8)^w(y, 8))|(w(x, n-16)^w(y, n-16))|(w(x, n-8)^w(y, n-8)) == 0
	case n >= 8:
		return *(*uint64)(x) == *(*uint64)(y) && *(*uint64)(unsafe.Add(x, n-8)) == *(*uint64)(unsafe.Add(y, n-8))
	case n >= 4:
		return *(*uint32)(x) == *(*uint32)(y) && *(*uint32)(unsafe.Add(x, n-4)) == *(*uint32)(unsafe.Add(y, n-4))
	}
	return same(pa, pb, n)
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
	return same(unsafe.StringData(s), unsafe.StringData(prefix), n)
}

// same compares n ≥ 0 bytes: above 16, 8 bytes per step and an overlapping last
// word; else two overlapping 8- or 4-byte words, or bytes for n < 4.
func same(pa, pb *byte, n int) bool {
	a, b := unsafe.Pointer(pa), unsafe.Pointer(pb)
	switch {
	case n > 16:
		for i := 0; i < n-8; i += 8 {
			if *(*uint64)(unsafe.Add(a, i)) != *(*uint64)(unsafe.Add(b, i)) {
				return false
			}
		}
		return *(*uint64)(unsafe.Add(a, n-8)) == *(*uint64)(unsafe.Add(b, n-8))
	case n >= 8: // two overlapping words, no loop
		return *(*uint64)(a) == *(*uint64)(b) && *(*uint64)(unsafe.Add(a, n-8)) == *(*uint64)(unsafe.Add(b, n-8))
	case n >= 4:
		return *(*uint32)(a) == *(*uint32)(b) && *(*uint32)(unsafe.Add(a, n-4)) == *(*uint32)(unsafe.Add(b, n-4))
	case n == 0:
		return true
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

// runeCountWords is RuneCount for wasm: an all-ASCII string (the usual
// instruction) is checked 32 bytes per loop trip plus an overlapping last
// word, with no per-byte tail loop; anything else is counted by
// utf8.RuneCountInString.
func runeCountWords(s string) int {
	n := len(s)
	if n < 8 {
		return utf8.RuneCountInString(s)
	}
	p := unsafe.Pointer(unsafe.StringData(s))
	w := func(i int) uint64 { return *(*uint64)(unsafe.Add(p, i)) }
	acc := w(n - 8)
	i := 0
	for ; i+32 <= n; i += 32 {
		acc |= w(i) | w(i+8) | w(i+16) | w(i+24)
	}
	for ; i+8 <= n; i += 8 {
		acc |= w(i)
	}
	if acc&0x8080808080808080 == 0 {
		return n
	}
	return utf8.RuneCountInString(s)
}

// Key is a constant string of 8 to 16 bytes prepared for Is: its length
// and its first and last 8 bytes (overlapping when shorter than 16).
type Key struct {
	s      string
	n      int
	lo, hi uint64
}

// NewKey prepares k for Is. It panics unless 8 ≤ len(k) ≤ 16.
func NewKey(k string) Key {
	if len(k) < 8 || len(k) > 16 {
		panic("wasmstr: NewKey needs 8 to 16 bytes, got " + k)
	}
	p := unsafe.Pointer(unsafe.StringData(k))
	return Key{s: k, n: len(k), lo: *(*uint64)(p), hi: *(*uint64)(unsafe.Add(p, len(k)-8))}
}

// String returns the key.
func (k *Key) String() string { return k.s }

// isWords is Is for wasm: two word compares, no call.
func (k *Key) isWords(a string) bool {
	if len(a) != k.n {
		return false
	}
	p := unsafe.Pointer(unsafe.StringData(a))
	return *(*uint64)(p) == k.lo && *(*uint64)(unsafe.Add(p, k.n-8)) == k.hi
}
