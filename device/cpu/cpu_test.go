package cpu

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/model/backbone"
	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

const (
	tinyDir = "../../testdata/n17-tiny"
	caseA   = tinyDir + "/caseA"
)

func readNpy(t testing.TB, name string) *npy.Array {
	a, err := npy.ReadFile(filepath.Join(caseA, name+".npy"))
	require.NoError(t, err)
	return a
}

func f32(t testing.TB, name string) []float32 {
	v, err := readNpy(t, name).Float32s()
	require.NoError(t, err)
	return v
}

func i32(t testing.TB, name string) []int32 {
	v, err := readNpy(t, name).Int64s()
	require.NoError(t, err)
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// caseAInputs builds device.Inputs from the case-A golden files.
func caseAInputs(t testing.TB) *device.Inputs {
	pa := readNpy(t, "pixel_values")
	pix, err := pa.Float32s()
	require.NoError(t, err)
	g := i32(t, "image_grid_thw")
	in := &device.Inputs{PixelValues: pix, PixelRows: pa.Shape[0], PixelCols: pa.Shape[1],
		InputIDs: i32(t, "input_ids"), AttentionMask: i32(t, "attention_mask"),
		PositionIDs: i32(t, "position_ids"), State: f32(t, "state_normalized"),
		EmbodimentID: 24, Noise: f32(t, "noise")}
	for i := 0; i+3 <= len(g); i += 3 {
		in.ImageGridTHW = append(in.ImageGridTHW, [3]int{int(g[i]), int(g[i+1]), int(g[i+2])})
	}
	return in
}

var (
	openOnce sync.Once
	shared   *Backend
	openErr  error
)

func tinyBackend(t testing.TB) *Backend {
	openOnce.Do(func() {
		shared, openErr = Open(context.Background(), device.Options{WeightsDir: tinyDir}, DefaultLayout)
	})
	require.NoError(t, openErr)
	return shared
}

func maxRel(got, want []float32) (maxAbs, rel float64) {
	var mx float64
	for i := range want {
		maxAbs = max(maxAbs, math.Abs(float64(got[i])-float64(want[i])))
		mx = max(mx, math.Abs(float64(want[i])))
	}
	return maxAbs, maxAbs / mx
}

// TestGoldenEndToEnd: case A through all four stages; action_pred within
// 1e-4 absolute of the fp32 golden, and the taps on the way.
func TestGoldenEndToEnd(t *testing.T) {
	b := tinyBackend(t)
	in := caseAInputs(t)
	got := map[string][]float32{}
	res, err := b.PredictTaps(context.Background(), in, func(name string, step int, shape []int, data []float32) {
		if step <= 0 {
			got[name] = slices.Clone(data)
		}
	})
	require.NoError(t, err)
	want := f32(t, "action_pred")
	d, rel := maxRel(res.ActionPred, want)
	t.Logf("action_pred max|d| %.3g (rel %.3g)", d, rel)
	assert.LessOrEqual(t, d, 1e-4)
	valid := f32(t, "action_pred_valid")
	for r := 0; r < 40; r++ {
		for c := 0; c < 17; c++ {
			assert.InDelta(t, valid[r*17+c], res.ActionPred[r*132+c], 1e-4)
		}
	}
	for _, n := range []string{"backbone_features", "vlln_out", "adapter_out", "vision_merger", "llm_layer_3"} {
		g, ok := got[n]
		require.True(t, ok, "tap %s missing", n)
		d, rel := maxRel(g, f32(t, n))
		t.Logf("%-18s max|d| %.3g (rel %.3g)", n, d, rel)
		assert.LessOrEqual(t, rel, 1e-4, n)
	}
	// The bf16 golden (upstream's bf16 dtype flow) to PCC 0.9999: our fp32
	// activations over the checkpoint's bf16 weights track it as the fp32
	// reference does (the goldens' fp32 vs bf16 action_pred: PCC 0.99999).
	bf := f32(t, "action_pred_bf16")
	p := tensor.PCC(res.ActionPred, bf)
	t.Logf("action_pred vs action_pred_bf16 PCC %.7f", p)
	assert.GreaterOrEqual(t, p, 0.9999)
	require.Len(t, res.Stages, 4)
	for i, s := range []string{device.StageVision, device.StageLLM, device.StageAdapter, device.StageDenoise} {
		assert.Equal(t, s, res.Stages[i].Name)
		assert.Positive(t, res.Stages[i].Duration)
	}
}

func TestPredictRepeatableAndAllocs(t *testing.T) {
	b := tinyBackend(t)
	in := caseAInputs(t)
	ctx := context.Background()
	r1, err := b.Predict(ctx, in)
	require.NoError(t, err)
	r2, err := b.Predict(ctx, in)
	require.NoError(t, err)
	require.Equal(t, r1.ActionPred, r2.ActionPred, "same noise must give bit-identical actions")

	// Seeded noise: case A's noise is torch.randn(..., manual_seed(1234)).
	seeded := *in
	seeded.Noise, seeded.Seed = nil, 1234
	r3, err := b.Predict(ctx, &seeded)
	require.NoError(t, err)
	assert.Equal(t, r1.ActionPred, r3.ActionPred, "seed 1234 must reproduce the golden noise")

	if testing.Short() || raceEnabled {
		t.Log("allocation check not run: counts are meaningless under -race, and -short skips it")
		return
	}
	// Only the Result (struct, ActionPred, Stages) may be allocated.
	allocs := testing.AllocsPerRun(2, func() {
		if _, err := b.Predict(ctx, in); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 3.0, "warm Predict allocations")
}

func TestPredictErrors(t *testing.T) {
	b := tinyBackend(t)
	ctx := context.Background()
	cases := []struct {
		name string
		edit func(in *device.Inputs)
		want string
	}{
		{"state", func(in *device.Inputs) { in.State = in.State[:17] }, "state has 17 values, want 132"},
		{"noise", func(in *device.Inputs) { in.Noise = in.Noise[:10] }, "noise has 10 values"},
		{"embodiment", func(in *device.Inputs) { in.EmbodimentID = 3 }, "embodiment 3 not loaded"},
		{"cols", func(in *device.Inputs) { in.PixelCols = 100 }, "pixel_values has 100 columns"},
		{"too long", func(in *device.Inputs) {
			in.InputIDs = make([]int32, 600)
			in.AttentionMask = nil
			in.PositionIDs = make([]int32, 1800)
		}, "sequence length 600 outside [1, 512]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := caseAInputs(t)
			tc.edit(in)
			_, err := b.Predict(ctx, in)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := b.Predict(ctx, nil)
	assert.ErrorIs(t, err, ErrInput)
	in := caseAInputs(t)
	in.ImageGridTHW[0] = [3]int{1 << 40, 1 << 40, 448}
	_, err = b.Predict(ctx, in)
	assert.ErrorIs(t, err, ErrInput)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.Predict(cctx, caseAInputs(t))
	assert.ErrorIs(t, err, context.Canceled)
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, device.Options{WeightsDir: tinyDir, Policy: "int4"}, DefaultLayout)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dtype policy[int4] not available (have [fp32")
	_, err = Open(ctx, device.Options{WeightsDir: t.TempDir()}, DefaultLayout)
	require.Error(t, err)
	_, err = Open(ctx, device.Options{WeightsDir: tinyDir}, backbone.Layout{MaxPatches: 3, MaxImages: 1, MaxSeq: 1})
	require.Error(t, err)
}

func TestRegistryAndFacts(t *testing.T) {
	assert.Contains(t, device.Names(), Name)
	b, err := device.Open(context.Background(), Name, device.Options{WeightsDir: tinyDir})
	require.NoError(t, err)
	f := b.Facts()
	assert.Equal(t, "cpu", f.Backend)
	assert.Equal(t, "fp32", f.Policy)
	assert.Equal(t, []string{"vision", "llm", "adapter", "denoise"}, f.Stages)
	assert.Len(t, f.Extra["checkpoint_sha256"], 64)
	assert.Positive(t, f.Extra["parameters"])
	assert.Positive(t, f.Extra["threads"])
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	_, err = b.Predict(context.Background(), caseAInputs(t))
	assert.True(t, errors.Is(err, ErrClosed))
	assert.True(t, strings.HasPrefix(err.Error(), "cpu:"))
}

// BenchmarkPredictTiny: warm case-A predictions on the tiny checkpoint,
// with per-stage milliseconds as metrics.
func BenchmarkPredictTiny(b *testing.B) { benchPredict(b, tinyBackend(b)) }

// BenchmarkPredictTinyMixedDiT: the same under the mixed_dit policy (the
// denoise stage runs the megakernel emulation).
func BenchmarkPredictTinyMixedDiT(b *testing.B) { benchPredict(b, mixedBackend(b)) }

func benchPredict(b *testing.B, be *Backend) {
	in := caseAInputs(b)
	ctx := context.Background()
	if _, err := be.Predict(ctx, in); err != nil { // warm
		b.Fatal(err)
	}
	sums := map[string]float64{}
	b.ReportAllocs()
	n := 0
	c0 := benchcpu.Now().Seconds()
	for b.Loop() {
		res, err := be.Predict(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range res.Stages {
			sums[s.Name] += float64(s.Duration.Microseconds()) / 1000
		}
		n++
	}
	for name, v := range sums {
		b.ReportMetric(v/float64(n), name+"-ms")
	}
	b.ReportMetric((benchcpu.Now().Seconds()-c0)*1000/float64(n), "cpu-ms/op")
}

// TestPredictConcurrentCallers: concurrent Predicts are serialised by the
// backend and all get the same bit-identical result (run with -race).
func TestPredictConcurrentCallers(t *testing.T) {
	b := tinyBackend(t)
	in := caseAInputs(t)
	ref, err := b.Predict(context.Background(), in)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	outs := make([][]float32, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.Predict(context.Background(), in)
			errs[i] = err
			if err == nil {
				outs[i] = r.ActionPred
			}
		}()
	}
	wg.Wait()
	for i := range 3 {
		require.NoError(t, errs[i])
		assert.Equal(t, ref.ActionPred, outs[i])
	}
}

// A request cancelled inside a stage stops at the next block, layer, step
// or DiT block: the cancellation is polled there, not only between stages.
func TestPredictCancelledInsideStages(t *testing.T) {
	b := tinyBackend(t)
	for _, at := range []string{"vision_block_0", "llm_layer_0", "euler_x"} {
		ctx, cancel := context.WithCancel(context.Background())
		var after []string
		cancelled := false
		_, err := b.PredictTaps(ctx, caseAInputs(t), func(name string, step int, shape []int, data []float32) {
			if cancelled {
				after = append(after, name)
			}
			if name == at && !cancelled {
				cancel()
				cancelled = true
			}
		})
		cancel()
		require.ErrorIs(t, err, context.Canceled, at)
		assert.NotErrorIs(t, err, ErrInput, at)
		// At most the rest of the block that was running reports taps.
		assert.LessOrEqual(t, len(after), 3, "%s: taps after the cancellation: %v", at, after)
	}
	// The backend serves the next request normally.
	_, err := b.Predict(context.Background(), caseAInputs(t))
	require.NoError(t, err)
}
