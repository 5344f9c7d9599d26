// Package benchcpu adds process CPU time per op ("cpu-ns/op") to Go
// benchmarks. On a shared or oversubscribed machine wall time mostly
// measures waiting; CPU time per op, next to it, says what the code costs
// (and, for parallel code, wall < CPU shows the cores in use). Test-only
// helper; safe for concurrent use.
package benchcpu

import (
	"testing"
	"time"
)

// Now returns the process's user+system CPU time (0 where the platform
// does not report it).
func Now() time.Duration { return now() }

// Report adds the CPU time spent since start, divided by b.N, as the
// "cpu-ns/op" metric. Use as `defer benchcpu.Report(b, benchcpu.Now())`
// at the top of a benchmark (after any setup not to be counted). It
// reports nothing where the platform gives no CPU time.
func Report(b *testing.B, start time.Duration) {
	if end := now(); end > 0 && b.N > 0 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}
