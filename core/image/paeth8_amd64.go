//go:build amd64 && !purego

package image

import "golang.org/x/sys/cpu"

// paeth3x8AVX512 is implemented in paeth8_amd64.s.
//
//go:noescape
func paeth3x8AVX512(dst, src, prev *byte, n, dstride, sstride int)

// hasPaeth8 reports whether the CPU runs the eight-row AVX-512 Paeth
// kernel (AVX-512 F and BW; the 128-bit masked stores need VL).
var hasPaeth8 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL

// paeth8Out reverses the Paeth filter of eight consecutive 3-byte-per-pixel
// rows of n pixels out of place with the AVX-512 wavefront kernel: filtered
// row k at src[k·sstride:], unfiltered result to dst[k·dstride:], prev =
// the unfiltered row above dst row 0. It writes exactly bytes [0, 3n) of
// each dst row. src must stay readable one byte past row 7 and prev one
// byte past 3n (the kernel loads 4 bytes per pixel). False means nothing
// was done: no AVX-512, switched off (forceScalar, forceNoPaeth8), n < 9,
// or slices too short.
func paeth8Out(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool {
	if !paeth8Enabled() || n < 9 || dstride < 3*n || sstride < 3*n ||
		len(dst) < 7*dstride+3*n || len(src) < 7*sstride+3*n+1 || len(prev) < 3*n+1 {
		return false
	}
	paeth3x8AVX512(&dst[0], &src[0], &prev[0], n, dstride, sstride)
	return true
}

// paeth8Enabled reports whether paeth8Out runs its kernel.
func paeth8Enabled() bool { return hasPaeth8 && !forceScalar && !forceNoPaeth8 }

// paeth3x16AVX512 is implemented in paeth16_amd64.s.
//
//go:noescape
func paeth3x16AVX512(dst, src, prev *byte, n, dstride, sstride int)

// paeth16Out is paeth8Out for sixteen rows (two eight-row wavefronts side
// by side, twice the work per step of the serial chain): src must stay
// readable one byte past row 15; n ≥ 17.
func paeth16Out(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool {
	if !paeth8Enabled() || n < 17 || dstride < 3*n || sstride < 3*n ||
		len(dst) < 15*dstride+3*n || len(src) < 15*sstride+3*n+1 || len(prev) < 3*n+1 {
		return false
	}
	paeth3x16AVX512(&dst[0], &src[0], &prev[0], n, dstride, sstride)
	return true
}
