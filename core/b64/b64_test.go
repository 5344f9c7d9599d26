package b64

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// levels are the kernel choices Decode can make, best first; on a CPU
// without AVX-512 "best" is the AVX2 kernel, without AVX2 the portable code.
var levels = []struct {
	name               string
	avx2Only, portable bool
}{{"best", false, false}, {"avx2", true, false}, {"portable", false, true}}

// check decodes src with Decode at every level and with encoding/base64
// and requires the same bytes, count and error, and no byte of dst
// written past the count (the kernels store whole blocks only).
func check(t testing.TB, src []byte) {
	want := make([]byte, DecodedLen(len(src)))
	wn, werr := base64.StdEncoding.Decode(want, src)
	for _, l := range levels {
		forceAVX2, forcePortable = l.avx2Only, l.portable
		got := make([]byte, len(want)+8)
		for i := range got {
			got[i] = 0xa5
		}
		gn, gerr := Decode(got[:len(want)], src)
		forceAVX2, forcePortable = false, false
		if gn != wn || (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Fatalf("%s len %d: got (%d, %v), want (%d, %v)", l.name, len(src), gn, gerr, wn, werr)
		}
		if string(got[:gn]) != string(want[:wn]) {
			t.Fatalf("%s len %d: bytes differ", l.name, len(src))
		}
		for i := len(want); i < len(got); i++ {
			if got[i] != 0xa5 {
				t.Fatalf("%s len %d: byte %d past dst written", l.name, len(src), i)
			}
		}
	}
}

// TestEveryByteEveryLane puts each of the 256 byte values at each of the
// 64 positions of the first block of valid base64 (and of the second, so
// the kernels first decode a block and then stop): the SIMD kernels must
// stop exactly where encoding/base64's alphabet check fails.
func TestEveryByteEveryLane(t *testing.T) {
	raw := make([]byte, 150)
	for i := range raw {
		raw[i] = byte(i*37 + 11)
	}
	enc := []byte(base64.StdEncoding.EncodeToString(raw)) // 200 characters, 3 whole blocks
	for b := range 256 {
		for pos := range 128 {
			c := append([]byte(nil), enc...)
			c[pos] = byte(b)
			check(t, c)
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
// (best kernel, then the AVX2 one) next to encoding/base64.
func BenchmarkDecode(b *testing.B) {
	raw := make([]byte, 26000)
	for i := range raw {
		raw[i] = byte(i * 131)
	}
	src := []byte(base64.StdEncoding.EncodeToString(raw))
	dst := make([]byte, DecodedLen(len(src)))
	defer func() { forceAVX2 = false }()
	for _, c := range []struct {
		name string
		avx2 bool
		fn   func([]byte, []byte) (int, error)
	}{{"b64", false, Decode}, {"b64-avx2", true, Decode}, {"stdlib", false, base64.StdEncoding.Decode}} {
		b.Run(c.name, func(b *testing.B) {
			forceAVX2 = c.avx2
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
