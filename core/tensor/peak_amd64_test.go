//go:build amd64 && !purego

package tensor

import (
	"os"
	"runtime"
	"testing"
)

// TestFMAPeak measures the fp32 FMA peak with 24 independent VFMADD231PS
// zmm chains (12 ymm for AVX2) per thread: TUNE=1 go test -run TestFMAPeak -v ./core/tensor/
func TestFMAPeak(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	iters := 500_000
	ghz := measurePeak(clockLoop, 16, 1_000_000, 1, 40) // "flops" = cycles here
	t.Logf("clock (16 dependent ADDQ per iteration): %.2f GHz", ghz)
	if hasAVX512 {
		t.Logf("avx512 zmm FMA flops per cycle, 1 thread: %.1f", measurePeak(fmaPeakAVX512, 24*32, iters, 1, 40)/ghz)
	}
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		if hasAVX512 {
			t.Logf("avx512 zmm FMA peak, %d thread(s): %.1f GFLOP/s", threads, measurePeak(fmaPeakAVX512, 24*32, iters, threads, 40))
		}
		if hasAVX2 {
			t.Logf("avx2   ymm FMA peak, %d thread(s): %.1f GFLOP/s", threads, measurePeak(fmaPeakAVX2, 12*16, iters, threads, 40))
		}
	}
}

// TestFMAPeakSmoke runs the peak loops briefly so that they stay correct.
func TestFMAPeakSmoke(t *testing.T) {
	if hasAVX512 {
		fmaPeakAVX512(10)
	}
	if hasAVX2 {
		fmaPeakAVX2(10)
	}
	clockLoop(10)
}

// TestKernelPeak measures the micro-kernels alone on cache-resident panels
// (kc=256), one thread: TUNE=1 go test -run TestKernelPeak -v ./core/tensor/
func TestKernelPeak(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	const kc = 256
	a := alignedFloats(6 * kc)
	b := alignedFloats(64 * kc)
	c := alignedFloats(6 * 64)
	for i := range a {
		a[i] = 1e-3
	}
	for _, kind := range []kernelKind{kindAVX512, kindAVX2} {
		if (kind == kindAVX512 && !hasAVX512) || (kind == kindAVX2 && !hasAVX2) {
			continue
		}
		nr := 64
		if kind == kindAVX2 {
			nr = 16
		}
		fn := func(iters int) {
			for i := 0; i < iters; i++ {
				callKernel(kind, &a[0], &b[0], &c[0], nr, kc, 1, nil)
			}
		}
		g := measurePeak(fn, 2*6*float64(nr)*kc, 2000, 1, 40)
		t.Logf("kernel %d (nr=%d) kc=%d fp32 B, 1 thread: %.1f GFLOP/s", kind, nr, kc, g)
		bh := alignedUint16s(64 * kc)
		fnh := func(iters int) {
			for i := 0; i < iters; i++ {
				callKernelBF16(kind, &a[0], &bh[0], &c[0], nr, kc, 1, nil)
			}
		}
		g = measurePeak(fnh, 2*6*float64(nr)*kc, 2000, 1, 40)
		t.Logf("kernel %d (nr=%d) kc=%d bf16 B, 1 thread: %.1f GFLOP/s", kind, nr, kc, g)
	}
}
