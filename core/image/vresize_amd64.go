//go:build amd64 && !purego

package image

import "golang.org/x/sys/cpu"

// vresizeLinearSSE2 is implemented in vresize_amd64.s (SSE2 is part of the
// amd64 baseline). n must be a multiple of 8; h0 and h1 must hold n values
// and dst n bytes.
//
//go:noescape
func vresizeLinearSSE2(dst *byte, h0, h1 *int32, n int, b0, b1 int32)

// vresizeRowFast runs the SIMD vertical pass on the largest multiple of 8
// outputs of d and returns how many it wrote; the caller finishes the rest
// with the scalar formula (identical results).
func vresizeRowFast(d []uint8, h0, h1 []int32, b0, b1 int32) int {
	n := len(d) &^ 7
	if n == 0 || forceScalar || len(h0) < n || len(h1) < n {
		return 0
	}
	vresizeLinearSSE2(&d[0], &h0[0], &h1[0], n, b0, b1)
	return n
}

// hresizeRGBSSE2 is implemented in vresize_amd64.s.
//
//go:noescape
func hresizeRGBSSE2(dst *byte, src *byte, xoff *int32, w *int16, n, npairs int, prec uint64, init int32)

// hresizeRGBFast runs the SIMD horizontal bicubic pass for one RGB row on
// outputs [0, m) where m is the number of leading outputs whose 4-byte
// loads stay inside buf (the row and everything after it in the source
// buffer); it returns m. t.simdW must be prepared.
func hresizeRGBFast(d []uint8, buf []uint8, t *bicubicTab) int {
	if forceScalar || t.npairs == 0 {
		return 0
	}
	n := len(d) / 3
	m := n
	if t.npairs == 3 && hasSSSE3 {
		for m > 0 && int(t.xmin[m-1])*3+20 > len(buf) {
			m--
		}
		if m == 0 {
			return 0
		}
		hresizeRGB3SSSE3(&d[0], &buf[0], &t.xoff3[0], &t.simdW[0], m, uint64(t.prec), int32(1)<<(t.prec-1))
		return m
	}
	for m > 0 && int(t.xmin[m-1])*3+6*t.npairs+1 > len(buf) {
		m--
	}
	if m == 0 {
		return 0
	}
	hresizeRGBSSE2(&d[0], &buf[0], &t.xoff3[0], &t.simdW[0], m, t.npairs, uint64(t.prec), int32(1)<<(t.prec-1))
	return m
}

// hlinearRGBSSE2 is implemented in vresize_amd64.s.
//
//go:noescape
func hlinearRGBSSE2(dst *int32, src *byte, xoff *int32, w *int16, n int)

// hlinearRGBFast runs the SIMD area-mode horizontal pass on the leading
// outputs [0, m) of an RGB row, m ≤ xmax, whose 4-byte loads stay inside
// buf (this row and the rest of the source); h needs one spare int32 past
// 3·m. It returns m.
func hlinearRGBFast(h []int32, buf []uint8, xofs []int32, w []int16, xmax int) int {
	if forceScalar || xmax == 0 {
		return 0
	}
	m := xmax
	for m > 0 && int(xofs[m-1])+7 > len(buf) {
		m--
	}
	if m == 0 || len(h) < 3*m+1 || len(w) < 8*m {
		return 0
	}
	if hasSSSE3 {
		hlinearRGBSSSE3(&h[0], &buf[0], &xofs[0], &w[0], m)
		return m
	}
	hlinearRGBSSE2(&h[0], &buf[0], &xofs[0], &w[0], m)
	return m
}

// hresizeRGB3SSSE3 is implemented in vresize_amd64.s (3 tap pairs only).
//
//go:noescape
func hresizeRGB3SSSE3(dst *byte, src *byte, xoff *int32, w *int16, n int, prec uint64, init int32)

var hasSSSE3 = cpu.X86.HasSSSE3

// hlinearRGBSSSE3 is implemented in vresize_amd64.s.
//
//go:noescape
func hlinearRGBSSSE3(dst *int32, src *byte, xoff *int32, w *int16, n int)
