package image

import (
	"bytes"
	"encoding/base64"
	"errors"
	goimage "image"
	"image/png"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func droidRule(t testing.TB) *AspectRule {
	t.Helper()
	r, err := NewAspectRule(DefaultDROIDChain(), 16, 28, DefaultLimits)
	require.NoError(t, err)
	return r
}

func TestDROIDAspectBand(t *testing.T) {
	start := time.Now()
	r := droidRule(t)
	t.Logf("NewAspectRule took %v", time.Since(start))
	lo, hi, ok := r.Band()
	require.True(t, ok)
	// 863/512 and 929/512: 256·ratio must land in [432, 464] after the
	// chain's roundings, i.e. about [1.6875, 1.8125] widened by rounding.
	require.Equal(t, 863.0/512, lo)
	require.Equal(t, 929.0/512, hi)
	t.Logf("band [%.6f, %.6f]", lo, hi)

	require.True(t, r.Accepts(320, 180))
	require.True(t, r.Accepts(1280, 720))
	require.True(t, r.Accepts(1920, 1080))
	require.False(t, r.Accepts(640, 480))
	require.False(t, r.Accepts(180, 320))
	err := r.Check(640, 480)
	require.ErrorIs(t, err, ErrAspect)
	require.EqualError(t, err, "frame aspect ratio not accepted: 640x480 (width/height 1.333) maps to a 16x22 patch grid (height x width), the layout needs 16x28: accepted width/height ratios span [1.686, 1.814]")
	require.ErrorIs(t, r.Check(63, 40), ErrFrameSize)
	require.ErrorIs(t, r.Check(4097, 2300), ErrFrameSize)
}

// TestDROIDAspectScan verifies the band numerically by running the chain's
// size arithmetic: (1) every height with every width whose ratio is in
// [1.5, 2.0] — the accepted ratios span exactly the band NewAspectRule
// computed, and everything strictly inside the analytic band is accepted;
// (2) a coarse scan of all sizes finds nothing accepted outside [1.5, 2.0].
func TestDROIDAspectScan(t *testing.T) {
	r := droidRule(t)
	lo, hi, _ := r.Band()
	cfg := DefaultDROIDChain()
	hstep, coarse := 1, 5
	if testing.Short() || raceEnabled {
		hstep, coarse = 7, 23
	}
	slo, shi := math.Inf(1), math.Inf(-1)
	n := 0
	for h := 64; h <= 4096; h += hstep {
		for w := max(64, h*3/2); w <= min(4096, 2*h); w++ {
			s, err := cfg.Sizes(w, h)
			if err != nil {
				t.Fatal(err)
			}
			ratio := float64(w) / float64(h)
			acc := s.Grid == (Grid{1, 16, 28})
			if acc != r.Accepts(w, h) {
				t.Fatalf("%dx%d: Accepts disagrees with Sizes", w, h)
			}
			if acc {
				n++
				slo, shi = min(slo, ratio), max(shi, ratio)
				if ratio < lo || ratio > hi {
					t.Fatalf("%dx%d accepted outside band", w, h)
				}
			} else if ratio > 1.6876 && ratio < 1.8124 {
				t.Fatalf("%dx%d (ratio %.4f) rejected: grid %v", w, h, ratio, s.Grid)
			}
		}
	}
	t.Logf("accepted %d sizes, ratio range [%.6f, %.6f]", n, slo, shi)
	if hstep == 1 {
		require.Equal(t, lo, slo)
		require.Equal(t, hi, shi)
	}
	for h := 64; h <= 4096; h += coarse {
		for w := 64; w <= 4096; w += coarse {
			ratio := float64(w) / float64(h)
			if ratio >= 1.5 && ratio <= 2 {
				continue
			}
			if r.Accepts(w, h) {
				t.Fatalf("%dx%d accepted", w, h)
			}
		}
	}
}

func TestLetterBoxRuleAcceptsAll(t *testing.T) {
	cfg := DefaultDROIDChain()
	cfg.LetterBox = true
	r, err := NewAspectRule(cfg, 16, 16, DefaultLimits)
	require.NoError(t, err)
	require.True(t, r.Accepts(640, 480))
	require.True(t, r.Accepts(320, 180))
	require.True(t, r.Accepts(64, 4096))
}

func encodePNG(t testing.TB, w, h int) []byte {
	img := goimage.NewRGBA(goimage.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

func TestDecodeFrameErrors(t *testing.T) {
	r := droidRule(t)
	var f RGB
	require.NoError(t, r.DecodeFrame(&f, "exterior_image_1_left", 0, encodePNG(t, 320, 180)))
	require.Equal(t, 320, f.W)

	err := r.DecodeFrame(&f, "exterior_image_1_left", 1, encodePNG(t, 640, 480))
	var fe *FrameError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "exterior_image_1_left", fe.Camera)
	require.Equal(t, 1, fe.Index)
	require.ErrorIs(t, err, ErrAspect)
	require.Contains(t, err.Error(), "images.exterior_image_1_left[1]: frame aspect ratio not accepted: 640x480")

	err = r.DecodeFrame(&f, "wrist_image_left", 0, encodePNG(t, 32, 18))
	require.ErrorIs(t, err, ErrFrameSize)
	require.Contains(t, err.Error(), "images.wrist_image_left[0]: frame size out of range: 32x18")

	_, err = r.DecodeFrameBase64(&f, "wrist_image_left", 1, "data:image/png;base64,"+base64.StdEncoding.EncodeToString(encodePNG(t, 640, 480)), nil)
	require.ErrorIs(t, err, ErrAspect)
	require.Contains(t, err.Error(), "images.wrist_image_left[1]: frame aspect ratio not accepted")
	_, err = r.DecodeFrameBase64(&f, "wrist_image_left", 1, "!!", nil)
	require.ErrorIs(t, err, ErrUndecodable)
	require.Contains(t, err.Error(), "images.wrist_image_left[1]: undecodable image: base64")
	_, err = r.DecodeFrameBase64(&f, "wrist_image_left", 1, base64.StdEncoding.EncodeToString(encodePNG(t, 320, 180)), nil)
	require.NoError(t, err)

	err = r.DecodeFrame(&f, "wrist_image_left", 1, []byte("not an image"))
	require.ErrorIs(t, err, ErrUndecodable)
	require.Contains(t, err.Error(), "images.wrist_image_left[1]: undecodable image")
}
