//go:build (amd64 || arm64) && !purego

package tensor

import (
	"runtime"
	"sync"
	"time"
)

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
