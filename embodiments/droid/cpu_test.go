//go:build unix

package main

import (
	"syscall"
	"testing"
	"time"
)

// cpuTimer reports process CPU time per op next to wall time: on a shared,
// oversubscribed machine wall-clock ns/op is inflated by waiting for a core,
// CPU time much less so.
type cpuTimer struct{ start time.Duration }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU(b *testing.B) *cpuTimer { b.ResetTimer(); return &cpuTimer{start: cpuNow()} }

func (c *cpuTimer) report(b *testing.B) {
	b.ReportMetric(float64(cpuNow()-c.start)/float64(b.N), "cpu-ns/op")
}
