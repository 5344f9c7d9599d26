//go:build amd64 && !purego

package image

import "testing"

// TestResizeKernelLevels runs the differential resize tests at every
// kernel level this CPU supports: AVX-512, AVX2, SSSE3 and the SSE2
// baseline (the levels below the best one are forced by switching the
// feature variables off).
func TestResizeKernelLevels(t *testing.T) {
	z, a, s, sh := useAVX512Resize, useAVX2Resize, hasSSSE3, useSharedWindow
	defer func() {
		useAVX512Resize, useAVX2Resize, hasSSSE3, useSharedWindow, usePairedWindows = z, a, s, sh, true
	}()
	for _, l := range []struct {
		name                  string
		sh, z, a, s, pw, have bool
	}{
		{"avx512", true, true, true, true, true, z},
		{"avx512-window-per-zmm", false, true, true, true, true, z},
		{"avx2", false, false, true, true, true, a},
		{"avx2-unpaired", false, false, true, true, false, a},
		{"ssse3", false, false, false, true, true, s},
		{"sse2", false, false, false, false, true, true},
	} {
		t.Run(l.name, func(t *testing.T) {
			if !l.have {
				t.Skipf("CPU lacks %s", l.name)
			}
			useSharedWindow, useAVX512Resize, useAVX2Resize, hasSSSE3, usePairedWindows = l.sh, l.z, l.a, l.s, l.pw
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
	set := func(zz, aa, ss, scalar, shared, paired bool) func() func() {
		return func() func() {
			useAVX512Resize, useAVX2Resize, hasSSSE3, forceScalar, useSharedWindow, usePairedWindows = zz, aa, ss, scalar, shared, paired
			return func() {
				useAVX512Resize, useAVX2Resize, hasSSSE3, forceScalar, useSharedWindow, usePairedWindows = z, a, s, false, true, true
			}
		}
	}
	ls := []kernelLevel{
		{"scalar", set(false, false, false, true, true, true)},
		{"sse-old", set(false, false, s, false, true, true)},
	}
	if a {
		ls = append(ls, kernelLevel{"avx2-unpaired", set(false, true, s, false, true, false)})
		ls = append(ls, kernelLevel{"avx2", set(false, true, s, false, true, true)})
	}
	if z {
		ls = append(ls, kernelLevel{"avx512-window-per-zmm", set(true, true, s, false, false, true)})
		ls = append(ls, kernelLevel{"avx512", set(true, true, s, false, true, true)})
	}
	return ls
}
