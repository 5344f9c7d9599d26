package actionhead

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/core/safetensors"
	"github.com/gr00tgw/gr00tgw/core/tensor"
)

const (
	tinyDir      = "../../../testdata/n17-tiny"
	imageTokenID = 151655
	droidSlot    = 24
)

func readF32(t testing.TB, name string) ([]float32, []int) {
	t.Helper()
	a, err := npy.ReadFile(filepath.Join(tinyDir, "caseA", name+".npy"))
	require.NoError(t, err)
	v, err := a.Float32s()
	require.NoError(t, err)
	return v, a.Shape
}

func readI64(t testing.TB, name string) []int64 {
	t.Helper()
	a, err := npy.ReadFile(filepath.Join(tinyDir, "caseA", name+".npy"))
	require.NoError(t, err)
	v, err := a.Int64s()
	require.NoError(t, err)
	return v
}

type tinyFixture struct {
	cfg              Config
	m                *Model
	features         []float32
	S                int
	imageMask, valid []bool
	state, noise     []float32
}

func loadTiny(t testing.TB, k tensor.Kernels) *tinyFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	cfg, err := ConfigFromJSON(raw)
	require.NoError(t, err)
	set, err := safetensors.Open(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	defer set.Close()
	m, err := Load(cfg, FromSafetensors(set), k, droidSlot)
	require.NoError(t, err)
	f := &tinyFixture{cfg: cfg, m: m}
	var shape []int
	f.features, shape = readF32(t, "backbone_features")
	f.S = shape[1]
	for _, id := range readI64(t, "input_ids") {
		f.imageMask = append(f.imageMask, id == imageTokenID)
	}
	for _, v := range readI64(t, "attention_mask") {
		f.valid = append(f.valid, v == 1)
	}
	f.state, _ = readF32(t, "state_normalized")
	f.noise, _ = readF32(t, "noise")
	return f
}

// compare returns the Pearson correlation and max|got − want| / max|want|.
func compare(got, want []float32) (pcc, rel float64) {
	var sg, sw float64
	for i := range want {
		sg += float64(got[i])
		sw += float64(want[i])
	}
	mg, mw := sg/float64(len(want)), sw/float64(len(want))
	var cov, vg, vw, maxd, maxw float64
	for i := range want {
		dg, dw := float64(got[i])-mg, float64(want[i])-mw
		cov += dg * dw
		vg += dg * dg
		vw += dw * dw
		maxd = math.Max(maxd, math.Abs(float64(got[i])-float64(want[i])))
		maxw = math.Max(maxw, math.Abs(float64(want[i])))
	}
	return cov / math.Sqrt(vg*vw), maxd / maxw
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func checkTap(t *testing.T, name string, got []float32, want []float32) {
	t.Helper()
	require.Len(t, got, len(want), name)
	pcc, rel := compare(got, want)
	t.Logf("%-16s n=%6d 1-PCC %.2e  max|d|/max|want| %.3g  max|d| %.3g", name, len(want), 1-pcc, rel, maxAbsDiff(got, want))
	require.GreaterOrEqual(t, pcc, 0.99999, name)
	require.LessOrEqual(t, rel, 1e-3, name)
}

// TestGoldenCaseA feeds the golden backbone features, masks, state and noise
// of n17-tiny case A and compares every tap with the PyTorch fp32 goldens.
func TestGoldenCaseA(t *testing.T) {
	for _, kc := range []struct {
		name string
		k    tensor.Kernels
	}{{"default", tensor.Default()}, {"bf16-weights", tensor.DefaultBF16Weights()}, {"portable", tensor.Portable()}} {
		t.Run(kc.name, func(t *testing.T) {
			f := loadTiny(t, kc.k)
			c := f.cfg
			rec := &Recorder{}
			ap, err := f.m.NewAdapterPlan(512)
			require.NoError(t, err)
			vl := make([]float32, f.S*c.BackboneDim)
			require.NoError(t, ap.Run(vl, f.features, f.S, rec))
			for _, name := range []string{TapVLLN, TapAdapter} {
				want, wantShape := readF32(t, name)
				shape, got, ok := rec.Stacked(name)
				require.True(t, ok, name)
				require.Equal(t, wantShape[1:], shape, name) // goldens keep the batch dim
				checkTap(t, name, got, want)
			}

			// Denoise from the golden adapter output, so that each stage is
			// judged on its own.
			goldVL, _ := readF32(t, TapAdapter)
			dp, err := f.m.NewDenoisePlan(512)
			require.NoError(t, err)
			pred := make([]float32, c.Horizon*c.MaxActionDim)
			rec.Reset()
			require.NoError(t, dp.Run(pred, goldVL, f.S, f.imageMask, f.valid, f.state, f.noise, rec))
			require.Equal(t, []string{TapStateFeatures, TapTemb, TapEulerX, TapActionFeatures, TapDiTOut, TapVelocity, TapActionPred}, rec.Names())
			for _, name := range rec.Names() {
				want, wantShape := readF32(t, name)
				shape, got, ok := rec.Stacked(name)
				require.True(t, ok, name)
				if name == TapStateFeatures {
					wantShape = wantShape[1:] // [1, 1, 64] in the goldens
				}
				require.Equal(t, wantShape, shape, name)
				checkTap(t, name, got, want)
			}
			want, _ := readF32(t, TapActionPred)
			_, got, _ := rec.Stacked(TapActionPred)
			require.Equal(t, got, pred)
			require.LessOrEqual(t, maxAbsDiff(pred, want), 1e-4, "action_pred max|d|")

			// Chained (our own adapter output), without taps; then repeat:
			// bit-identical.
			pred2 := make([]float32, len(pred))
			require.NoError(t, dp.Run(pred2, vl, f.S, f.imageMask, nil, f.state, f.noise, nil))
			pcc, rel := compare(pred2, want)
			t.Logf("chained action_pred PCC %.9f max|d| %.3g rel %.3g", pcc, maxAbsDiff(pred2, want), rel)
			require.LessOrEqual(t, maxAbsDiff(pred2, want), 1e-4)
			pred3 := make([]float32, len(pred))
			vl2 := make([]float32, len(vl))
			require.NoError(t, ap.Run(vl2, f.features, f.S, nil))
			require.Equal(t, vl, vl2, "adapter repeat")
			require.NoError(t, dp.Run(pred3, vl2, f.S, f.imageMask, f.valid, f.state, f.noise, nil))
			require.Equal(t, pred2, pred3, "denoise repeat")
		})
	}
}

// TestInputErrors checks the request-shape contract of both plans.
func TestInputErrors(t *testing.T) {
	f := loadTiny(t, tensor.Portable())
	c := f.cfg
	ap, err := f.m.NewAdapterPlan(8)
	require.NoError(t, err)
	dp, err := f.m.NewDenoisePlan(f.S)
	require.NoError(t, err)
	vl := make([]float32, f.S*c.BackboneDim)
	pred := make([]float32, c.Horizon*c.MaxActionDim)
	noText := make([]bool, f.S)
	for i := range noText {
		noText[i] = true
	}
	noImage := make([]bool, f.S)
	allPad := make([]bool, f.S)
	for name, err := range map[string]error{
		"adapter S > SMax": ap.Run(vl, vl, 9, nil),
		"adapter S = 0":    ap.Run(vl, vl, 0, nil),
		"adapter short":    ap.Run(vl[:3], vl, 8, nil),
		"denoise S > SMax": dp.Run(pred, vl, f.S+1, f.imageMask, nil, f.state, f.noise, nil),
		"short mask":       dp.Run(pred, vl, f.S, f.imageMask[:3], nil, f.state, f.noise, nil),
		"short attn mask":  dp.Run(pred, vl, f.S, f.imageMask, f.valid[:3], f.state, f.noise, nil),
		"short state":      dp.Run(pred, vl, f.S, f.imageMask, nil, f.state[:3], f.noise, nil),
		"short noise":      dp.Run(pred, vl, f.S, f.imageMask, nil, f.state, f.noise[:3], nil),
		"short pred":       dp.Run(pred[:3], vl, f.S, f.imageMask, nil, f.state, f.noise, nil),
		"no text keys":     dp.Run(pred, vl, f.S, noText, nil, f.state, f.noise, nil),
		"no image keys":    dp.Run(pred, vl, f.S, noImage, nil, f.state, f.noise, nil),
		"all padding":      dp.Run(pred, vl, f.S, f.imageMask, allPad, f.state, f.noise, nil),
		"unloaded slot":    dp.Use(3),
	} {
		require.ErrorIs(t, err, ErrInput, name)
	}
	require.NoError(t, dp.Use(droidSlot))
}

// TestPaddingMask checks that padded tokens (attnMask false, any content)
// do not change the result.
func TestPaddingMask(t *testing.T) {
	f := loadTiny(t, tensor.Default())
	c := f.cfg
	vl, _ := readF32(t, TapAdapter)
	dp, err := f.m.NewDenoisePlan(f.S + 7)
	require.NoError(t, err)
	want := make([]float32, c.Horizon*c.MaxActionDim)
	require.NoError(t, dp.Run(want, vl, f.S, f.imageMask, nil, f.state, f.noise, nil))
	S2 := f.S + 7
	vl2 := append(slices.Clone(vl), make([]float32, 7*c.BackboneDim)...)
	for i := f.S * c.BackboneDim; i < len(vl2); i++ {
		vl2[i] = float32(i%13) - 6
	}
	img2 := append(slices.Clone(f.imageMask), true, false, true, false, false, true, false)
	valid2 := make([]bool, S2)
	for i := range f.S {
		valid2[i] = true
	}
	got := make([]float32, len(want))
	require.NoError(t, dp.Run(got, vl2, S2, img2, valid2, f.state, f.noise, nil))
	require.Equal(t, want, got)
}

func TestLoadErrors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	cfg, err := ConfigFromJSON(raw)
	require.NoError(t, err)
	set, err := safetensors.Open(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	defer set.Close()
	w := FromSafetensors(set)
	k := tensor.Portable()

	_, err = Load(cfg, w, k)
	require.ErrorIs(t, err, ErrConfig)
	_, err = Load(cfg, w, k, 32)
	require.ErrorIs(t, err, ErrConfig)

	wrong := cfg
	wrong.HiddenSize = 40
	_, err = Load(wrong, w, k, droidSlot)
	require.ErrorIs(t, err, ErrWeights)
	require.ErrorContains(t, err, "action_head.state_encoder.layer1.W")
	require.ErrorContains(t, err, "[32 132 48]")

	_, err = Load(cfg, dropWeights{w, Prefix + "model.proj_out_2.bias"}, k, droidSlot)
	require.ErrorIs(t, err, ErrWeights)
	require.ErrorIs(t, err, safetensors.ErrNotFound)
	require.ErrorContains(t, err, "action_head.model.proj_out_2.bias")
}

type dropWeights struct {
	Weights
	name string
}

func (d dropWeights) Float32(name string) ([]float32, []int, error) {
	if name == d.name {
		return nil, nil, fmt.Errorf("tensor[%s]: %w", name, safetensors.ErrNotFound)
	}
	return d.Weights.Float32(name)
}

func TestConfigFromJSON(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	cfg, err := ConfigFromJSON(raw)
	require.NoError(t, err)
	require.Equal(t, Config{
		BackboneDim: 32, Width: 64, Heads: 4, HeadDim: 16, Layers: 8, OutputDim: 48, HiddenSize: 48,
		VLLayers: 2, VLHeads: 2, VLHeadDim: 16, VLFF: 128, FF: 256,
		MaxStateDim: 132, MaxActionDim: 132, Horizon: 40, NumSteps: 4, TimestepBuckets: 1000,
		AttendTextEvery: 2, Embodiments: 32, MaxSeqLen: 1024, TimestepInDim: 256,
	}, cfg)
	require.Equal(t, []int{0, 250, 500, 750}, []int{cfg.Timestep(0), cfg.Timestep(1), cfg.Timestep(2), cfg.Timestep(3)})
	var kinds []BlockKind
	for i := range cfg.Layers {
		kinds = append(kinds, cfg.Kind(i))
	}
	require.Equal(t, []BlockKind{TextBlock, SelfBlock, ImageBlock, SelfBlock, TextBlock, SelfBlock, ImageBlock, SelfBlock}, kinds)
	require.NoError(t, DefaultConfig().Validate())

	for name, js := range map[string]string{
		"not json":        `{`,
		"no vlln":         `{"use_vlln": false, "vl_self_attention_cfg": {"positional_embeddings": null}}`,
		"vl pos absent":   `{"vl_self_attention_cfg": {"num_layers": 2}}`,
		"vl pos sinusoid": `{"vl_self_attention_cfg": {"positional_embeddings": "sinusoidal"}}`,
		"dit pos":         `{"diffusion_model_cfg": {"positional_embeddings": "sinusoidal"}, "vl_self_attention_cfg": {"positional_embeddings": null}}`,
		"history":         `{"state_history_length": 2, "vl_self_attention_cfg": {"positional_embeddings": null}}`,
		"heads mismatch":  `{"input_embedding_dim": 100, "vl_self_attention_cfg": {"positional_embeddings": null}}`,
		"zero steps":      `{"num_inference_timesteps": 0, "vl_self_attention_cfg": {"positional_embeddings": null}}`,
	} {
		_, err := ConfigFromJSON([]byte(js))
		require.ErrorIs(t, err, ErrConfig, name)
	}
}

func FuzzConfigFromJSON(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	require.NoError(f, err)
	f.Add(raw)
	f.Add([]byte(`{"diffusion_model_cfg": {"num_layers": -1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ConfigFromJSON(data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if c.Validate() != nil {
			t.Fatal("returned an invalid config")
		}
	})
}

// TestRunAllocatesNothing checks the steady-state zero-allocation contract.
func TestRunAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	f := loadTiny(t, tensor.Default())
	c := f.cfg
	ap, err := f.m.NewAdapterPlan(512)
	require.NoError(t, err)
	dp, err := f.m.NewDenoisePlan(512)
	require.NoError(t, err)
	vl := make([]float32, f.S*c.BackboneDim)
	pred := make([]float32, c.Horizon*c.MaxActionDim)
	run := func() {
		if err := ap.Run(vl, f.features, f.S, nil); err != nil {
			t.Fatal(err)
		}
		if err := dp.Run(pred, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil); err != nil {
			t.Fatal(err)
		}
	}
	run()
	require.Zero(t, testing.AllocsPerRun(5, run))
}

func BenchmarkDenoiseTiny(b *testing.B) {
	f := loadTiny(b, tensor.Default())
	c := f.cfg
	vl, _ := readF32(b, TapAdapter)
	dp, err := f.m.NewDenoisePlan(512)
	require.NoError(b, err)
	pred := make([]float32, c.Horizon*c.MaxActionDim)
	b.ReportAllocs()
	for b.Loop() {
		if err := dp.Run(pred, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAdapterTiny(b *testing.B) {
	f := loadTiny(b, tensor.Default())
	ap, err := f.m.NewAdapterPlan(512)
	require.NoError(b, err)
	vl := make([]float32, f.S*f.cfg.BackboneDim)
	b.ReportAllocs()
	for b.Loop() {
		if err := ap.Run(vl, f.features, f.S, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConcurrentPlans runs independent plans on one shared Model from
// several goroutines (run with -race) and expects identical results.
func TestConcurrentPlans(t *testing.T) {
	f := loadTiny(t, tensor.Default())
	c := f.cfg
	run := func() ([]float32, error) {
		ap, err := f.m.NewAdapterPlan(f.S)
		if err != nil {
			return nil, err
		}
		dp, err := f.m.NewDenoisePlan(f.S)
		if err != nil {
			return nil, err
		}
		vl := make([]float32, f.S*c.BackboneDim)
		pred := make([]float32, c.Horizon*c.MaxActionDim)
		for range 2 {
			if err := ap.Run(vl, f.features, f.S, nil); err != nil {
				return nil, err
			}
			if err := dp.Run(pred, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil); err != nil {
				return nil, err
			}
		}
		return pred, nil
	}
	want, err := run()
	require.NoError(t, err)
	const n = 3
	results := make(chan []float32, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			p, err := run()
			errs <- err
			results <- p
		}()
	}
	for range n {
		require.NoError(t, <-errs)
		require.Equal(t, want, <-results)
	}
}

// plainWeights hides the SlotWeights fast path of the wrapped Weights.
type plainWeights struct{ w Weights }

func (p plainWeights) Float32(name string) ([]float32, []int, error) { return p.w.Float32(name) }

// TestSlotPathMatchesFull loads the projectors through SlotWeights and
// through whole-tensor reads, and the weights as bf16 bits into bf16
// panels: the denoise results must be bit-identical.
func TestSlotPathMatchesFull(t *testing.T) {
	f := loadTiny(t, tensor.Default())
	set, err := safetensors.Open(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	defer set.Close()
	_, ok := FromSafetensors(set).(SlotWeights)
	require.True(t, ok)
	m2, err := Load(f.cfg, plainWeights{FromSafetensors(set)}, tensor.Default(), droidSlot)
	require.NoError(t, err)
	vl, _ := readF32(t, TapAdapter)
	run := func(m *Model) []float32 {
		dp, err := m.NewDenoisePlan(f.S)
		require.NoError(t, err)
		out := make([]float32, f.cfg.Horizon*f.cfg.MaxActionDim)
		require.NoError(t, dp.Run(out, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil))
		return out
	}
	require.Equal(t, run(f.m), run(m2))
	// bf16 panels packed straight from the checkpoint's bits (BF16Weights).
	_, ok = FromSafetensors(set).(BF16Weights)
	require.True(t, ok)
	m3, err := Load(f.cfg, FromSafetensors(set), tensor.DefaultBF16Weights(), droidSlot)
	require.NoError(t, err)
	require.Equal(t, run(m2), run(m3))
}

// TestLimitSteps: a Run limited to n steps stops with x after step n−1 (the
// full Run's Euler x at step n), the limit applies to the following Runs
// only until it is lifted, and a lifted plan predicts as before, bit for bit.
func TestLimitSteps(t *testing.T) {
	f := loadTiny(t, tensor.Default())
	c := f.cfg
	require.Greater(t, c.NumSteps, 2)
	vl, _ := readF32(t, TapAdapter)
	dp, err := f.m.NewDenoisePlan(f.S)
	require.NoError(t, err)
	full := make([]float32, c.Horizon*c.MaxActionDim)
	rec := &Recorder{}
	require.NoError(t, dp.Run(full, vl, f.S, f.imageMask, f.valid, f.state, f.noise, rec))
	_, xs, ok := rec.Stacked(TapEulerX) // [NumSteps, H, A]: x before each step
	require.True(t, ok)
	n := len(full)
	for _, steps := range []int{1, 2} {
		dp.LimitSteps(steps)
		got := make([]float32, n)
		rec.Reset()
		require.NoError(t, dp.Run(got, vl, f.S, f.imageMask, f.valid, f.state, f.noise, rec))
		require.Equal(t, xs[steps*n:(steps+1)*n], got, "steps %d", steps)
		_, vel, _ := rec.Stacked(TapVelocity)
		require.Len(t, vel, steps*n, "steps %d: velocities", steps)
	}
	for _, lift := range []int{0, -1, c.NumSteps, c.NumSteps + 5} {
		dp.LimitSteps(lift)
		got := make([]float32, n)
		require.NoError(t, dp.Run(got, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil))
		require.Equal(t, full, got, "LimitSteps(%d)", lift)
		dp.LimitSteps(1)
	}
}
