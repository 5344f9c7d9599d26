//go:build !unix

package main

import (
	"testing"
	"time"
)

type cpuTimer struct{}

func cpuNow() time.Duration { return 0 }

func startCPU(b *testing.B) *cpuTimer { b.ResetTimer(); return &cpuTimer{} }

func (c *cpuTimer) report(b *testing.B) {}
