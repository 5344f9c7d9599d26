//go:build amd64 && !purego

package image

import "testing"

// TestSIMDBaselineKernels reruns the SIMD-vs-scalar tests with the SSSE3
// and AVX2 kernels switched off, so the SSE2 kernels that other amd64
// machines use (and the two-row Paeth path of the decoder) stay covered on
// a machine that has the newer instruction sets.
func TestSIMDBaselineKernels(t *testing.T) {
	ssse3, avx2 := hasSSSE3, hasAVX2
	hasSSSE3, hasAVX2 = false, false
	defer func() { hasSSSE3, hasAVX2 = ssse3, avx2 }()
	t.Run("area", TestAreaSIMDMatchesScalar)
	t.Run("bicubic", TestBicubicSIMDMatchesScalar)
	t.Run("bicubic3", TestBicubicSIMD3PairsMatchesScalar)
	t.Run("png", TestPNGFastMatchesStdlib)
}
