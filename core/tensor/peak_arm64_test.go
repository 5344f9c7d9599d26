//go:build arm64 && !purego

package tensor

import (
	"math"
	"os"
	"runtime"
	"testing"
)

// The NEON figures can only be measured on a real arm64 machine (under
// qemu-user they measure the emulator). On one, run
//
//	TUNE=1 go test -run 'TestFMAPeak|TestKernelPeak' -v ./core/tensor/
//	go test -run '^$' -bench MatMul -benchtime 5x ./core/tensor/
//
// for the FMA peak, the micro-kernel alone and the GEMM at the real GR00T
// shapes (GFLOP/s per variant: neon, neon-bf16; BENCH_PORTABLE=1 adds
// portable).

// TestFMAPeak measures the fp32 FMA peak with 24 independent 4-lane FMLA
// chains per thread: TUNE=1 go test -run TestFMAPeak -v ./core/tensor/
func TestFMAPeak(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	if !hasNEON {
		t.Skip("no ASIMD")
	}
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		t.Logf("neon FMLA.4S peak, %d thread(s): %.1f GFLOP/s", threads, measurePeak(fmaPeakNEON, 24*8, 500_000, threads, 40))
	}
}

// TestFMAPeakSmoke runs the peak loop briefly so that it stays correct.
func TestFMAPeakSmoke(t *testing.T) {
	if hasNEON {
		fmaPeakNEON(10)
	}
}

// TestKernelPeak measures the 12×8 micro-kernel alone on cache-resident
// panels (kc=256), one thread: TUNE=1 go test -run TestKernelPeak -v ./core/tensor/
func TestKernelPeak(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	if !hasNEON {
		t.Skip("no ASIMD")
	}
	const kc, mr, nr = 256, 12, 8
	a := alignedFloats(mr * kc)
	b := alignedFloats(nr * kc)
	c := alignedFloats(mr * nr)
	for i := range a {
		a[i] = 1e-3
	}
	fn := func(iters int) {
		for i := 0; i < iters; i++ {
			callKernel(kindNEON, &a[0], &b[0], &c[0], nr, kc, 1, nil)
		}
	}
	t.Logf("neon kernel 12x8 kc=%d fp32 B, 1 thread: %.1f GFLOP/s", kc, measurePeak(fn, 2*mr*nr*kc, 20000, 1, 40))
	bh := alignedUint16s(nr * kc)
	fnh := func(iters int) {
		for i := 0; i < iters; i++ {
			callKernelBF16(kindNEON, &a[0], &bh[0], &c[0], nr, kc, 1, nil)
		}
	}
	t.Logf("neon kernel 12x8 kc=%d bf16 B, 1 thread: %.1f GFLOP/s", kc, measurePeak(fnh, 2*mr*nr*kc, 20000, 1, 40))
}

// TestNEONKernelModes checks the micro-kernel's three store modes and the
// k loop's unrolled and tail paths directly against a float64 product, for
// fp32 and bf16 B panels and for widenBF16 at lengths around its 32-value
// blocks.
func TestNEONKernelModes(t *testing.T) {
	if !hasNEON {
		t.Skip("no ASIMD")
	}
	const mr, nr, ldc = 12, 8, 11
	for _, kc := range []int{0, 1, 3, 4, 5, 8, 13, 256} {
		a := make([]float32, max(kc, 1)*mr)
		b := make([]float32, max(kc, 1)*nr)
		bh := make([]uint16, len(b))
		for i := range a {
			a[i] = float32(i%7) - 3.25
		}
		for i := range b {
			b[i] = float32(i%5)*0.5 - 1
			bh[i] = uint16(math.Float32bits(b[i]) >> 16)
		}
		bias := make([]float32, nr)
		for j := range bias {
			bias[j] = float32(j) + 0.5
		}
		for mode := 0; mode < 3; mode++ {
			for _, bf := range []bool{false, true} {
				c := make([]float32, (mr-1)*ldc+nr)
				for i := range c {
					c[i] = float32(i%3) + 1
				}
				init := append([]float32(nil), c...)
				var bp *float32
				if mode == 2 {
					bp = &bias[0]
				}
				if bf {
					callKernelBF16(kindNEON, &a[0], &bh[0], &c[0], ldc, kc, mode, bp)
				} else {
					callKernel(kindNEON, &a[0], &b[0], &c[0], ldc, kc, mode, bp)
				}
				for r := 0; r < mr; r++ {
					for j := 0; j < ldc && r*ldc+j < len(c); j++ {
						got := c[r*ldc+j]
						if j >= nr {
							if got != init[r*ldc+j] {
								t.Fatalf("kc=%d mode=%d bf16=%v: c[%d][%d] outside the tile written", kc, mode, bf, r, j)
							}
							continue
						}
						var want float64
						for p := 0; p < kc; p++ {
							want += float64(a[p*mr+r]) * float64(b[p*nr+j])
						}
						switch mode {
						case 1:
							want += float64(init[r*ldc+j])
						case 2:
							want += float64(bias[j])
						}
						if d := float64(got) - want; d > 1e-3 || d < -1e-3 {
							t.Fatalf("kc=%d mode=%d bf16=%v: c[%d][%d] = %g, want %g", kc, mode, bf, r, j, got, want)
						}
					}
				}
			}
		}
	}
	for _, n := range []int{0, 1, 31, 32, 33, 64, 95, 100} {
		src := make([]uint16, n)
		for i := range src {
			src[i] = uint16(0x3f80 + i*37)
		}
		dst := make([]float32, n)
		want := make([]float32, n)
		widenBF16(kindNEON, dst, src)
		widenBF16Go(want, src)
		for i := range dst {
			if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
				t.Fatalf("widenBF16 n=%d: dst[%d] = %#x, want %#x", n, i, math.Float32bits(dst[i]), math.Float32bits(want[i]))
			}
		}
	}
}
