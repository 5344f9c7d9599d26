package image

import (
	"bytes"
	goimage "image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// stdlibRGB decodes with image/png and the generic conversion only.
func stdlibRGB(data []byte) (*RGB, error) {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var out RGB
	toRGB(&out, img)
	return &out, nil
}

func TestPNGFastMatchesStdlib(t *testing.T) {
	var inputs [][]byte
	for _, kind := range []string{"noise", "soft"} {
		for _, sz := range [][2]int{{1, 1}, {7, 3}, {64, 64}, {321, 17}} {
			w, h := sz[0], sz[1]
			src := pattern(uint32(w*h), w, h, 4, kind)
			opaque := goimage.NewRGBA(goimage.Rect(0, 0, w, h))
			alpha := goimage.NewNRGBA(goimage.Rect(0, 0, w, h))
			for i := 0; i < w*h; i++ {
				copy(opaque.Pix[4*i:], src[4*i:4*i+3])
				opaque.Pix[4*i+3] = 255
				copy(alpha.Pix[4*i:], src[4*i:4*i+4])
			}
			inputs = append(inputs, pngBytes(t, opaque), pngBytes(t, alpha))
			// Uncompressed (stored deflate blocks) too.
			var buf bytes.Buffer
			require.NoError(t, (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&buf, opaque))
			inputs = append(inputs, buf.Bytes())
		}
	}
	names, _ := filepath.Glob(filepath.Join(caseADir, "frame_*.png"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		inputs = append(inputs, b)
	}
	var fd pngFast
	for i, in := range inputs {
		want, err := stdlibRGB(in)
		require.NoError(t, err)
		var got RGB
		require.True(t, fd.decode(&got, in), "input %d not handled by the fast path", i)
		require.Equal(t, *want, got, "input %d", i)
	}
	// Corruptions are left to the stdlib decoder.
	bad := append([]byte(nil), inputs[0]...)
	bad[len(bad)-20] ^= 0xff
	var got RGB
	require.False(t, fd.decode(&got, bad))
	require.False(t, fd.decode(&got, inputs[0][:len(inputs[0])-12])) // no IEND
}

// FuzzPNGFast: whenever the fast path decodes, image/png must decode the
// same bytes to the same pixels.
func FuzzPNGFast(f *testing.F) {
	img := goimage.NewNRGBA(goimage.Rect(0, 0, 9, 5))
	copy(img.Pix, pattern(5, 9, 5, 4, "soft"))
	f.Add(pngBytes(f, img))
	op := goimage.NewRGBA(goimage.Rect(0, 0, 5, 9))
	for i := range op.Pix {
		op.Pix[i] = 255 - uint8(i)
	}
	f.Add(pngBytes(f, op))
	var fd pngFast
	f.Fuzz(func(t *testing.T, b []byte) {
		var got RGB
		if !fd.decode(&got, b) {
			return
		}
		want, err := stdlibRGB(b)
		if err != nil {
			t.Fatalf("fast path accepted what image/png rejects: %v", err)
		}
		if want.W != got.W || want.H != got.H || !bytes.Equal(want.Pix, got.Pix) {
			t.Fatal("fast path and image/png disagree")
		}
	})
}

// TestPaethSIMDMatchesScalar compares the SIMD Paeth kernel with the scalar
// reference on random rows of every length up to 64 pixels, plus long rows
// with smooth content (where ties between predictors are frequent).
func TestPaethSIMDMatchesScalar(t *testing.T) {
	rng := uint32(12345)
	next := func() uint8 { rng = rng*1664525 + 1013904223; return uint8(rng >> 24) }
	check := func(cur, prev []uint8) {
		t.Helper()
		want := append([]uint8(nil), cur...)
		paeth(want, prev, 3)
		got := append([]uint8(nil), cur...)
		if !paethFast(got, prev, 3) {
			if len(cur) >= 6 && simdAvailable {
				t.Fatalf("len %d: SIMD path not taken", len(cur))
			}
			paeth(got, prev, 3)
		}
		require.Equal(t, want, got, "row of %d pixels", len(cur)/3)
	}
	for n := 1; n <= 64; n++ {
		for rep := 0; rep < 20; rep++ {
			cur, prev := make([]uint8, 3*n), make([]uint8, 3*n)
			for i := range cur {
				cur[i], prev[i] = next(), next()
			}
			check(cur, prev)
		}
	}
	for _, n := range []int{320, 455, 1920} {
		for rep := 0; rep < 50; rep++ {
			cur, prev := make([]uint8, 3*n), make([]uint8, 3*n)
			base := next()
			for i := range cur {
				cur[i] = next() & (uint8(rep) & 7)
				prev[i] = base + uint8(i/7) + next()&1
			}
			check(cur, prev)
		}
	}
}

// TestPaeth2SIMDMatchesScalar compares the two-row wavefront kernel with
// two scalar Paeth rows on random and smooth inputs of many widths.
func TestPaeth2SIMDMatchesScalar(t *testing.T) {
	rng := uint32(777)
	next := func() uint8 { rng = rng*1664525 + 1013904223; return uint8(rng >> 24) }
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 320, 455, 1921} {
		for rep := 0; rep < 40; rep++ {
			// One buffer holding prev, row y, row y+1 back to back, as in a frame.
			buf := make([]uint8, 9*n)
			smooth := rep%2 == 1
			base := next()
			for i := range buf {
				if smooth {
					buf[i] = next() & (uint8(rep) & 7)
					if i < 3*n {
						buf[i] = base + uint8(i/5) + next()&1
					}
				} else {
					buf[i] = next()
				}
			}
			want := append([]uint8(nil), buf...)
			paeth(want[3*n:6*n], want[:3*n], 3)
			paeth(want[6*n:], want[3*n:6*n], 3)
			got := append([]uint8(nil), buf...)
			if !paeth2Fast(got[3*n:6*n], got[6*n:], got[:3*n], 3) {
				if n >= 2 && simdAvailable {
					t.Fatalf("n=%d: SIMD path not taken", n)
				}
				paeth(got[3*n:6*n], got[:3*n], 3)
				paeth(got[6*n:], got[3*n:6*n], 3)
			}
			require.Equal(t, want, got, "n=%d rep=%d", n, rep)
		}
	}
}

// TestPaeth4SIMDMatchesScalar compares the four-row AVX2 wavefront kernel
// (when the CPU has AVX2) with four scalar Paeth rows.
func TestPaeth4SIMDMatchesScalar(t *testing.T) {
	rng := uint32(4242)
	next := func() uint8 { rng = rng*1664525 + 1013904223; return uint8(rng >> 24) }
	taken := false
	for _, n := range []int{1, 3, 4, 5, 6, 7, 8, 9, 16, 33, 64, 320, 455, 1921} {
		for rep := 0; rep < 40; rep++ {
			buf := make([]uint8, 15*n) // prev + 4 rows, back to back
			smooth := rep%2 == 1
			base := next()
			for i := range buf {
				if smooth {
					buf[i] = next() & (uint8(rep) & 7)
					if i < 3*n {
						buf[i] = base + uint8(i/5) + next()&1
					}
				} else {
					buf[i] = next()
				}
			}
			row := func(b []uint8, k int) []uint8 { return b[3*n*k : 3*n*(k+1)] }
			want := append([]uint8(nil), buf...)
			for k := 1; k <= 4; k++ {
				paeth(row(want, k), row(want, k-1), 3)
			}
			got := append([]uint8(nil), buf...)
			if paeth4Fast(row(got, 1), row(got, 2), row(got, 3), row(got, 4), row(got, 0), 3) {
				taken = true
			} else {
				for k := 1; k <= 4; k++ {
					paeth(row(got, k), row(got, k-1), 3)
				}
			}
			require.Equal(t, want, got, "n=%d rep=%d", n, rep)
		}
	}
	if !taken {
		t.Log("AVX2 four-row Paeth not available here: only the fallback was compared")
	}
}
