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

// TestNormFMAExact: the AVX2 patchify kernel's division-free
// normalisation is exact for the normalisations GR00T checkpoints ship
// (0.5/0.5 and CLIP's), so serving never takes its division fallback there.
func TestNormFMAExact(t *testing.T) {
	if !hasPatchifyAVX2 {
		t.Skip("no AVX2+FMA")
	}
	for _, ms := range [][2][3]float32{
		{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}},
		{{0.48145466, 0.4578275, 0.40821073}, {0.26862954, 0.26130258, 0.27577711}},
	} {
		cfg := DefaultDROIDChain()
		cfg.Mean, cfg.Std = ms[0], ms[1]
		if !NewNormLUT(&cfg).fma {
			t.Errorf("mean %v std %v: FMA normalisation not exact", ms[0], ms[1])
		}
	}
}
