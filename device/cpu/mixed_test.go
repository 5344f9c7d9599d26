package cpu

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/model/actionhead"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
)

var (
	mixedOnce sync.Once
	mixed     *Backend
	mixedErr  error
)

func mixedBackend(t testing.TB) *Backend {
	mixedOnce.Do(func() {
		mixed, mixedErr = Open(context.Background(), device.Options{WeightsDir: tinyDir, Policy: MixedDiT}, DefaultLayout)
	})
	require.NoError(t, mixedErr)
	return mixed
}

// stepTaps runs case A and returns action_pred and the per-step taps name.
func stepTaps(t *testing.T, b *Backend, name string) ([]float32, [][]float32) {
	var steps [][]float32
	res, err := b.PredictTaps(context.Background(), caseAInputs(t), func(n string, step int, _ []int, data []float32) {
		if n == name {
			require.Equal(t, len(steps), step)
			steps = append(steps, slices.Clone(data))
		}
	})
	require.NoError(t, err)
	return res.ActionPred, steps
}

// TestMixedDiTVsFP32: the mixed_dit policy (bfp8_b megakernel emulation
// for the DiT) against the fp32 path on case A: action_pred PCC ≥ 0.999
// (the boot gate) and every step's velocity PCC ≥ 0.9995; also vs the
// PyTorch golden action_pred. Facts carry the megakernel block.
func TestMixedDiTVsFP32(t *testing.T) {
	m, f := mixedBackend(t), tinyBackend(t)
	gotPred, gotVel := stepTaps(t, m, actionhead.TapVelocity)
	wantPred, wantVel := stepTaps(t, f, actionhead.TapVelocity)
	_, gotDiT := stepTaps(t, m, actionhead.TapDiTOut)
	_, wantDiT := stepTaps(t, f, actionhead.TapDiTOut)
	require.Len(t, gotVel, 4)
	require.Len(t, wantVel, 4)
	for s := range gotVel {
		c, cd := tensor.PCC(gotVel[s], wantVel[s]), tensor.PCC(gotDiT[s], wantDiT[s])
		d, rel := maxRel(gotVel[s], wantVel[s])
		t.Logf("step %d: velocity PCC %.7f (max|d| %.3g, rel %.3g); dit_out PCC %.7f", s, c, d, rel, cd)
		assert.GreaterOrEqual(t, c, 0.9995, "velocity step %d", s)
	}
	c := tensor.PCC(gotPred, wantPred)
	d, rel := maxRel(gotPred, wantPred)
	golden := f32(t, "action_pred")
	cg := tensor.PCC(gotPred, golden)
	t.Logf("action_pred: PCC %.7f vs fp32 (max|d| %.3g, rel %.3g); PCC %.7f vs the PyTorch golden", c, d, rel, cg)
	assert.GreaterOrEqual(t, c, 0.999)
	assert.GreaterOrEqual(t, cg, 0.999)
	assert.NotEqual(t, wantPred, gotPred, "mixed_dit must not silently run the fp32 DiT")

	// deterministic: a repeat is bit-identical
	again, _ := stepTaps(t, m, actionhead.TapVelocity)
	assert.Equal(t, gotPred, again)

	fa := m.Facts()
	assert.Equal(t, MixedDiT, fa.Policy)
	st, ok := fa.Extra["stage"].(map[string]any)
	require.True(t, ok, "Extra[stage]")
	assert.Equal(t, "mixed_dit", st["policy"])
	assert.Equal(t, "bfloat8_b", st["mk_arena_dtype"])
	ar := st["arena"].(map[string]any)
	assert.Positive(t, ar["arena_bytes"])
	assert.Len(t, ar["digest_sha256"], 64)
	cm := st["core_map"].(map[string]any)
	assert.Equal(t, 96, cm["compute_cores"])
	_, err := json.Marshal(fa.Extra)
	require.NoError(t, err)
	_, ok = f.Facts().Extra["stage"]
	assert.False(t, ok, "fp32 has no megakernel block")
}

// TestMixedDiTAllocs: a warm mixed_dit Predict allocates only the Result,
// like fp32 (the emulation session reuses its buffers and goroutines).
func TestMixedDiTAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts: not under -short or -race")
	}
	b := mixedBackend(t)
	in := caseAInputs(t)
	ctx := context.Background()
	_, err := b.Predict(ctx, in)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(2, func() {
		if _, err := b.Predict(ctx, in); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 3.0, "warm mixed_dit Predict allocations")
}

// TestMatchDims: the megakernel schedule refuses an action head it does not
// describe.
func TestMatchDims(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	c, err := actionhead.ConfigFromJSON(raw)
	require.NoError(t, err)
	d, err := schedule.FromConfig(raw)
	require.NoError(t, err)
	require.NoError(t, matchDims(d, c))
	c2 := c
	c2.AttendTextEvery = 3
	assert.ErrorContains(t, matchDims(d, c2), "attend_text_every_n_blocks 3")
	d2 := d
	d2.Blocks++
	assert.ErrorContains(t, matchDims(d2, c), "disagree with the action head")
}

// TestMixedDiTOpenClose: a second mixed_dit backend opens, reports its
// policy and closes (stopping the emulation's goroutines).
func TestMixedDiTOpenClose(t *testing.T) {
	if testing.Short() {
		t.Skip("second backend load")
	}
	b, err := device.Open(context.Background(), Name, device.Options{WeightsDir: tinyDir, Policy: MixedDiT, Threads: 1})
	require.NoError(t, err)
	assert.Equal(t, MixedDiT, b.Facts().Policy)
	assert.Contains(t, Policies(), MixedDiT)
	require.NoError(t, b.Close())
	_, err = b.Predict(context.Background(), caseAInputs(t))
	assert.ErrorIs(t, err, ErrClosed)
}
