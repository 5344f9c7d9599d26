//go:build amd64 && !purego

package image

import "golang.org/x/sys/cpu"

// paeth3x8AVX2 is implemented in paeth8avx2_amd64.s.
//
//go:noescape
func paeth3x8AVX2(dst, src, prev *byte, n, dstride, sstride int, zmask *[8][64]byte)

// hasPaeth8AVX2 reports whether the CPU runs the eight- and sixteen-row
// AVX2 Paeth kernels (AVX-512 CPUs run them too: the AVX-512 ones were
// removed, RATIONALE "The host kernels and what each earns").
var hasPaeth8AVX2 = cpu.X86.HasAVX2

// forceNoPaeth16AVX2 makes paeth16Out run the eight-row AVX2 kernel twice
// instead of the sixteen-row one (tests and benchmarks).
var forceNoPaeth16AVX2 = false

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

// paeth8Out reverses the Paeth filter of eight consecutive 3-byte-per-pixel
// rows of n pixels out of place with the AVX2 wavefront kernel: filtered
// row k at src[k·sstride:], unfiltered result to dst[k·dstride:], prev =
// the unfiltered row above dst row 0. It writes exactly bytes [0, 3n) of
// each dst row. src must stay readable one byte past row 7 and prev one
// byte past 3n (the kernel loads 4 bytes per pixel). False means nothing
// was done: no AVX2, switched off (forceScalar, forceNoPaeth8), n < 9, or
// slices too short.
func paeth8Out(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool {
	if !paeth8Enabled() || n < 9 || dstride < 3*n || sstride < 3*n ||
		len(dst) < 7*dstride+3*n || len(src) < 7*sstride+3*n+1 || len(prev) < 3*n+1 {
		return false
	}
	paeth3x8AVX2(&dst[0], &src[0], &prev[0], n, dstride, sstride, &paethZMask)
	return true
}

// paeth8Enabled reports whether paeth8Out and paeth16Out run a kernel.
func paeth8Enabled() bool { return hasPaeth8AVX2 && !forceScalar && !forceNoPaeth8 }

// paeth16Out is paeth8Out for sixteen rows with the sixteen-row AVX2
// kernel (twice the rows per step of the same serial chain): src must stay
// readable one byte past row 15; n ≥ 17.
func paeth16Out(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool {
	if !paeth8Enabled() || n < 17 || dstride < 3*n || sstride < 3*n ||
		len(dst) < 15*dstride+3*n || len(src) < 15*sstride+3*n+1 || len(prev) < 3*n+1 {
		return false
	}
	if forceNoPaeth16AVX2 {
		paeth3x8AVX2(&dst[0], &src[0], &prev[0], n, dstride, sstride, &paethZMask)
		paeth3x8AVX2(&dst[8*dstride], &src[8*sstride], &dst[7*dstride], n, dstride, sstride, &paethZMask)
		return true
	}
	paeth3x16AVX2(&dst[0], &src[0], &prev[0], n, dstride, sstride, &paethZMask16)
	return true
}
