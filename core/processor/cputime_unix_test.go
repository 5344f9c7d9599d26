//go:build unix

package processor

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user+system CPU time. Benchmarks report it
// per op ("cpu-ns/op") next to wall time because the shared build machine
// is heavily oversubscribed and wall time there mostly measures waiting.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
