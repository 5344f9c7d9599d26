package actionhead

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// randomWeights synthesises every tensor the loader asks for with the
// requested shape: N(0, 1/fan_in) for matrices, 1 + small noise for norm
// weights, small values otherwise. shapes maps tensor names (without
// prefix) to shapes derived from cfg.
type randomWeights struct {
	shapes map[string][]int
	seed   uint64
}

func (r randomWeights) Float32(name string) ([]float32, []int, error) {
	shape, ok := r.shapes[strings.TrimPrefix(name, Prefix)]
	if !ok {
		return nil, nil, fmt.Errorf("tensor[%s]: not in the synthetic checkpoint", name)
	}
	n, fanIn := 1, 1
	for _, d := range shape {
		n *= d
	}
	if len(shape) >= 2 {
		fanIn = shape[len(shape)-1]
		if strings.HasSuffix(name, ".W") { // [E, in, out]
			fanIn = shape[1]
		}
	}
	rng := rand.New(rand.NewPCG(r.seed, uint64(len(name))*7919+uint64(n)))
	out := make([]float32, n)
	// Uniform in ±√3·sd (variance 1/fan_in): much cheaper than normals for
	// the real-size benchmarks.
	a := float32(math.Sqrt(3 / float64(fanIn)))
	for i := range out {
		out[i] = a * (float32(rng.Uint32()>>8)*(2.0/(1<<24)) - 1)
	}
	if strings.HasSuffix(name, "norm1.weight") || strings.HasSuffix(name, "norm3.weight") || strings.HasSuffix(name, "vlln.weight") {
		for i := range out {
			out[i] = 1 + 0.1*out[i]
		}
	}
	return out, shape, nil
}

// TestSyntheticShapes loads a synthetic checkpoint with a config that
// differs from the tiny one (odd head counts, 3 Euler steps, 6 blocks with
// attend_text_every_n_blocks 3) and runs it: exercises the shape plumbing
// beyond the golden sizes.
func TestSyntheticShapes(t *testing.T) {
	c := Config{
		BackboneDim: 24, Width: 30, Heads: 3, HeadDim: 10, Layers: 6, OutputDim: 20, HiddenSize: 18,
		VLLayers: 1, VLHeads: 4, VLHeadDim: 6, VLFF: 96, FF: 120,
		MaxStateDim: 11, MaxActionDim: 7, Horizon: 5, NumSteps: 3, TimestepBuckets: 1000,
		AttendTextEvery: 3, Embodiments: 3, MaxSeqLen: 9, TimestepInDim: 256,
	}
	require.NoError(t, c.Validate())
	m, err := Load(c, randomWeights{c.TensorShapes(), 1}, tensor.Default(), 2, 0)
	require.NoError(t, err)
	require.Equal(t, []int{2, 0}, m.Embodiments())
	require.Equal(t, []int{0, 333, 666}, m.Timesteps())
	S := 10
	feat := make([]float32, S*c.BackboneDim)
	for i := range feat {
		feat[i] = float32(math.Sin(float64(i)))
	}
	ap, err := m.NewAdapterPlan(S)
	require.NoError(t, err)
	vl := make([]float32, len(feat))
	require.NoError(t, ap.Run(vl, feat, S, nil))
	dp, err := m.NewDenoisePlan(S)
	require.NoError(t, err)
	img := []bool{false, true, true, false, true, true, true, false, false, true}
	state := make([]float32, c.MaxStateDim)
	noise := make([]float32, c.Horizon*c.MaxActionDim)
	for i := range noise {
		noise[i] = float32(math.Cos(float64(i)))
	}
	rec := &Recorder{}
	a := make([]float32, len(noise))
	require.NoError(t, dp.Run(a, vl, S, img, nil, state, noise, rec))
	shape, data, ok := rec.Stacked(TapDiTOut)
	require.True(t, ok)
	require.Equal(t, []int{3, c.Horizon + 1, c.OutputDim}, shape)
	require.Len(t, data, 3*(c.Horizon+1)*c.OutputDim)
	require.NoError(t, dp.Use(0))
	b := make([]float32, len(noise))
	require.NoError(t, dp.Run(b, vl, S, img, nil, state, noise, nil))
	require.NotEqual(t, a, b, "embodiment slots must differ")
	for _, v := range append(a, b...) {
		require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
	}
}

// BenchmarkDiTStepReal times one DiT pass (41 rows) over real-size blocks
// (width 1536, 32 heads × 48, FF 6144, cross K/V from 2048) with random
// weights. Only 2 blocks are built (one image-cross block, one self block:
// ~0.5 GB of fp32 weights instead of ~4.4 GB); "ms/step32" extrapolates
// ×16 to the 32-block DiT (cross-text blocks, with 21 keys, are slightly
// cheaper than the image block measured). "ms/crossKV" is the once-per-
// request K/V projection of one image block (448 keys); ×8 image + 8 text
// blocks (21 keys) per request.
func BenchmarkDiTStepReal(b *testing.B) {
	if testing.Short() {
		b.Skip("real-size weights: skipped with -short")
	}
	c := DefaultConfig()
	c.Layers, c.VLLayers, c.Embodiments = 2, 1, 1
	// Block 0 must be an image block to measure 448 keys: attend to text
	// never in the first pair.
	c.AttendTextEvery = 2
	m, err := Load(c, randomWeights{c.TensorShapes(), 3}, tensor.Default(), 0)
	require.NoError(b, err)
	m.dit[0].kind = ImageBlock
	dp, err := m.NewDenoisePlan(512)
	require.NoError(b, err)
	S := 469
	vl := make([]float32, S*c.BackboneDim)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range vl {
		vl[i] = float32(rng.NormFloat64())
	}
	img := make([]bool, S)
	for i := 10; i < 10+448; i++ {
		img[i] = true
	}
	for i := range dp.z {
		dp.z[i] = float32(rng.NormFloat64())
	}
	z0 := append([]float32(nil), dp.z...)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		copy(dp.z, z0)
		b.StartTimer()
		dp.dit(0)
	}
	b.StopTimer()
	t0 := time.Now()
	if err := dp.crossKV(vl, S, img, nil); err != nil {
		b.Fatal(err)
	}
	kv := time.Since(t0)
	perPass := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perPass*16/1e6, "ms/step32")
	b.ReportMetric(float64(kv.Nanoseconds())/1e6, "ms/crossKV")
}

// BenchmarkAdapterLayerReal times one real-size vl_self_attention block
// (2048 wide, 32 heads × 64, FF 8192) plus vlln over S = 469 tokens with
// random weights; "ms/adapter4" extrapolates ×4 blocks (the vlln share is
// negligible).
func BenchmarkAdapterLayerReal(b *testing.B) {
	if testing.Short() {
		b.Skip("real-size weights: skipped with -short")
	}
	c := DefaultConfig()
	c.Layers, c.VLLayers, c.Embodiments = 2, 1, 1
	m, err := Load(c, randomWeights{c.TensorShapes(), 4}, tensor.Default(), 0)
	require.NoError(b, err)
	ap, err := m.NewAdapterPlan(512)
	require.NoError(b, err)
	S := 469
	feat := make([]float32, S*c.BackboneDim)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range feat {
		feat[i] = float32(rng.NormFloat64())
	}
	vl := make([]float32, len(feat))
	b.ReportAllocs()
	for b.Loop() {
		if err := ap.Run(vl, feat, S, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*4/1e6, "ms/adapter4")
}

// BenchmarkDenoiseReal runs complete real-size denoise Runs (32 DiT blocks,
// 4 Euler steps, cross K/V for S = 469 with 448 image tokens) on random
// weights: ~5 GB of fp32 weights and a minute of loading, so it only runs
// with GR00TGW_REAL_BENCH=1 (and never with -short).
func BenchmarkDenoiseReal(b *testing.B) {
	if testing.Short() || os.Getenv("GR00TGW_REAL_BENCH") == "" {
		b.Skip("set GR00TGW_REAL_BENCH=1 (needs ~6 GB of memory)")
	}
	c := DefaultConfig()
	c.VLLayers, c.Embodiments = 1, 1
	t0 := time.Now()
	m, err := Load(c, randomWeights{c.TensorShapes(), 9}, tensor.Default(), 0)
	require.NoError(b, err)
	b.Logf("load %v", time.Since(t0))
	dp, err := m.NewDenoisePlan(512)
	require.NoError(b, err)
	S := 469
	rng := rand.New(rand.NewPCG(5, 6))
	vl := randSlice(rng, S*c.BackboneDim, 1)
	img := make([]bool, S)
	for i := 10; i < 10+448; i++ {
		img[i] = true
	}
	state := randSlice(rng, c.MaxStateDim, 0.5)
	noise := randSlice(rng, c.Horizon*c.MaxActionDim, 1)
	pred := make([]float32, len(noise))
	b.ReportAllocs()
	for b.Loop() {
		if err := dp.Run(pred, vl, S, img, nil, state, noise, nil); err != nil {
			b.Fatal(err)
		}
	}
}
