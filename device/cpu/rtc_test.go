package cpu

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/device"
)

// rtcPrev is a previous chunk for the RTC tests: case A's action_pred,
// scaled and shifted so that it differs from what the model predicts.
func rtcPrev(t testing.TB) []float32 {
	p := f32(t, "action_pred")
	for i := range p {
		p[i] = p[i]*0.5 + 0.1
	}
	return p
}

// TestRTCSemantics: RTC with O = F = 0 is the plain sampler bit for bit;
// frozen rows are the previous chunk's rows H−O..H−O+F−1 exactly; a bad
// option is an input error before any stage runs.
func TestRTCSemantics(t *testing.T) {
	b := tinyBackend(t)
	ctx := context.Background()
	in := caseAInputs(t)
	plain, err := b.Predict(ctx, in)
	require.NoError(t, err)
	prev := rtcPrev(t)
	A := 132

	in.RTC = &device.RTC{Prev: prev, PrevRows: 40, Horizon: 40, RampRate: 6}
	off, err := b.Predict(ctx, in)
	require.NoError(t, err)
	for i := range plain.ActionPred {
		require.Equal(t, math.Float32bits(plain.ActionPred[i]), math.Float32bits(off.ActionPred[i]), "O = F = 0: [%d]", i)
	}

	for _, c := range []struct{ h, o, f int }{{40, 10, 3}, {16, 8, 8}, {40, 40, 40}, {16, 16, 2}} {
		in.RTC = &device.RTC{Prev: prev, PrevRows: 40, Horizon: c.h, Overlap: c.o, Frozen: c.f, RampRate: 6}
		res, err := b.Predict(ctx, in)
		require.NoError(t, err)
		for r := 0; r < c.f; r++ {
			for j := 0; j < A; j++ {
				require.Equal(t, prev[(c.h-c.o+r)*A+j], res.ActionPred[r*A+j], "H=%d O=%d F=%d: frozen row %d col %d", c.h, c.o, c.f, r, j)
			}
		}
	}

	in.RTC = &device.RTC{Prev: prev, PrevRows: 40, Horizon: 40, Overlap: 4, Frozen: 5, RampRate: 6}
	_, err = b.Predict(ctx, in)
	require.ErrorIs(t, err, device.ErrInput)
	assert.ErrorContains(t, err, "rtc_frozen_steps 5")
}

// TestRTCMatchesUpstream runs upstream's RTC semantics, restated in torch
// (testdata/bench/torch_stages.py: denoise as upstream computes it, the
// strengths with torch.linspace/exp as get_action_with_features does), on
// the same inputs for several (H, O, F, r), DROID's horizon and LIBERO's
// (H = 16, its slot), and compares action_pred (≤ 1e-5).
func TestRTCMatchesUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs torch once per case")
	}
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: %s cannot import torch and numpy (%v: %s): apt-get install python3-torch python3-numpy", python, err, out)
	}
	b := tinyBackend(t)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	prev := rtcPrev(t)
	prevFile := filepath.Join(dir, "prev.npy")
	require.NoError(t, npy.WriteFile(prevFile, []int{40, 132}, prev))
	for _, c := range []struct {
		h, o, f, slot int
		r             float64
	}{{40, 10, 3, 24, 6}, {40, 25, 25, 24, 2.5}, {16, 8, 2, 2, 6}} {
		name := fmt.Sprintf("H%d_O%d_F%d_r%g_slot%d", c.h, c.o, c.f, c.r, c.slot)
		t.Run(name, func(t *testing.T) {
			in := caseAInputs(t)
			in.EmbodimentID = c.slot
			in.RTC = &device.RTC{Prev: prev, PrevRows: 40, Horizon: c.h, Overlap: c.o, Frozen: c.f, RampRate: c.r}
			res, err := b.Predict(context.Background(), in)
			require.NoError(t, err)
			out := filepath.Join(dir, name)
			cmd := exec.Command(python, "-W", "ignore", filepath.Join(root, "testdata", "bench", "torch_stages.py"),
				"--weights-dir", filepath.Join(root, "testdata", "n17-tiny"), "--inputs", filepath.Join(root, "testdata", "n17-tiny", "caseA"),
				"--reps", "1", "--slot", fmt.Sprint(c.slot), "--rtc", fmt.Sprintf("%d,%d,%d,%g", c.h, c.o, c.f, c.r),
				"--rtc-prev", prevFile, "--out", out)
			cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=2")
			log, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", log)
			a, err := npy.ReadFile(filepath.Join(out, "action_pred.npy"))
			require.NoError(t, err)
			want, err := a.Float32s()
			require.NoError(t, err)
			require.Len(t, want, len(res.ActionPred))
			var md float64
			for i := range want {
				md = math.Max(md, math.Abs(float64(want[i])-float64(res.ActionPred[i])))
			}
			t.Logf("max |Go - upstream| = %.3g", md)
			assert.LessOrEqual(t, md, 1e-5)
			for r := 0; r < c.f; r++ {
				for j := 0; j < 132; j++ {
					require.Equal(t, want[r*132+j], res.ActionPred[r*132+j], "frozen row %d: both exactly the previous chunk's", r)
				}
			}
		})
	}
}
