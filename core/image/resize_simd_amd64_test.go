//go:build amd64 && !purego

package image

import "testing"

// TestResizeKernelLevels runs the differential resize tests at every
// kernel level this CPU supports: AVX-512, AVX2, SSSE3 and the SSE2
// baseline (the levels below the best one are forced by switching the
// feature variables off).
func TestResizeKernelLevels(t *testing.T) {
	z, a, s, sh := useAVX512Resize, useAVX2Resize, hasSSSE3, useSharedWindow
	defer func() { useAVX512Resize, useAVX2Resize, hasSSSE3, useSharedWindow = z, a, s, sh }()
	for _, l := range []struct {
		name              string
		sh, z, a, s, have bool
	}{
		{"avx512", true, true, true, true, z},
		{"avx512-window-per-zmm", false, true, true, true, z},
		{"avx2", false, false, true, true, a},
		{"ssse3", false, false, false, true, s},
		{"sse2", false, false, false, false, true},
	} {
		t.Run(l.name, func(t *testing.T) {
			if !l.have {
				t.Skipf("CPU lacks %s", l.name)
			}
			useSharedWindow, useAVX512Resize, useAVX2Resize, hasSSSE3 = l.sh, l.z, l.a, l.s
			checkResizeKernels(t)
			if raceEnabled || testing.Short() {
				return // the scalar loops run ~10× slower under -race
			}
			TestAreaSIMDMatchesScalar(t)
			TestBicubicSIMDMatchesScalar(t)
			TestCaseA(t)
		})
	}
}

// kernelLevels lists the resize kernel levels this CPU can run, best
// last; set selects one, and the returned func restores the defaults.
func kernelLevels() []kernelLevel {
	z, a, s := useAVX512Resize, useAVX2Resize, hasSSSE3
	set := func(zz, aa, ss, scalar, shared bool) func() func() {
		return func() func() {
			useAVX512Resize, useAVX2Resize, hasSSSE3, forceScalar, useSharedWindow = zz, aa, ss, scalar, shared
			return func() {
				useAVX512Resize, useAVX2Resize, hasSSSE3, forceScalar, useSharedWindow = z, a, s, false, true
			}
		}
	}
	ls := []kernelLevel{
		{"scalar", set(false, false, false, true, true)},
		{"sse-old", set(false, false, s, false, true)},
	}
	if a {
		ls = append(ls, kernelLevel{"avx2", set(false, true, s, false, true)})
	}
	if z {
		ls = append(ls, kernelLevel{"avx512-window-per-zmm", set(true, true, s, false, false)})
		ls = append(ls, kernelLevel{"avx512", set(true, true, s, false, true)})
	}
	return ls
}
