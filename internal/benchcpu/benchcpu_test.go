package benchcpu

import (
	"runtime"
	"testing"
)

func TestNowAdvances(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no CPU time on this platform")
	}
	t0 := Now()
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i ^ (x >> 3)
	}
	if Now() <= t0 {
		t.Fatalf("CPU time did not advance (%d)", x)
	}
}
