package b64

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// check decodes src with Decode (SIMD and portable) and with
// encoding/base64 and requires the same bytes, count and error.
func check(t testing.TB, src []byte) {
	want := make([]byte, DecodedLen(len(src)))
	wn, werr := base64.StdEncoding.Decode(want, src)
	for _, portable := range []bool{false, true} {
		forcePortable = portable
		got := make([]byte, len(want))
		gn, gerr := Decode(got, src)
		forcePortable = false
		if gn != wn || (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Fatalf("portable=%v len %d: got (%d, %v), want (%d, %v)", portable, len(src), gn, gerr, wn, werr)
		}
		if string(got[:gn]) != string(want[:wn]) {
			t.Fatalf("portable=%v len %d: bytes differ", portable, len(src))
		}
	}
}

func TestDecodeMatchesStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 600; n++ {
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		enc := []byte(base64.StdEncoding.EncodeToString(raw))
		check(t, enc)
		if len(enc) == 0 {
			continue
		}
		// One corrupted character anywhere, a newline, a '=' in the
		// middle, a byte ≥ 0x80, truncation.
		for _, bad := range []byte{'!', '\n', '\r', '=', 0x80, 0xff, 'A' + 128, 0} {
			c := append([]byte(nil), enc...)
			c[rng.IntN(len(c))] = bad
			check(t, c)
		}
		check(t, enc[:len(enc)-1])
	}
	// MIME-style line breaks every 76 characters: stdlib skips them.
	raw := make([]byte, 5000)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	s := base64.StdEncoding.EncodeToString(raw)
	var b strings.Builder
	for i := 0; i < len(s); i += 76 {
		b.WriteString(s[i:min(i+76, len(s))])
		b.WriteString("\r\n")
	}
	check(t, []byte(b.String()))
}

func TestDecodeString(t *testing.T) {
	s := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("gr00tgw camera frame ", 40)))
	dst := make([]byte, DecodedLen(len(s)))
	n, err := DecodeString(dst, s)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("gr00tgw camera frame ", 40), string(dst[:n]))
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(base64.StdEncoding.EncodeToString(make([]byte, 200))))
	f.Add([]byte("QUJD\nREVG"))
	f.Add([]byte(strings.Repeat("A", 130) + "=="))
	f.Fuzz(func(t *testing.T, src []byte) { check(t, src) })
}

// BenchmarkDecode: one DROID frame's base64 (a 26 KB PNG), this package
// next to encoding/base64.
func BenchmarkDecode(b *testing.B) {
	raw := make([]byte, 26000)
	for i := range raw {
		raw[i] = byte(i * 131)
	}
	src := []byte(base64.StdEncoding.EncodeToString(raw))
	dst := make([]byte, DecodedLen(len(src)))
	for _, c := range []struct {
		name string
		fn   func([]byte, []byte) (int, error)
	}{{"b64", Decode}, {"stdlib", base64.StdEncoding.Decode}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := c.fn(dst, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
