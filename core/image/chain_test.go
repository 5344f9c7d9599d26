package image

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSmartResize(t *testing.T) {
	cases := []struct{ h, w, wh, ww int }{
		{256, 455, 256, 448},
		{256, 340, 256, 352},
		{256, 256, 256, 256},
		{224, 224, 256, 256}, // min_pixels path: beta·224 = 255.99999999999997 → ceil → 8·32
		{480, 848, 480, 832}, // round(26.5) = 26 (half to even)
		{340, 340, 352, 352}, // round(10.625) = 11
		{48, 48, 256, 256},
		{5000, 5000, 4096, 4096}, // max_pixels path
		{10, 1999, 32, 3648},     // ratio 199.9 allowed
	}
	for _, c := range cases {
		h, w, err := SmartResize(c.h, c.w, 32, 65536, 16777216)
		require.NoError(t, err)
		require.Equal(t, [2]int{c.wh, c.ww}, [2]int{h, w}, "%dx%d", c.h, c.w)
	}
	_, _, err := SmartResize(10, 2001, 32, 65536, 16777216)
	require.ErrorIs(t, err, ErrSmartResize)
}

func TestSmallestMaxSizeAndCrop(t *testing.T) {
	w, h := SmallestMaxSizeDims(320, 180, 256)
	require.Equal(t, [2]int{455, 256}, [2]int{w, h})
	w, h = SmallestMaxSizeDims(640, 480, 256)
	require.Equal(t, [2]int{341, 256}, [2]int{w, h})
	w, h = SmallestMaxSizeDims(256, 300, 256) // scale 1: no-op
	require.Equal(t, [2]int{256, 300}, [2]int{w, h})
	x0, y0, cw, ch := CenterCropRect(455, 256, 0.95)
	require.Equal(t, [4]int{11, 6, 432, 243}, [4]int{x0, y0, cw, ch})
	side, lx, ly := LetterBoxDims(320, 180)
	require.Equal(t, [3]int{320, 0, 70}, [3]int{side, lx, ly})

	cfg := DefaultDROIDChain()
	s, err := cfg.Sizes(320, 180)
	require.NoError(t, err)
	require.Equal(t, ChainSizes{
		Input: Size{320, 180}, LetterBox: Size{320, 180}, Resize1: Size{455, 256},
		CropX: 11, CropY: 6, Crop: Size{432, 243}, Eval: Size{455, 256},
		Resized: Size{448, 256}, Grid: Grid{1, 16, 28},
	}, s)
	require.Equal(t, 112, s.Grid.Tokens(2))

	cfg.LetterBox = true
	s, err = cfg.Sizes(320, 180)
	require.NoError(t, err)
	require.Equal(t, Grid{1, 16, 16}, s.Grid)

	cfg = DefaultDROIDChain()
	cfg.ShortestEdge = 0 // fixed Resize(256, 256) recipe
	cfg.CropFraction = 230.0 / 256
	s, err = cfg.Sizes(640, 480)
	require.NoError(t, err)
	require.Equal(t, Size{230, 230}, s.Crop)
	require.Equal(t, Size{256, 256}, s.Eval)
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultDROIDChain()
	require.NoError(t, cfg.Validate())
	bad := cfg
	bad.CropFraction = 0
	require.ErrorIs(t, bad.Validate(), ErrConfig)
	bad = cfg
	bad.ShortestEdge, bad.TargetH = 0, 0
	require.ErrorIs(t, bad.Validate(), ErrConfig)
	bad = cfg
	bad.Std[1] = 0
	require.ErrorIs(t, bad.Validate(), ErrConfig)
	_, err := NewWorkspace(bad)
	require.ErrorIs(t, err, ErrConfig)
}

func TestNormLUT(t *testing.T) {
	cfg := DefaultDROIDChain()
	l := NewNormLUT(&cfg)
	for x := 0; x < 256; x++ {
		want := (float32(x) - 127.5) / 127.5
		for c := 0; c < 3; c++ {
			require.Equal(t, want, l.V[c][x])
		}
	}
	require.Equal(t, float32(-1), l.V[0][0])
	require.Equal(t, float32(1), l.V[0][255])
}

// TestPatchifyIndexForm checks Patchify against the index form of
// transformers' view/permute (Qwen2VLImageProcessor's patch flattening),
// for DROID and for a
// non-default patch/merge/temporal configuration.
func TestPatchifyIndexForm(t *testing.T) {
	for _, c := range []struct{ p, m, tp, w, h int }{{16, 2, 2, 448, 256}, {4, 3, 3, 36, 24}} {
		cfg := DefaultDROIDChain()
		cfg.PatchSize, cfg.MergeSize, cfg.TemporalPatchSize = c.p, c.m, c.tp
		img := &RGB{W: c.w, H: c.h, Pix: pattern(7, c.w, c.h, 3, "noise")}
		lut := NewNormLUT(&cfg)
		rows := cfg.PatchifyRows(c.w, c.h)
		dst := make([]float32, rows*cfg.RowWidth())
		g, err := cfg.Patchify(dst, img, lut)
		require.NoError(t, err)
		require.Equal(t, Grid{1, c.h / c.p, c.w / c.p}, g)
		gh, gw, p, m, tp := g.H, g.W, c.p, c.m, c.tp
		for bh := 0; bh < gh/m; bh++ {
			for bw := 0; bw < gw/m; bw++ {
				for mi := 0; mi < m; mi++ {
					for mj := 0; mj < m; mj++ {
						r := (bh*(gw/m)+bw)*m*m + mi*m + mj
						for ch := 0; ch < 3; ch++ {
							for tt := 0; tt < tp; tt++ {
								for py := 0; py < p; py++ {
									for px := 0; px < p; px++ {
										col := ((ch*tp+tt)*p+py)*p + px
										y, x := (bh*m+mi)*p+py, (bw*m+mj)*p+px
										want := lut.V[ch][img.Pix[(y*c.w+x)*3+ch]]
										if dst[r*cfg.RowWidth()+col] != want {
											t.Fatalf("p%d m%d: row %d col %d", p, m, r, col)
										}
									}
								}
							}
						}
					}
				}
			}
		}
		_, err = cfg.Patchify(dst[1:], img, lut)
		require.Error(t, err)
		_, err = cfg.Patchify(dst, &RGB{W: c.w - 1, H: c.h, Pix: img.Pix}, lut)
		require.Error(t, err)
	}
}

// TestPipelineConcurrent encodes the case-A frames from many goroutines at
// once (run with -race) and checks every result equals the sequential one.
func TestPipelineConcurrent(t *testing.T) {
	frames := caseAFrames(t)
	p, err := NewPipeline(DefaultDROIDChain())
	require.NoError(t, err)
	n := 4 * 448 * 1536
	want := make([]float32, n)
	grids := make([]Grid, 4)
	require.NoError(t, p.EncodeFrames(frames, want, grids, 1))
	done := make(chan []float32)
	for k := 0; k < 4; k++ {
		go func() {
			got := make([]float32, n)
			g := make([]Grid, 4)
			if err := p.EncodeFrames(frames, got, g, 4); err != nil {
				done <- nil
				return
			}
			done <- got
		}()
	}
	for k := 0; k < 4; k++ {
		got := <-done
		require.NotNil(t, got)
		require.Equal(t, want, got)
	}
	require.Error(t, p.EncodeFrames(frames, want[:10], grids, 4))
}

// FuzzChainSizes: the size arithmetic never panics and its invariants hold
// for any input size and shortest edge.
func FuzzChainSizes(f *testing.F) {
	f.Add(320, 180, 256, false)
	f.Add(1, 4096, 256, true)
	f.Add(4096, 64, 17, false)
	f.Fuzz(func(t *testing.T, w, h, edge int, lb bool) {
		if w < 1 || h < 1 || w > 1<<14 || h > 1<<14 || edge < 1 || edge > 1<<12 {
			return
		}
		cfg := DefaultDROIDChain()
		cfg.ShortestEdge, cfg.LetterBox = edge, lb
		s, err := cfg.Sizes(w, h)
		if err != nil {
			return
		}
		if min(s.Eval.W, s.Eval.H) != edge && s.Crop.W*s.Crop.H > 0 && !(min(s.Crop.W, s.Crop.H) == edge) {
			// SmallestMaxSize puts the short side at edge unless rounding of
			// the long side is a no-op; the short side is exact.
			t.Fatalf("%dx%d edge %d: eval %v", w, h, edge, s.Eval)
		}
		f := cfg.Factor()
		if s.Resized.W%f != 0 || s.Resized.H%f != 0 || s.Resized.W < f || s.Resized.H < f {
			t.Fatalf("%dx%d: resized %v not a multiple of %d", w, h, s.Resized, f)
		}
		if s.CropX < 0 || s.CropY < 0 || s.CropX+s.Crop.W > s.Resize1.W || s.CropY+s.Crop.H > s.Resize1.H {
			t.Fatalf("%dx%d: crop out of bounds %+v", w, h, s)
		}
	})
}

// FuzzResize runs both resizers on small random sizes: no panics, and the
// OpenCV path classification is consistent with the scales.
func FuzzResize(f *testing.F) {
	f.Add(uint8(10), uint8(7), uint8(3), uint8(20), uint8(3), uint32(1))
	f.Fuzz(func(t *testing.T, sw, sh, dw, dh, cn uint8, seed uint32) {
		w0, h0, w1, h1, c := int(sw%96)+1, int(sh%96)+1, int(dw%96)+1, int(dh%96)+1, int(cn%4)+1
		src := pattern(seed, w0, h0, c, "noise")
		dst := make([]uint8, w1*h1*c)
		var a AreaResizer
		if err := a.ResizeArea(dst, w1, h1, src, w0, h0, c); err != nil {
			t.Fatal(err)
		}
		var b BicubicResizer
		for _, k := range []BicubicKind{BicubicTorch, BicubicPillow} {
			if err := b.ResizeBicubic(k, dst, w1, h1, src, w0, h0, c); err != nil {
				t.Fatal(err)
			}
		}
		// SIMD kernels must equal the scalar code.
		simdA := append([]uint8(nil), dst...)
		_ = a.ResizeArea(simdA, w1, h1, src, w0, h0, c)
		simdB := append([]uint8(nil), dst...)
		_ = b.ResizeBicubic(BicubicTorch, simdB, w1, h1, src, w0, h0, c)
		forceScalar = true
		scalA := append([]uint8(nil), dst...)
		_ = a.ResizeArea(scalA, w1, h1, src, w0, h0, c)
		scalB := append([]uint8(nil), dst...)
		_ = b.ResizeBicubic(BicubicTorch, scalB, w1, h1, src, w0, h0, c)
		forceScalar = false
		if !bytes.Equal(simdA, scalA) || !bytes.Equal(simdB, scalB) {
			t.Fatalf("%dx%d->%dx%d c%d: SIMD and scalar differ", w0, h0, w1, h1, c)
		}
		p := ResizeAreaPath(w0, h0, w1, h1)
		if (p == AreaFast || p == AreaGeneric) && (w1 > w0 || h1 > h0) {
			t.Fatalf("%dx%d->%dx%d classified %v", w0, h0, w1, h1, p)
		}
	})
}

// TestEncodeNoAllocs: after warm-up, the per-frame chain + patchify
// allocates nothing (Workspace and pooled Pipeline).
func TestEncodeNoAllocs(t *testing.T) {
	frames := caseAFrames(t)
	ws, err := NewWorkspace(DefaultDROIDChain())
	require.NoError(t, err)
	p, err := NewPipeline(DefaultDROIDChain())
	require.NoError(t, err)
	dst := make([]float32, 448*1536)
	_, err = ws.Encode(frames[0], dst)
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(5, func() { _, _ = ws.Encode(frames[1], dst) }))
	if raceEnabled {
		return // sync.Pool deliberately drops items under -race
	}
	_, _ = p.Encode(frames[0], dst)
	require.Zero(t, testing.AllocsPerRun(5, func() { _, _ = p.Encode(frames[2], dst) }))
}

// TestResizersNoAllocs: every resize path is allocation-free once its
// resizer has seen the sizes.
func TestResizersNoAllocs(t *testing.T) {
	src := pattern(9, 200, 120, 3, "soft")
	var a AreaResizer
	var b BicubicResizer
	for _, sz := range [][2]int{{100, 60}, {70, 50}, {300, 130}, {90, 240}} {
		dst := make([]uint8, 300*240*3)
		run := func() {
			require.NoError(t, a.ResizeArea(dst, sz[0], sz[1], src, 200, 120, 3))
			require.NoError(t, b.ResizeBicubic(BicubicTorch, dst, sz[0], sz[1], src, 200, 120, 3))
			require.NoError(t, b.ResizeBicubic(BicubicPillow, dst, sz[0], 120, src, 200, 120, 3))
			require.NoError(t, b.ResizeBicubic(BicubicTorch, dst, 200, sz[1], src, 200, 120, 3))
		}
		run()
		if allocs := testing.AllocsPerRun(3, run); allocs != 0 {
			t.Errorf("%v: %v allocs per run", sz, allocs)
		}
	}
}

// TestPatchifyFastMatchesGeneric compares the SIMD kernels (AVX-512 where
// the CPU has it, and SSE) and patchify16x2 with the generic loop on random
// frames and a non-default LUT, on aligned and unaligned destinations.
func TestPatchifyFastMatchesGeneric(t *testing.T) {
	defer func() {
		forceScalar, forceNoAVX512Patchify, forceNoAVX2Patchify, forceNoFMANorm = false, false, false, false
	}()
	for _, norm := range []struct {
		name      string
		mean, std [3]float32
	}{
		{"clip", [3]float32{0.48145466, 0.4578275, 0.40821073}, [3]float32{0.26862954, 0.26130258, 0.27577711}},
		{"half", [3]float32{0.5, 0.5, 0.5}, [3]float32{0.5, 0.5, 0.5}},
		{"imagenet", [3]float32{0.485, 0.456, 0.406}, [3]float32{0.229, 0.224, 0.225}},
		{"odd", [3]float32{0, 1, 0.3333333}, [3]float32{1, 0.0001, 3.75}},
	} {
		cfg := DefaultDROIDChain()
		cfg.Mean, cfg.Std = norm.mean, norm.std
		lut := NewNormLUT(&cfg)
		for i, sz := range [][2]int{{32, 32}, {448, 256}, {64, 96}} {
			img := &RGB{W: sz[0], H: sz[1], Pix: pattern(uint32(i+7), sz[0], sz[1], 3, "noise")}
			n := cfg.PatchifyRows(img.W, img.H) * cfg.RowWidth()
			slow := make([]float32, n)
			forceScalar = true
			_, err := cfg.Patchify(slow, img, lut)
			require.NoError(t, err)
			forceScalar = false
			for _, k := range []struct {
				name                 string
				noAVX512, noAVX2, ne bool
			}{{"best", false, false, false}, {"avx2", true, false, false}, {"avx2-div", true, false, true}, {"sse", true, true, false}} {
				forceNoAVX512Patchify, forceNoAVX2Patchify, forceNoFMANorm = k.noAVX512, k.noAVX2, k.ne
				for _, off := range []int{0, 1} {
					fast := make([]float32, n+off)[off:]
					_, err = cfg.Patchify(fast, img, lut)
					require.NoError(t, err)
					require.Equal(t, slow, fast, "%s %dx%d %s offset %d", norm.name, img.W, img.H, k.name, off)
				}
			}
			forceNoAVX512Patchify, forceNoAVX2Patchify, forceNoFMANorm = false, false, false
		}
	}
}
