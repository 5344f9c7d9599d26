package image

import (
	"fmt"
	"math"
)

// This file holds two separable antialiased bicubic resamplers (Keys
// cubic, a = −0.5) on 8-bit interleaved images:
//
//   - Torch: torch ≥ 2.1's CPU uint8 kernel behind
//     torchvision.transforms.v2.functional.resize(BICUBIC, antialias=True)
//     (ATen UpSampleKernel.cpp _compute_index_ranges_int16_weights +
//     UpSampleKernelAVXAntialias.h):
//     float64 weights normalised per output, quantised to int16 with one
//     adaptive precision P per axis, round half away from zero; each pass
//     computes clamp_u8((2^(P−1) + Σ w·x) >> P).
//   - Pillow: PIL Image.resize(BICUBIC) (libImaging/Resample.c): the same
//     supports and centres with Pillow's filter expression, 22-bit weights.
//
// Both run the horizontal pass first into a uint8 buffer, then the vertical
// pass, and skip an axis whose size does not change.

// BicubicKind selects the bicubic flavour.
type BicubicKind int

const (
	// BicubicTorch is torch ≥ 2.1's CPU uint8 antialiased kernel (the
	// reference for the Qwen fast image processor).
	BicubicTorch BicubicKind = iota
	// BicubicPillow is PIL's Image.resize(BICUBIC); used for ±1
	// cross-checks only.
	BicubicPillow
)

// bicubic filters. Every product is rounded explicitly so no FMA is formed.
func torchCubic(x float64) float64 {
	const a = -0.5
	x = math.Abs(x)
	if x < 1 {
		// ((A + 2) * x - (A + 3)) * x * x + 1
		return float64(float64(float64(float64((a+2)*x)-(a+3))*x)*x) + 1
	}
	if x < 2 {
		// ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
		return float64(float64(float64(float64(a*x)-5*a)*x)+8*a)*x - 4*a
	}
	return 0
}

func pillowCubic(x float64) float64 {
	const a = -0.5
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return float64(float64(float64(float64((a+2.0)*x)-(a+3.0))*x)*x) + 1
	}
	if x < 2 {
		// (((x - 5) * x + 8) * x - 4) * a
		return float64(float64(float64(float64(float64(x-5)*x)+8)*x)-4) * a
	}
	return 0
}

// bicubicTab is the quantised weight table of one axis.
type bicubicTab struct {
	in, out int
	kind    BicubicKind
	prec    uint
	ksize   int     // weights per output (stride of k)
	xmin    []int32 // first input index per output
	xsize   []int32 // taps per output
	k       []int32 // out*ksize quantised weights
	w       []float64

	// SIMD layout (see hresizeRGBSSE2): taps in pairs, 8 int16 per pair.
	npairs int
	xoff3  []int32
	simdW  []int16

	// Group-kernel tables (AVX2, AVX-512; hgroup.go) for gcn channels,
	// built on first use; gcn 0: not built for the current sizes.
	gcn  int
	gtab groupTab
	ztab zgroupTab
}

// groups builds (on first use for cn channels) the group-kernel tables of
// a horizontal pass over cn channels and returns t; a table's ok is false
// when its kernel cannot run this pass (uneven tap counts, weights beyond
// int16, rows narrower than a block or a window).
func (t *bicubicTab) groups(cn int) *bicubicTab {
	if t.gcn != cn {
		t.gcn = cn
		t.gtab.ok, t.ztab.ok = false, false
		n := int(t.xsize[0])
		even := n >= 1
		for _, s := range t.xsize {
			even = even && int(s) == n
		}
		if even && t.out*cn >= 32 {
			spec := groupSpec{
				width: t.out * cn, rowBytes: t.in * cn,
				np: (n + 1) / 2, pstride: 2 * cn, e: 8, overlap: true,
				phases: 1 + n%2,
				taps: func(j, ph int) (int, int) {
					i0 := (int(t.xmin[j/cn])-ph)*cn + j%cn
					if n == 1 {
						return i0 + ph*cn, i0 + ph*cn
					}
					return i0, i0 + cn
				},
				weight: func(j, p, tt, ph int) int32 {
					// Phase 1 puts a zero tap before the first.
					if k := 2*p + tt - ph; k >= 0 && k < n {
						return t.k[(j/cn)*t.ksize+k]
					}
					return 0
				},
			}
			t.gtab.build(spec)
			if t.ztab.build(spec, 4, useSharedWindow); !t.ztab.ok {
				t.ztab.build(spec, 4, false)
			}
		}
	}
	return t
}

func (t *bicubicTab) compute(in, out int, kind BicubicKind) {
	if t.in == in && t.out == out && t.kind == kind && t.k != nil {
		return
	}
	t.in, t.out, t.kind = in, out, kind
	t.gcn = 0
	scale := float64(in) / float64(out)
	filterscale := scale
	if filterscale < 1 {
		filterscale = 1
	}
	support := 2.0 * filterscale
	ksize := int(math.Ceil(support))*2 + 1
	t.ksize = ksize
	if cap(t.w) < out*ksize {
		t.w = make([]float64, out*ksize)
		t.k = make([]int32, out*ksize)
	}
	t.w, t.k = t.w[:out*ksize], t.k[:out*ksize]
	if cap(t.xmin) < out {
		t.xmin = make([]int32, out)
		t.xsize = make([]int32, out)
	}
	t.xmin, t.xsize = t.xmin[:out], t.xsize[:out]
	ss := 1 / filterscale
	filter := torchCubic
	if kind == BicubicPillow {
		filter = pillowCubic
	}
	wmax := 0.0
	for i := 0; i < out; i++ {
		var center float64
		if kind == BicubicPillow {
			center = (float64(i) + 0.5) * scale
		} else {
			center = scale * (float64(i) + 0.5)
		}
		xmin := max(int(center-support+0.5), 0)
		xsize := min(int(center+support+0.5), in) - xmin
		xsize = max(0, min(xsize, ksize))
		w := t.w[i*ksize : i*ksize+ksize]
		total := 0.0
		for j := 0; j < xsize; j++ {
			v := filter((float64(j+xmin) - center + 0.5) * ss)
			w[j] = v
			total += v
		}
		for j := xsize; j < ksize; j++ {
			w[j] = 0
		}
		if total != 0 {
			for j := 0; j < xsize; j++ {
				w[j] /= total
				wmax = max(wmax, w[j])
			}
		}
		t.xmin[i], t.xsize[i] = int32(xmin), int32(xsize)
	}
	if kind == BicubicPillow {
		t.prec = 22
	} else {
		// Largest P (≤ 22) with round(wmax·2^P) < 2^15, found the way
		// ATen (after Pillow-SIMD) does.
		var p uint
		for p = 0; p < 22; p++ {
			next := int(0.5 + wmax*float64(int(1)<<(p+1)))
			if next >= 1<<15 {
				break
			}
		}
		t.prec = p
	}
	scaleP := float64(int(1) << t.prec)
	for i, v := range t.w {
		v *= scaleP
		if v < 0 {
			t.k[i] = int32(int(-0.5 + v))
		} else {
			t.k[i] = int32(int(0.5 + v))
		}
	}
	t.pad()
	t.prepSIMD()
}

// prepSIMD lays the (padded) weights out for the SIMD horizontal kernel:
// per output, ceil(taps/2) pairs of {w0,w1}×4 as int16. Only when every
// weight fits int16 (always true for the torch kernel) and the prec is ≥ 1.
func (t *bicubicTab) prepSIMD() {
	t.npairs = 0
	n := 0
	for _, s := range t.xsize {
		n = max(n, int(s))
	}
	if t.prec < 1 || n == 0 || n > 8 {
		return
	}
	for i := range t.xsize {
		if int(t.xsize[i]) != n {
			return // padding failed (tiny inputs): scalar only
		}
	}
	for _, v := range t.k {
		if v < -32768 || v > 32767 {
			return
		}
	}
	np := (n + 1) / 2
	t.xoff3 = growI32(t.xoff3, t.out)
	if cap(t.simdW) < t.out*np*8 {
		t.simdW = make([]int16, t.out*np*8)
	}
	t.simdW = t.simdW[:t.out*np*8]
	for i := 0; i < t.out; i++ {
		t.xoff3[i] = t.xmin[i] * 3
		k := t.k[i*t.ksize : i*t.ksize+n]
		for p := 0; p < np; p++ {
			w0 := int16(k[2*p])
			var w1 int16
			if 2*p+1 < n {
				w1 = int16(k[2*p+1])
			}
			o := t.simdW[(i*np+p)*8 : (i*np+p)*8+8]
			for q := 0; q < 4; q++ {
				o[2*q], o[2*q+1] = w0, w1
			}
		}
	}
	t.npairs = np
}

// pad rewrites every output's taps to the same count (the largest xsize)
// by adding zero weights before or after the real ones, so the resample
// loops can be unrolled. Zero weights leave the integer sums unchanged.
func (t *bicubicTab) pad() {
	n := 0
	for _, s := range t.xsize {
		n = max(n, int(s))
	}
	if n > t.in {
		return
	}
	for i := range t.xsize {
		xs, xm := int(t.xsize[i]), int(t.xmin[i])
		if xs == n {
			continue
		}
		k := t.k[i*t.ksize : i*t.ksize+t.ksize]
		shift := 0
		if xm+n > t.in {
			shift = xm + n - t.in // start earlier, real taps move right
		}
		copy(k[shift:shift+xs], k[:xs])
		for j := 0; j < shift; j++ {
			k[j] = 0
		}
		for j := shift + xs; j < n; j++ {
			k[j] = 0
		}
		t.xmin[i] = int32(xm - shift)
		t.xsize[i] = int32(n)
	}
}

// BicubicResizer holds weight tables and the intermediate buffer of
// ResizeBicubic; tables are recomputed only when sizes change. The zero
// value is ready to use; not safe for concurrent use.
type BicubicResizer struct {
	h, v bicubicTab
	tmp  []uint8
	acc  []int32 // one output row of vertical-pass accumulators
}

// ResizeBicubic resizes the interleaved 8-bit image src (sw×sh, cn
// channels) into dst (dw×dh) with the antialiased bicubic of the given
// kind. Axes whose size is unchanged are copied. cn must be 1..4.
func (r *BicubicResizer) ResizeBicubic(kind BicubicKind, dst []uint8, dw, dh int, src []uint8, sw, sh, cn int) error {
	if cn < 1 || cn > 4 {
		return fmt.Errorf("image: resize bicubic: %d channels, want 1..4", cn)
	}
	if sw < 1 || sh < 1 || dw < 1 || dh < 1 {
		return fmt.Errorf("image: resize bicubic: %dx%d -> %dx%d: sides must be positive", sw, sh, dw, dh)
	}
	if len(src) < sw*sh*cn || len(dst) < dw*dh*cn {
		return fmt.Errorf("image: resize bicubic: %dx%d -> %dx%d x%d: buffers too small (%d, %d)", sw, sh, dw, dh, cn, len(src), len(dst))
	}
	needH, needV := sw != dw, sh != dh
	switch {
	case !needH && !needV:
		copy(dst[:dw*dh*cn], src[:sw*sh*cn])
	case needH && !needV:
		r.h.compute(sw, dw, kind)
		resampleH(dst, dw, src, sw, sh, cn, &r.h)
	case !needH && needV:
		r.v.compute(sh, dh, kind)
		r.acc = growI32(r.acc, sw*cn)
		resampleV(dst, dh, src, sw, cn, &r.v, r.acc)
	default:
		r.h.compute(sw, dw, kind)
		r.v.compute(sh, dh, kind)
		if cap(r.tmp) < dw*sh*cn {
			r.tmp = make([]uint8, dw*sh*cn)
		}
		tmp := r.tmp[:dw*sh*cn]
		// Pillow restricts the horizontal pass to the rows the vertical
		// pass reads; computing all rows gives the same bytes.
		resampleH(tmp, dw, src, sw, sh, cn, &r.h)
		r.acc = growI32(r.acc, dw*cn)
		resampleV(dst, dh, tmp, dw, cn, &r.v, r.acc)
	}
	return nil
}

func clampShift(acc int32, prec uint) uint8 {
	v := acc >> prec
	if uint32(v) > 255 { // rare: negative or above 255
		v = ^(v >> 31) & 255
	}
	return uint8(v)
}

func resampleH(dst []uint8, dw int, src []uint8, sw, sh, cn int, t *bicubicTab) {
	init := int32(1) << (t.prec - 1)
	if t.prec == 0 {
		init = 0
	}
	prec := t.prec & 31
	if groupKernels() && len(dst) >= sh*dw*cn && len(src) >= sh*sw*cn {
		switch g := t.groups(cn); {
		case zgroupKernels() && g.ztab.ok:
			zgroupU8(dst, dw*cn, src, sw*cn, sh, &g.ztab, prec, init)
			return
		case g.gtab.ok:
			hgroupU8(dst, dw*cn, src, sw*cn, sh, &g.gtab, prec, init)
			return
		}
	}
	for y := 0; y < sh; y++ {
		s := src[y*sw*cn : (y+1)*sw*cn]
		d := dst[y*dw*cn : (y+1)*dw*cn]
		if cn == 3 {
			for x := hresizeRGBFast(d, src[y*sw*cn:], t); x < dw; x++ {
				n := int(t.xsize[x])
				k := t.k[x*t.ksize : x*t.ksize+n]
				p := s[int(t.xmin[x])*3:]
				a0, a1, a2 := init, init, init
				switch n { // taps are padded to one count per axis
				case 4:
					q := p[:12:12]
					w0, w1, w2, w3 := k[0], k[1], k[2], k[3]
					a0 += int32(q[0])*w0 + int32(q[3])*w1 + int32(q[6])*w2 + int32(q[9])*w3
					a1 += int32(q[1])*w0 + int32(q[4])*w1 + int32(q[7])*w2 + int32(q[10])*w3
					a2 += int32(q[2])*w0 + int32(q[5])*w1 + int32(q[8])*w2 + int32(q[11])*w3
					k = nil
				case 5:
					q := p[:15:15]
					w0, w1, w2, w3, w4 := k[0], k[1], k[2], k[3], k[4]
					a0 += int32(q[0])*w0 + int32(q[3])*w1 + int32(q[6])*w2 + int32(q[9])*w3 + int32(q[12])*w4
					a1 += int32(q[1])*w0 + int32(q[4])*w1 + int32(q[7])*w2 + int32(q[10])*w3 + int32(q[13])*w4
					a2 += int32(q[2])*w0 + int32(q[5])*w1 + int32(q[8])*w2 + int32(q[11])*w3 + int32(q[14])*w4
					k = nil
				case 6:
					q := p[:18:18]
					w0, w1, w2, w3, w4, w5 := k[0], k[1], k[2], k[3], k[4], k[5]
					a0 += int32(q[0])*w0 + int32(q[3])*w1 + int32(q[6])*w2 + int32(q[9])*w3 + int32(q[12])*w4 + int32(q[15])*w5
					a1 += int32(q[1])*w0 + int32(q[4])*w1 + int32(q[7])*w2 + int32(q[10])*w3 + int32(q[13])*w4 + int32(q[16])*w5
					a2 += int32(q[2])*w0 + int32(q[5])*w1 + int32(q[8])*w2 + int32(q[11])*w3 + int32(q[14])*w4 + int32(q[17])*w5
					k = nil
				}
				for _, w := range k {
					q := p[:3:3]
					a0 += int32(q[0]) * w
					a1 += int32(q[1]) * w
					a2 += int32(q[2]) * w
					p = p[3:]
				}
				o := d[3*x : 3*x+3 : 3*x+3]
				o[0] = clampShift(a0, prec)
				o[1] = clampShift(a1, prec)
				o[2] = clampShift(a2, prec)
			}
			continue
		}
		for x := 0; x < dw; x++ {
			k := t.k[x*t.ksize : x*t.ksize+int(t.xsize[x])]
			base := int(t.xmin[x]) * cn
			for c := 0; c < cn; c++ {
				a := init
				for j, w := range k {
					a += int32(s[base+j*cn+c]) * w
				}
				d[x*cn+c] = clampShift(a, prec)
			}
		}
	}
}

// resampleV runs the vertical pass; acc must hold w*cn values.
func resampleV(dst []uint8, dh int, src []uint8, w, cn int, t *bicubicTab, acc []int32) {
	init := int32(1) << (t.prec - 1)
	if t.prec == 0 {
		init = 0
	}
	prec := t.prec & 31
	stride := w * cn
	a := acc[:stride]
	for y := 0; y < dh; y++ {
		k := t.k[y*t.ksize : y*t.ksize+int(t.xsize[y])]
		ymin := int(t.xmin[y])
		for i := range a {
			a[i] = init
		}
		for j, wt := range k {
			row := src[(ymin+j)*stride : (ymin+j+1)*stride]
			row = row[:len(a)]
			for i, v := range row {
				a[i] += int32(v) * wt
			}
		}
		d := dst[y*stride : (y+1)*stride]
		d = d[:len(a)]
		for i, v := range a {
			d[i] = clampShift(v, prec)
		}
	}
}
