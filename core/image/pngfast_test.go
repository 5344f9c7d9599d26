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
