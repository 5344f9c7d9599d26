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

// paeth3x8AVX2 is implemented in paeth8avx2_amd64.s.
//
//go:noescape
func paeth3x8AVX2(dst, src, prev *byte, n, dstride, sstride int, zmask *[8][64]byte)

// hasPaeth8AVX2 reports whether the CPU runs the eight-row AVX2 Paeth
// kernel, used where the AVX-512 one cannot run.
var hasPaeth8AVX2 = cpu.X86.HasAVX2

// forcePaeth8AVX2 makes the wide Paeth paths use the AVX2 kernels on an
// AVX-512 CPU, and forceNoPaeth16AVX2 makes paeth16Out run the eight-row
// AVX2 kernel twice instead of the sixteen-row one (tests and benchmarks).
var forcePaeth8AVX2, forceNoPaeth16AVX2 = false, false

// paethZMask are paeth3x8AVX2's prologue masks: row t clears qword t of
// the two YMM halves (rows 0–3, rows 4–7), so lane t starts with a = c = 0.
var paethZMask = func() (m [8][64]byte) {
	for t := range 8 {
		for i := range 64 {
			if i/8 != t {
				m[t][i] = 0xff
			}
		}
	}
	return m
}()

// paeth3x16AVX2 is implemented in paeth16avx2_amd64.s.
//
//go:noescape
func paeth3x16AVX2(dst, src, prev *byte, n, dstride, sstride int, zmask *[16][128]byte)

// paethZMask16 are paeth3x16AVX2's prologue masks: row t clears qword t
// mod 4 of quarter t/4.
var paethZMask16 = func() (m [16][128]byte) {
	for t := range 16 {
		for i := range 128 {
			if i/8 != t {
				m[t][i] = 0xff
			}
		}
	}
	return m
}()

// paeth8AVX512 reports whether the wide paths run the AVX-512 kernels
// (else the AVX2 one).
func paeth8AVX512() bool { return hasPaeth8 && !forcePaeth8AVX2 }

// paeth8Out reverses the Paeth filter of eight consecutive 3-byte-per-pixel
// rows of n pixels out of place with the AVX-512 wavefront kernel: filtered
// row k at src[k·sstride:], unfiltered result to dst[k·dstride:], prev =
// the unfiltered row above dst row 0. It writes exactly bytes [0, 3n) of
// each dst row. src must stay readable one byte past row 7 and prev one
// byte past 3n (the kernel loads 4 bytes per pixel). Where AVX-512 is
// missing the AVX2 kernel (same wavefront, same bytes) runs. False means
// nothing was done: neither kernel available, switched off (forceScalar,
// forceNoPaeth8), n < 9, or slices too short.
func paeth8Out(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool {
	if !paeth8Enabled() || n < 9 || dstride < 3*n || sstride < 3*n ||
		len(dst) < 7*dstride+3*n || len(src) < 7*sstride+3*n+1 || len(prev) < 3*n+1 {
		return false
	}
	if paeth8AVX512() {
		paeth3x8AVX512(&dst[0], &src[0], &prev[0], n, dstride, sstride)
	} else {
		paeth3x8AVX2(&dst[0], &src[0], &prev[0], n, dstride, sstride, &paethZMask)
	}
	return true
}

// paeth8Enabled reports whether paeth8Out and paeth16Out run a kernel.
func paeth8Enabled() bool { return (hasPaeth8 || hasPaeth8AVX2) && !forceScalar && !forceNoPaeth8 }

// paeth3x16AVX512 is implemented in paeth16_amd64.s.
//
//go:noescape
func paeth3x16AVX512(dst, src, prev *byte, n, dstride, sstride int)

// paeth16Out is paeth8Out for sixteen rows (two eight-row wavefronts side
// by side, twice the work per step of the serial chain): src must stay
// readable one byte past row 15; n ≥ 17. Without AVX-512 it runs the
// sixteen-row AVX2 kernel.
func paeth16Out(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool {
	if !paeth8Enabled() || n < 17 || dstride < 3*n || sstride < 3*n ||
		len(dst) < 15*dstride+3*n || len(src) < 15*sstride+3*n+1 || len(prev) < 3*n+1 {
		return false
	}
	if paeth8AVX512() {
		paeth3x16AVX512(&dst[0], &src[0], &prev[0], n, dstride, sstride)
		return true
	}
	if forceNoPaeth16AVX2 {
		paeth3x8AVX2(&dst[0], &src[0], &prev[0], n, dstride, sstride, &paethZMask)
		paeth3x8AVX2(&dst[8*dstride], &src[8*sstride], &dst[7*dstride], n, dstride, sstride, &paethZMask)
		return true
	}
	paeth3x16AVX2(&dst[0], &src[0], &prev[0], n, dstride, sstride, &paethZMask16)
	return true
}
