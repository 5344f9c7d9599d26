package wasmstr

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var cases = []string{"", "a", "ab", "abc", "abcd", "abcde", "state.", "float32", "float64", "eef_9d", "abcdefgh", "abcdefghi",
	"exterior_image_1_left", "exterior_image_1_lefT", "oxe_droid_relative_eef_relative_joint", "héllo wörld, ünïcode ✓", "\x80"}

// TestWordsMatchOperators: the wasm implementations agree with ==,
// strings.HasPrefix and utf8.RuneCountInString on every pair of cases
// and every prefix of them.
func TestWordsMatchOperators(t *testing.T) {
	for _, a := range cases {
		if got, want := runeCountWords(a), utf8.RuneCountInString(a); got != want {
			t.Errorf("runeCountWords(%q) = %d, want %d", a, got, want)
		}
		for _, b := range cases {
			check(t, a, b)
		}
		for i := range len(a) + 1 {
			check(t, a, a[:i])
			check(t, a[:i], a)
			// Same content, different memory.
			c := strings.Clone(a[:i])
			check(t, a[:i], c)
			check(t, a, c)
		}
	}
}

func check(t *testing.T, a, b string) {
	t.Helper()
	if got := equalWords(a, b); got != (a == b) {
		t.Errorf("equalWords(%q, %q) = %v", a, b, got)
	}
	if got := hasPrefixWords(a, b); got != strings.HasPrefix(a, b) {
		t.Errorf("hasPrefixWords(%q, %q) = %v", a, b, got)
	}
	if Equal(a, b) != (a == b) || HasPrefix(a, b) != strings.HasPrefix(a, b) {
		t.Errorf("Equal/HasPrefix(%q, %q) disagree with the operators", a, b)
	}
}

func FuzzWords(f *testing.F) {
	for _, c := range cases {
		f.Add(c, c)
		f.Add(c, c+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		check(t, a, b)
		if got, want := runeCountWords(a), utf8.RuneCountInString(a); got != want {
			t.Errorf("runeCountWords(%q) = %d, want %d", a, got, want)
		}
	})
}

// TestEqualWordsEveryPosition: equalWords finds a single differing byte at
// every position of every length up to 80 (each of sameString's word
// patterns), in strings at different addresses.
func TestEqualWordsEveryPosition(t *testing.T) {
	for n := 0; n <= 80; n++ {
		a := make([]byte, n)
		for i := range a {
			a[i] = byte(i*13 + 5)
		}
		if !equalWords(string(a), string(a)) {
			t.Fatalf("n=%d: equal strings reported different", n)
		}
		for i := range n {
			b := append([]byte(nil), a...)
			b[i] ^= 0x20
			if equalWords(string(a), string(b)) {
				t.Fatalf("n=%d: difference at %d not found", n, i)
			}
		}
	}
}

// TestRuneCountWordsEveryPosition: runeCountWords matches
// utf8.RuneCountInString on ASCII strings of every length up to 80 and
// with a multi-byte rune or a stray continuation byte at every position.
func TestRuneCountWordsEveryPosition(t *testing.T) {
	for n := 0; n <= 80; n++ {
		a := strings.Repeat("abcdefghij", 9)[:n]
		if got, want := runeCountWords(a), utf8.RuneCountInString(a); got != want {
			t.Fatalf("n=%d: %d, want %d", n, got, want)
		}
		for i := range n {
			for _, ins := range []string{"é", "✓", "\x80"} {
				b := a[:i] + ins + a[i:]
				if got, want := runeCountWords(b), utf8.RuneCountInString(b); got != want {
					t.Fatalf("%q: %d, want %d", b, got, want)
				}
			}
		}
	}
}

// TestKeyIs: Key.Is (both builds' forms) agrees with == for every key
// length 8–16, on equal strings, every single-byte change and other
// lengths.
func TestKeyIs(t *testing.T) {
	for n := 8; n <= 16; n++ {
		b := []byte("abcdefghijklmnopqrstuvwxyz")[:n]
		k := NewKey(string(b))
		for _, a := range []string{string(b), string(b[:n-1]), string(b) + "x", ""} {
			if k.isWords(a) != (a == k.String()) || k.Is(a) != (a == k.String()) {
				t.Errorf("key %q, a %q", k.String(), a)
			}
		}
		for i := range n {
			c := append([]byte(nil), b...)
			c[i] ^= 0x20
			if k.isWords(string(c)) || k.Is(string(c)) {
				t.Errorf("key %q matches %q", k.String(), c)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewKey(\"short\") did not panic")
		}
	}()
	NewKey("short")
}
