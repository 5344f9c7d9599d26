package envelope

import (
	"bytes"
	"testing"
)

// TestSameBytes: sameBytes agrees with bytes.Equal for every length up to
// 200 (all stride combinations) with no difference and with one differing
// byte at every position.
func TestSameBytes(t *testing.T) {
	for n := 0; n <= 200; n++ {
		a := make([]byte, n)
		for i := range a {
			a[i] = byte(i*7 + 1)
		}
		b := bytes.Clone(a)
		if !sameBytes(a, b) {
			t.Fatalf("n=%d: equal slices reported different", n)
		}
		for i := range n {
			b[i] ^= 0x10
			if sameBytes(a, b) {
				t.Fatalf("n=%d: difference at %d not found", n, i)
			}
			b[i] ^= 0x10
		}
		if n > 0 && sameBytes(a, b[:n-1]) {
			t.Fatalf("n=%d: different lengths reported equal", n)
		}
	}
}
