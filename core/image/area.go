package image

import (
	"fmt"
	"math"
)

// This file re-states OpenCV 4.6 cv::resize(src, dst, dsize, 0, 0,
// INTER_AREA) for 8-bit images with 1 to 4 interleaved channels, bit for bit
// (modules/imgproc/src/resize.cpp: hal::resize, resizeAreaFast_Invoker,
// computeResizeAreaTab, ResizeArea_Invoker, resizeGeneric_ with
// HResizeLinear and the VResizeLinear<uchar,...> specialisation), checked
// bit for bit against Debian's cv2 4.6 (RATIONALE.md, "Image exactness
// targets").

// forceScalar disables the SIMD kernels (tests compare both paths).
var forceScalar = false

// dblEpsilon is C's DBL_EPSILON.
const dblEpsilon = 2.220446049250313e-16

// cvRoundF is OpenCV's cvRound(float): round half to even (SSE cvtss2si
// under the default rounding mode).
func cvRoundF(v float32) int { return int(math.RoundToEven(float64(v))) }

// cvRoundD is cvRound(double): round half to even.
func cvRoundD(v float64) int { return int(math.RoundToEven(v)) }

func satU8(v int) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

func satI16(v int) int32 {
	if v < math.MinInt16 {
		return math.MinInt16
	}
	if v > math.MaxInt16 {
		return math.MaxInt16
	}
	return int32(v)
}

// AreaPath names the OpenCV code path ResizeArea takes for a size pair.
type AreaPath int

const (
	// AreaCopy: source and destination sizes are equal; plain copy.
	AreaCopy AreaPath = iota
	// AreaFast: integer shrink on both axes (box average; 2×2 special case).
	AreaFast
	// AreaGeneric: fractional shrink on both axes (float32 area weights).
	AreaGeneric
	// AreaLinear: at least one axis enlarges; 11-bit fixed-point bilinear
	// with OpenCV's "area mode" coefficients on both axes.
	AreaLinear
)

// String returns the path name ("copy", "fast", "generic", "linear").
func (p AreaPath) String() string {
	if p >= 0 && int(p) < len(areaPathNames) {
		return areaPathNames[p]
	}
	return fmt.Sprintf("AreaPath(%d)", int(p))
}

var areaPathNames = [...]string{AreaCopy: "copy", AreaFast: "fast", AreaGeneric: "generic", AreaLinear: "linear"}

// areaScales reproduces the scale computation of cv::resize/hal::resize.
func areaScales(sw, sh, dw, dh int) (scaleX, scaleY, invX, invY float64, path AreaPath) {
	if sw == dw && sh == dh {
		return 1, 1, 1, 1, AreaCopy
	}
	invX = float64(dw) / float64(sw)
	invY = float64(dh) / float64(sh)
	scaleX = 1 / invX
	scaleY = 1 / invY
	iscaleX := cvRoundD(scaleX)
	iscaleY := cvRoundD(scaleY)
	fast := math.Abs(scaleX-float64(iscaleX)) < dblEpsilon && math.Abs(scaleY-float64(iscaleY)) < dblEpsilon
	switch {
	case scaleX >= 1 && scaleY >= 1 && fast:
		path = AreaFast
	case scaleX >= 1 && scaleY >= 1:
		path = AreaGeneric
	default:
		path = AreaLinear
	}
	return
}

// ResizeAreaPath reports which OpenCV INTER_AREA code path a resize from
// sw×sh to dw×dh takes.
func ResizeAreaPath(sw, sh, dw, dh int) AreaPath {
	_, _, _, _, p := areaScales(sw, sh, dw, dh)
	return p
}

// AreaResizer holds the scratch memory of ResizeArea so that repeated
// resizes of the same sizes allocate nothing. The zero value is ready to
// use. An AreaResizer must not be used by two goroutines at once.
type AreaResizer struct {
	xtab, ytab []decimateAlpha
	fbuf, fsum []float32

	xofs, ialpha, yofs, ibeta []int32
	simdA                     []int16 // {a0,a1}×4 per output for hlinearRGBSSE2
	hrow                      [2][]int32

	// Area-mode linear tables are kept for the last size pair (lkey).
	lkey   [5]int
	lvalid bool
	xmax   int
	gtab   groupTab   // AVX2 horizontal table (gtab.ok: usable)
	ztab   zgroupTab  // AVX-512 horizontal table
	h16    [4][]int16 // horizontal rows for the group kernels, >> 4
	packed []uint8    // compacted strided source for the non-linear paths
}

type decimateAlpha struct {
	di, si int32
	alpha  float32
}

// ResizeArea resizes the interleaved 8-bit image src (sw×sh, cn channels,
// row stride sw*cn) into dst (dw×dh, row stride dw*cn) exactly as OpenCV
// 4.6 cv::resize with INTER_AREA does. cn must be 1..4, all sides ≥ 1,
// len(src) ≥ sw*sh*cn and len(dst) ≥ dw*dh*cn.
func (r *AreaResizer) ResizeArea(dst []uint8, dw, dh int, src []uint8, sw, sh, cn int) error {
	return r.resizeArea(dst, dw, dh, src, sw*cn, sw, sh, cn)
}

// resizeArea is ResizeArea on a source whose rows are sstride ≥ sw·cn
// bytes apart (a crop view into a larger image); src needs
// (sh−1)·sstride + sw·cn bytes.
func (r *AreaResizer) resizeArea(dst []uint8, dw, dh int, src []uint8, sstride, sw, sh, cn int) error {
	if cn < 1 || cn > 4 {
		return fmt.Errorf("image: resize area: %d channels, want 1..4", cn)
	}
	if sw < 1 || sh < 1 || dw < 1 || dh < 1 {
		return fmt.Errorf("image: resize area: %dx%d -> %dx%d: sides must be positive", sw, sh, dw, dh)
	}
	if sstride < sw*cn || len(src) < (sh-1)*sstride+sw*cn || len(dst) < dw*dh*cn {
		return fmt.Errorf("image: resize area: %dx%d -> %dx%d x%d: buffers too small (%d, %d)", sw, sh, dw, dh, cn, len(src), len(dst))
	}
	scaleX, scaleY, invX, invY, path := areaScales(sw, sh, dw, dh)
	if path == AreaLinear {
		r.linear(dst, dw, dh, src, sstride, sw, sh, cn, scaleX, scaleY, invX, invY)
		return nil
	}
	if sstride != sw*cn {
		n := sw * cn
		if cap(r.packed) < n*sh {
			r.packed = make([]uint8, n*sh)
		}
		r.packed = r.packed[:n*sh]
		for y := 0; y < sh; y++ {
			copy(r.packed[y*n:(y+1)*n], src[y*sstride:])
		}
		src = r.packed
	}
	switch path {
	case AreaCopy:
		copy(dst[:dw*dh*cn], src[:sw*sh*cn])
	case AreaFast:
		r.fast(dst, dw, dh, src, sw, cn, cvRoundD(scaleX), cvRoundD(scaleY))
	case AreaGeneric:
		r.generic(dst, dw, dh, src, sw, sh, cn, scaleX, scaleY)
	}
	return nil
}

// fast is resizeAreaFast_Invoker: exact integer factors ix, iy.
func (r *AreaResizer) fast(dst []uint8, dw, dh int, src []uint8, sw, cn, ix, iy int) {
	sstep := sw * cn
	dstep := dw * cn
	if ix == 2 && iy == 2 && (cn == 1 || cn == 3 || cn == 4) {
		// ResizeAreaFastVec: (a + b + c + d + 2) >> 2 in SIMD and scalar.
		for dy := 0; dy < dh; dy++ {
			s0 := src[2*dy*sstep : 2*dy*sstep+sstep]
			s1 := src[(2*dy+1)*sstep : (2*dy+1)*sstep+sstep]
			d := dst[dy*dstep : dy*dstep+dstep]
			for dx := 0; dx < dw; dx++ {
				i := 2 * dx * cn
				for c := 0; c < cn; c++ {
					d[dx*cn+c] = uint8((int(s0[i+c]) + int(s0[i+c+cn]) + int(s1[i+c]) + int(s1[i+c+cn]) + 2) >> 2)
				}
			}
		}
		return
	}
	area := ix * iy
	scale := float32(1) / float32(area)
	for dy := 0; dy < dh; dy++ {
		d := dst[dy*dstep : dy*dstep+dstep]
		for dx := 0; dx < dw; dx++ {
			for c := 0; c < cn; c++ {
				sum := 0
				for ky := 0; ky < iy; ky++ {
					row := src[(dy*iy+ky)*sstep:]
					base := dx*ix*cn + c
					for kx := 0; kx < ix; kx++ {
						sum += int(row[base+kx*cn])
					}
				}
				d[dx*cn+c] = satU8(cvRoundF(float32(sum) * scale))
			}
		}
	}
}

// computeResizeAreaTab mirrors OpenCV's function of the same name.
func computeResizeAreaTab(tab []decimateAlpha, ssize, dsize, cn int, scale float64) []decimateAlpha {
	tab = tab[:0]
	for dx := 0; dx < dsize; dx++ {
		fsx1 := float64(dx) * scale
		fsx2 := fsx1 + scale
		cellWidth := math.Min(scale, float64(ssize)-fsx1)
		sx1 := int(math.Ceil(fsx1))
		sx2 := int(math.Floor(fsx2))
		sx2 = min(sx2, ssize-1)
		sx1 = min(sx1, sx2)
		if float64(sx1)-fsx1 > 1e-3 {
			tab = append(tab, decimateAlpha{int32(dx * cn), int32((sx1 - 1) * cn), float32((float64(sx1) - fsx1) / cellWidth)})
		}
		for sx := sx1; sx < sx2; sx++ {
			tab = append(tab, decimateAlpha{int32(dx * cn), int32(sx * cn), float32(1.0 / cellWidth)})
		}
		if fsx2-float64(sx2) > 1e-3 {
			tab = append(tab, decimateAlpha{int32(dx * cn), int32(sx2 * cn), float32(math.Min(math.Min(fsx2-float64(sx2), 1), cellWidth) / cellWidth)})
		}
	}
	return tab
}

func growF32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func growI32(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

// generic is ResizeArea_Invoker: float32 area weights, accumulated in
// table order. Every product and sum is rounded to float32 explicitly so
// the compiler cannot fuse them into FMAs.
func (r *AreaResizer) generic(dst []uint8, dw, dh int, src []uint8, sw, sh, cn int, scaleX, scaleY float64) {
	r.xtab = computeResizeAreaTab(r.xtab, sw, dw, cn, scaleX)
	r.ytab = computeResizeAreaTab(r.ytab, sh, dh, 1, scaleY)
	width := dw * cn
	buf := growF32(r.fbuf, width)
	sum := growF32(r.fsum, width)
	r.fbuf, r.fsum = buf, sum
	sstep := sw * cn
	xtab, ytab := r.xtab, r.ytab
	for i := range sum {
		sum[i] = 0
	}
	prev := int(ytab[0].di)
	flush := func(dy int) {
		d := dst[dy*width : dy*width+width]
		for i := range d {
			d[i] = satU8(cvRoundF(sum[i]))
		}
	}
	for _, yt := range ytab {
		beta := yt.alpha
		dy := int(yt.di)
		s := src[int(yt.si)*sstep : int(yt.si)*sstep+sstep]
		for i := range buf {
			buf[i] = 0
		}
		switch cn {
		case 1:
			for _, xt := range xtab {
				buf[xt.di] = buf[xt.di] + float32(float32(s[xt.si])*xt.alpha)
			}
		case 3:
			for _, xt := range xtab {
				d, si, a := int(xt.di), int(xt.si), xt.alpha
				b := buf[d : d+3 : d+3]
				p := s[si : si+3 : si+3]
				b[0] = b[0] + float32(float32(p[0])*a)
				b[1] = b[1] + float32(float32(p[1])*a)
				b[2] = b[2] + float32(float32(p[2])*a)
			}
		default:
			for _, xt := range xtab {
				for c := 0; c < cn; c++ {
					buf[int(xt.di)+c] = buf[int(xt.di)+c] + float32(float32(s[int(xt.si)+c])*xt.alpha)
				}
			}
		}
		if dy != prev {
			flush(prev)
			for i := range sum {
				sum[i] = float32(beta * buf[i])
			}
			prev = dy
		} else {
			for i := range sum {
				sum[i] = sum[i] + float32(beta*buf[i])
			}
		}
	}
	flush(prev)
}

// linear is resizeGeneric_ with INTER_AREA's "area mode" coefficients:
// 11-bit fixed-point bilinear (HResizeLinear<uchar,int,short,2048> and the
// VResizeLinear<uchar,int,short,FixedPtCast<int,uchar,22>> specialisation).
//
// Source rows are sstep bytes apart. The tables depend only on the sizes
// and are kept until they change.
func (r *AreaResizer) linear(dst []uint8, dw, dh int, src []uint8, sstep, sw, sh, cn int, scaleX, scaleY, invX, invY float64) {
	if key := [5]int{sw, sh, dw, dh, cn}; !r.lvalid || r.lkey != key {
		r.lvalid = false
		r.linearTables(dw, dh, sw, cn, scaleX, scaleY, invX, invY)
		r.lkey, r.lvalid = key, true
	}
	if (zgroupKernels() && r.ztab.ok) || (groupKernels() && r.gtab.ok) {
		r.linearGroup(dst, dw, dh, src, sstep, sw, sh, cn)
		return
	}
	r.linearSSE(dst, dw, dh, src, sstep, sw, sh, cn)
}

// linearTables computes the coefficient tables of linear for one size pair.
func (r *AreaResizer) linearTables(dw, dh, sw, cn int, scaleX, scaleY, invX, invY float64) {
	const one = 2048 // INTER_RESIZE_COEF_SCALE
	r.xofs = growI32(r.xofs, dw)
	r.ialpha = growI32(r.ialpha, 2*dw)
	r.yofs = growI32(r.yofs, dh)
	r.ibeta = growI32(r.ibeta, 2*dh)
	xmax := dw
	for dx := 0; dx < dw; dx++ {
		sx := int(math.Floor(float64(dx) * scaleX))
		fx := float32(float64(dx+1) - float64(sx+1)*invX)
		if fx <= 0 {
			fx = 0
		} else {
			fx = fx - float32(math.Floor(float64(fx)))
		}
		if sx+1 >= sw {
			xmax = min(xmax, dx)
			if sx >= sw-1 {
				fx, sx = 0, sw-1
			}
		}
		r.xofs[dx] = int32(sx * cn)
		r.ialpha[2*dx] = satI16(cvRoundF(float32((1 - fx) * one)))
		r.ialpha[2*dx+1] = satI16(cvRoundF(float32(fx * one)))
	}
	for dy := 0; dy < dh; dy++ {
		sy := int(math.Floor(float64(dy) * scaleY))
		fy := float32(float64(dy+1) - float64(sy+1)*invY)
		if fy <= 0 {
			fy = 0
		} else {
			fy = fy - float32(math.Floor(float64(fy)))
		}
		r.yofs[dy] = int32(sy)
		r.ibeta[2*dy] = satI16(cvRoundF(float32((1 - fy) * one)))
		r.ibeta[2*dy+1] = satI16(cvRoundF(float32(fy * one)))
	}
	r.xmax = xmax
	if cn == 3 {
		if cap(r.simdA) < 8*dw {
			r.simdA = make([]int16, 8*dw)
		}
		r.simdA = r.simdA[:8*dw]
		for dx := 0; dx < dw; dx++ {
			a0, a1 := int16(r.ialpha[2*dx]), int16(r.ialpha[2*dx+1])
			o := r.simdA[8*dx : 8*dx+8]
			for q := 0; q < 4; q++ {
				o[2*q], o[2*q+1] = a0, a1
			}
		}
	}
	r.gtab.ok, r.ztab.ok = false, false
	if width := dw * cn; width >= 32 {
		xofs, alpha := r.xofs, r.ialpha
		spec := groupSpec{
			width: width, rowBytes: sw * cn, np: 1, e: 4,
			taps: func(j, _ int) (int, int) {
				dx, c := j/cn, j%cn
				i0 := int(xofs[dx]) + c
				if dx < xmax {
					return i0, i0 + cn
				}
				return i0, i0
			},
			weight: func(j, _, t, _ int) int32 {
				dx := j / cn
				if dx < xmax {
					return alpha[2*dx+t]
				}
				return int32(one * (1 - t))
			},
		}
		r.gtab.build(spec)
		if r.ztab.build(spec, 2, true); !r.ztab.ok {
			r.ztab.build(spec, 2, false)
		}
		if r.gtab.ok || r.ztab.ok {
			n := max(16*r.gtab.nblk, 32*r.ztab.nblk)
			for k := range r.h16 {
				r.h16[k] = alignedI16(r.h16[k], n)
			}
		}
	}
}

// linearGroup is linear with the group kernels (AVX-512 when ztab fits,
// else AVX2; hgroup.go): each needed source row is resized horizontally
// once into an int16 row (already >> 4, see vlinearI16AVX2) and each
// output row is the vertical blend of two of them. Rows are 64-byte
// aligned; the four-row ring keeps the working set in L1. yofs ascends
// and is never negative (floor of dy·scaleY).
func (r *AreaResizer) linearGroup(dst []uint8, dw, dh int, src []uint8, sstep, sw, sh, cn int) {
	width := dw * cn
	rowBytes := sw * cn
	yofs, ibeta := r.yofs[:dh], r.ibeta[:2*dh]
	useZ := zgroupKernels() && r.ztab.ok
	h := &r.h16
	row := func(y int) []uint8 { return src[y*sstep : y*sstep+rowBytes] }
	// Source rows are needed in ascending order, two adjacent ones per
	// output row: row y lives in slot y&3 and m is the last row resized.
	// When y enlarges, rows are resized two at a time (one pass over the
	// tables for both); the extra row is always needed later.
	last := min(int(yofs[dh-1])+1, sh-1)
	pairs := useZ && dh >= sh
	m := -1
	for dy := 0; dy < dh; dy++ {
		sy := int(yofs[dy])
		r0, r1 := min(sy, sh-1), min(sy+1, sh-1)
		m = max(m, r0-1) // rows below r0 are never needed again
		for m < r1 {
			switch {
			case pairs && m+2 <= last && zgroupI16x2(h[(m+1)&3], h[(m+2)&3], row(m+1), row(m+2), &r.ztab):
				m += 2
			case useZ:
				m++
				zgroupI16(h[m&3], row(m), &r.ztab)
			default:
				m++
				hgroupI16(h[m&3], row(m), &r.gtab)
			}
		}
		vlinear(dst[dy*width:dy*width+width], h[r0&3], h[r1&3], ibeta[2*dy], ibeta[2*dy+1])
	}
}

// linearSSE is linear with int32 rows and the SSE2/SSSE3 kernels (and the
// scalar loops that finish them); the path of CPUs without AVX2.
func (r *AreaResizer) linearSSE(dst []uint8, dw, dh int, src []uint8, sstep, sw, sh, cn int) {
	const one = 2048
	xmax := r.xmax
	width := dw * cn
	// One spare element: the SIMD horizontal kernel stores 4 lanes per pixel.
	r.hrow[0] = growI32(r.hrow[0], width+1)[:width+1]
	r.hrow[1] = growI32(r.hrow[1], width+1)[:width+1]
	rowOf := [2]int{-1, -1} // source row held by hrow[k]
	hresize := func(h []int32, sy int) {
		s := src[sy*sstep : sy*sstep+sw*cn]
		xofs, alpha := r.xofs[:dw], r.ialpha[:2*dw]
		if cn == 3 {
			for dx := hlinearRGBFast(h, src[sy*sstep:], xofs, r.simdA, xmax); dx < xmax; dx++ {
				p := s[xofs[dx] : xofs[dx]+6 : xofs[dx]+6]
				a0, a1 := alpha[2*dx], alpha[2*dx+1]
				o := h[3*dx : 3*dx+3 : 3*dx+3]
				o[0] = int32(p[0])*a0 + int32(p[3])*a1
				o[1] = int32(p[1])*a0 + int32(p[4])*a1
				o[2] = int32(p[2])*a0 + int32(p[5])*a1
			}
		} else {
			for dx := 0; dx < xmax; dx++ {
				sx := int(xofs[dx])
				a0, a1 := alpha[2*dx], alpha[2*dx+1]
				o := dx * cn
				for c := 0; c < cn; c++ {
					h[o+c] = int32(s[sx+c])*a0 + int32(s[sx+c+cn])*a1
				}
			}
		}
		for dx := xmax; dx < dw; dx++ {
			sx := int(xofs[dx])
			o := dx * cn
			for c := 0; c < cn; c++ {
				h[o+c] = int32(s[sx+c]) * one
			}
		}
	}
	row := func(sy int) []int32 {
		for k := 0; k < 2; k++ {
			if rowOf[k] == sy {
				return r.hrow[k]
			}
		}
		// Evict the row not needed next (the smaller index: rows ascend).
		k := 0
		if rowOf[1] < rowOf[0] {
			k = 1
		}
		rowOf[k] = sy
		hresize(r.hrow[k], sy)
		return r.hrow[k]
	}
	clampRow := func(y int) int {
		if y < 0 {
			return 0
		}
		if y >= sh {
			return sh - 1
		}
		return y
	}
	for dy := 0; dy < dh; dy++ {
		sy := int(r.yofs[dy])
		r0, r1 := clampRow(sy), clampRow(sy+1)
		h0 := row(r0)
		h1 := row(r1)
		if r0 == r1 {
			h1 = h0
		}
		b0, b1 := r.ibeta[2*dy], r.ibeta[2*dy+1]
		d := dst[dy*width : dy*width+width]
		h0, h1 = h0[:len(d)], h1[:len(d)]
		for x := vresizeRowFast(d, h0, h1, b0, b1); x < len(d); x++ {
			// Never outside 0..255 (b0+b1 ≤ 2049, H ≤ 255·2048), so the
			// saturating pack of the SIMD kernel is a plain store here.
			d[x] = uint8(((b0*(h0[x]>>4))>>16 + (b1*(h1[x]>>4))>>16 + 2) >> 2)
		}
	}
}
