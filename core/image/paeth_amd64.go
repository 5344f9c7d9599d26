//go:build amd64 && !purego

package image

import "golang.org/x/sys/cpu"

// paeth3SSE2 is implemented in paeth_amd64.s.
//
//go:noescape
func paeth3SSE2(cur, prev *byte, n int)

// paethFast reverses the Paeth filter of one scanline with the SSE2 kernel
// when the pixels are 3 bytes wide; it reports false (nothing done) when
// the caller must run the scalar paeth.
func paethFast(cur, prev []uint8, bpp int) bool {
	if forceScalar || bpp != 3 || len(cur) < 6 || len(cur)%3 != 0 || len(prev) < len(cur) {
		return false
	}
	// Pixel 0 has a = c = 0, so its predictor is b.
	cur[0] += prev[0]
	cur[1] += prev[1]
	cur[2] += prev[2]
	paeth3SSE2(&cur[0], &prev[0], len(cur)/3)
	return true
}

// simdAvailable reports whether this build has the SIMD kernels.
const simdAvailable = true

// paeth3x2SSE2 is implemented in paeth_amd64.s.
//
//go:noescape
func paeth3x2SSE2(cur0, cur1, prev *byte, n int)

// paeth2Fast reverses the Paeth filter of two consecutive Paeth-filtered
// scanlines (cur0 = row y, cur1 = row y+1, prev = row y−1) with the
// two-row SSE2 kernel when pixels are 3 bytes wide; false means nothing
// was done and the caller runs the rows one by one.
func paeth2Fast(cur0, cur1, prev []uint8, bpp int) bool {
	n := len(cur0) / 3
	if forceScalar || bpp != 3 || n < 2 || len(cur0)%3 != 0 || len(cur1) != len(cur0) || len(prev) < len(cur0) {
		return false
	}
	cur0[0] += prev[0]
	cur0[1] += prev[1]
	cur0[2] += prev[2]
	paeth3x2SSE2(&cur0[0], &cur1[0], &prev[0], n)
	// Last pixel of row y+1.
	i := 3 * (n - 1)
	for ch := 0; ch < 3; ch++ {
		cur1[i+ch] += paethPredict(cur1[i-3+ch], cur0[i+ch], cur0[i-3+ch])
	}
	return true
}

// paeth3x4AVX2 is implemented in paeth4_amd64.s.
//
//go:noescape
func paeth3x4AVX2(cur0, cur1, cur2, cur3, prev *byte, n int)

var hasAVX2 = cpu.X86.HasAVX2

// paeth4Fast reverses the Paeth filter of four consecutive Paeth-filtered
// scanlines (rows y..y+3, prev = row y−1) with the four-row AVX2 kernel;
// false means nothing was done (no AVX2, pixels not 3 bytes, rows shorter
// than 4 pixels).
func paeth4Fast(cur0, cur1, cur2, cur3, prev []uint8, bpp int) bool {
	w := len(cur0)
	n := w / 3
	if forceScalar || !hasAVX2 || bpp != 3 || n < 4 || w%3 != 0 ||
		len(cur1) != w || len(cur2) != w || len(cur3) != w || len(prev) < w {
		return false
	}
	paethPixels(cur0, prev, 0, 3)
	paethPixels(cur1, cur0, 0, 2)
	paethPixels(cur2, cur1, 0, 1)
	paeth3x4AVX2(&cur0[0], &cur1[0], &cur2[0], &cur3[0], &prev[0], n)
	paethPixels(cur1, cur0, n-1, n)
	paethPixels(cur2, cur1, n-2, n)
	paethPixels(cur3, cur2, n-3, n)
	return true
}
