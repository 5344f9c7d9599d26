//go:build linux

package torchrunner

// The conformance suite (device/runnertest) against the PyTorch runner on
// Debian's torch (CPU, fp32), the tiny checkpoint and the case-A inputs,
// in tolerance mode against the in-process CPU backend's action_pred.
// Skipped when /usr/bin/python3 has no torch (apt-get install
// python3-torch python3-numpy; make torch-deps).

import (
	"context"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/cpu"
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
