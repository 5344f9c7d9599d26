//go:build linux

package runner_test

import (
	"testing"

	"github.com/gr00tgw/gr00tgw/device/runnertest"
)

// TestConformanceTolerance runs the suite in tolerance mode against the
// in-process server with a reference off by up to 5e-5 (as a GPU runner's
// is off the Go backend's): it passes at Tolerance 1e-4, every other check
// still exact.
func TestConformanceTolerance(t *testing.T) {
	in := caseAInputs(t)
	want := append([]float32(nil), reference(t, in)...)
	for i := range want {
		if i%2 == 0 {
			want[i] += 5e-5
		} else {
			want[i] -= 5e-5
		}
	}
	runnertest.Run(t, serveInProcess, runnertest.Options{Inputs: in, Want: want, Tolerance: 1e-4})
}
