//go:build (amd64 || arm64) && !purego

package tensor

import (
	"runtime"
	"sync"
	"time"
)

// FMAPeak measures the fp32 fused multiply-add peak of the best vector
// level this process uses (AVX-512F, else AVX2+FMA; NEON on arm64) in
// GFLOP/s on threads OS threads at once: independent FMA chains with no
// memory traffic, the best of 10 runs of a few milliseconds. It is the
// ceiling of any fp32 GEMM on this CPU, for benchmark tools that report
// the fraction of it a computation reaches. It returns 0 where no SIMD level is in use
// (-tags purego, other architectures, a CPU without the level). It keeps
// the threads busy while it runs; safe for concurrent use.
func FMAPeak(threads int) float64 {
	fn, flops := fmaPeakLoop()
	if fn == nil || threads < 1 {
		return 0
	}
	return measurePeak(fn, flops, 2_000_000, threads, 10)
}

// measurePeak runs fn(iters) on `threads` locked OS threads at once and
// returns the aggregate GFLOP/s, the best of reps runs.
func measurePeak(fn func(int), flopsPerIter float64, iters, threads, reps int) float64 {
	best := 0.0
	for rep := 0; rep < reps; rep++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < threads; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				<-start
				fn(iters)
			}()
		}
		time.Sleep(time.Millisecond)
		t0 := time.Now()
		close(start)
		wg.Wait()
		g := flopsPerIter * float64(iters) * float64(threads) / time.Since(t0).Seconds() / 1e9
		best = max(best, g)
	}
	return best
}
