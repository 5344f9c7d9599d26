//go:build !amd64 || purego

package image

// paeth8Out has no SIMD version on this architecture: it does nothing and
// reports false.
func paeth8Out(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool {
	return false
}

// paeth8Enabled is false: this build has no eight-row Paeth kernel.
func paeth8Enabled() bool { return false }

// paeth16Out has no SIMD version on this architecture: it does nothing and
// reports false.
func paeth16Out(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool {
	return false
}

// forceNoPaeth16AVX2 has no effect on this architecture (tests set it).
var forceNoPaeth16AVX2 = false
