//go:build linux

package torchrunner

// The conformance suite (device/runnertest) against the PyTorch runner on
// Debian's torch (CPU, fp32), the tiny checkpoint and the case-A inputs,
// in tolerance mode against the in-process CPU backend's action_pred.
// Skipped when /usr/bin/python3 has no torch (apt-get install
// python3-torch python3-numpy; make torch-deps).

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/cpu"
	"github.com/gr00tgw/gr00tgw/device/runner"
	"github.com/gr00tgw/gr00tgw/device/runnertest"
	"github.com/gr00tgw/gr00tgw/internal/inputsdir"
)

const (
	tinyDir = "../../testdata/n17-tiny"
	caseA   = tinyDir + "/caseA"
)

// fp32Tolerance bounds |torch − Go| of the tiny checkpoint's action_pred
// at fp32 (different summation orders; the values are O(1)).
const fp32Tolerance = 1e-4

// caseAInputs are the DROID demo's model inputs with their explicit noise.
func caseAInputs(t testing.TB) *device.Inputs {
	in := &device.Inputs{EmbodimentID: 24}
	require.NoError(t, inputsdir.Read(in, caseA))
	require.NotNil(t, in.Noise)
	return in
}

func TestConformanceTorchRunner(t *testing.T) {
	requireTorch(t, "__main__")
	if testing.Short() {
		t.Skip("-short: starts the PyTorch runner once per case (torch imports take seconds)")
	}
	in := caseAInputs(t)
	ref, err := cpu.Open(context.Background(), device.Options{WeightsDir: tinyDir, Threads: 1}, cpu.DefaultLayout)
	require.NoError(t, err)
	res, err := ref.Predict(context.Background(), in)
	require.NoError(t, err)
	require.NoError(t, ref.Close())

	dir, err := Extract()
	require.NoError(t, err)
	weights, err := filepath.Abs(tinyDir)
	require.NoError(t, err)
	argv, _ := Options{Python: debianPython, Device: "cpu", Dtype: "fp32"}.Command(dir, nil)
	argv = append(argv, "--fd", "3", "--backend", "torch", "--weights-dir", weights, "--policy", "fp32",
		"--threads", strconv.Itoa(min(4, runtime.NumCPU())), "--index", "0")
	// runnertest.Exec passes this process's environment.
	for _, kv := range Env(dir, []string{}) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Logf("runner: %v", argv)
	runnertest.Run(t, runnertest.Exec(argv...), runnertest.Options{Inputs: in, Want: res.ActionPred, Tolerance: fp32Tolerance})
}

// TestRTCAgreesWithGo: with real-time chunking, the PyTorch runner (fp32,
// through a runner.Pool, the previous chunk in shared memory) and the Go
// CPU backend agree (≤ 1e-4), and both keep the frozen rows exactly.
func TestRTCAgreesWithGo(t *testing.T) {
	requireTorch(t, "__main__")
	if testing.Short() {
		t.Skip("-short: starts the PyTorch runner")
	}
	ref, err := cpu.Open(context.Background(), device.Options{WeightsDir: tinyDir, Threads: 1}, cpu.DefaultLayout)
	require.NoError(t, err)
	defer ref.Close()
	dir, err := Extract()
	require.NoError(t, err)
	weights, err := filepath.Abs(tinyDir)
	require.NoError(t, err)
	argv, env := Options{Python: debianPython, Device: "cpu", Dtype: "fp32"}.Command(dir, os.Environ())
	p, err := runner.Open(context.Background(), runner.Options{Command: argv, Env: env, Backend: "torch",
		Device: device.Options{WeightsDir: weights, Threads: 2}})
	require.NoError(t, err)
	defer p.Close()

	prev := make([]float32, 40*132)
	for i := range prev {
		prev[i] = float32(i%89)/89 - 0.5
	}
	for _, c := range []struct{ h, o, f int }{{40, 12, 4}, {16, 16, 3}, {40, 0, 0}} {
		in := caseAInputs(t)
		in.RTC = &device.RTC{Prev: prev, PrevRows: 40, Horizon: c.h, Overlap: c.o, Frozen: c.f, RampRate: 6}
		want, err := ref.Predict(context.Background(), in)
		require.NoError(t, err)
		got, err := p.Predict(context.Background(), in)
		require.NoError(t, err, "H=%d O=%d F=%d", c.h, c.o, c.f)
		var md float64
		for i := range want.ActionPred {
			md = math.Max(md, math.Abs(float64(want.ActionPred[i]-got.ActionPred[i])))
		}
		t.Logf("H=%d O=%d F=%d: max |torch - Go| = %.3g", c.h, c.o, c.f, md)
		require.LessOrEqual(t, md, fp32Tolerance)
		for r := 0; r < c.f; r++ {
			row := prev[(c.h-c.o+r)*132 : (c.h-c.o+r+1)*132]
			require.Equal(t, row, got.ActionPred[r*132:(r+1)*132], "torch: frozen row %d", r)
			require.Equal(t, row, want.ActionPred[r*132:(r+1)*132], "Go: frozen row %d", r)
		}
	}
}
