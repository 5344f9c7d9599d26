package benchmodel

import (
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/model/actionhead"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

func TestSynthIsBF16AndDeterministic(t *testing.T) {
	a := synth("x.weight", 4096, 1024)
	b := synth("x.weight", 4096, 1024)
	require.Equal(t, a, b)
	require.NotEqual(t, a, synth("y.weight", 4096, 1024))
	var sum2 float64
	for _, v := range a {
		require.Zero(t, math.Float32bits(v)&0xffff, "%v is not bf16", v)
		sum2 += float64(v) * float64(v)
	}
	assert.InDelta(t, 1.0/1024, sum2/4096, 0.1/1024, "variance 1/fan_in")
	for _, v := range synth("blocks.0.norm1.weight", 1024, 0) {
		require.InDelta(t, 1, v, 0.18)
	}
	assert.Equal(t, float32(1), roundBF16(1.00000012))
	assert.Equal(t, math.Float32frombits(0x3f810000), roundBF16(math.Float32frombits(0x3f808001)))
	assert.Equal(t, math.Float32frombits(0x3f800000), roundBF16(math.Float32frombits(0x3f808000)), "ties to even")
}

// TestBackboneBF16Lossless: the real-size ViT block and LLM layer give
// bit-identical results with bf16 weight storage (the synthetic weights are
// bf16 values), and finite ones.
func TestBackboneBF16Lossless(t *testing.T) {
	if testing.Short() {
		t.Skip("real-size block and layer (~300 MB, seconds): skipped with -short")
	}
	run := func(k tensor.Kernels) (vit, llm []float32) {
		b, err := NewBackbone(k, 0)
		require.NoError(t, err)
		defer b.Close()
		b.ResetViT()
		require.NoError(t, b.ViTBlock())
		require.NoError(t, b.LLMLayer())
		return append([]float32(nil), b.ViTOutput()...), append([]float32(nil), b.LLMOutput()...)
	}
	v1, l1 := run(tensor.Default())
	v2, l2 := run(tensor.DefaultBF16Weights())
	require.Equal(t, v1, v2)
	require.Equal(t, l1, l2)
	require.Len(t, l1, LLMSeq*2048)
	for _, v := range append(v1[:4096:4096], l1[:4096]...) {
		require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
	}
}

// TestDiTSmall runs the DiT harness on a small configuration: the
// synthetic checkpoint loads, a Run succeeds and every phase is timed.
func TestDiTSmall(t *testing.T) {
	c := actionhead.Config{
		BackboneDim: 32, Width: 48, Heads: 4, HeadDim: 12, Layers: 4, OutputDim: 24, HiddenSize: 24,
		VLLayers: 1, VLHeads: 4, VLHeadDim: 8, VLFF: 128, FF: 192,
		MaxStateDim: 11, MaxActionDim: 7, Horizon: 40, NumSteps: 4, TimestepBuckets: 1000,
		AttendTextEvery: 2, Embodiments: 1, MaxSeqLen: 64, TimestepInDim: 256,
	}
	d, err := newDiT(c, tensor.DefaultBF16Weights())
	require.NoError(t, err)
	tm, err := d.Run()
	require.NoError(t, err)
	require.Len(t, tm.Steps, 4)
	for _, s := range tm.Steps {
		assert.Positive(t, s.Wall)
	}
	assert.Positive(t, tm.CrossKV.Wall)
	assert.GreaterOrEqual(t, tm.Denoise.Wall, tm.CrossKV.Wall+tm.Steps[0].Wall)
	for _, v := range d.Output() {
		require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
	}
	assert.Positive(t, d.StepFLOPs())
}

// BenchmarkViTBlock times one real-size ViT block (1792 rows) with bf16
// weight storage. Skipped with -short.
func BenchmarkViTBlock(b *testing.B) {
	if testing.Short() {
		b.Skip("real-size block: skipped with -short")
	}
	vb, err := NewBackbone(tensor.DefaultBF16Weights(), 0)
	require.NoError(b, err)
	defer vb.Close()
	vb.ResetViT()
	require.NoError(b, vb.ViTBlock())
	b.ReportAllocs()
	c0 := benchcpu.Now()
	for b.Loop() {
		b.StopTimer()
		vb.ResetViT()
		b.StartTimer()
		if err := vb.ViTBlock(); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(vb.ViTFLOPs()/1e9/(b.Elapsed().Seconds()/n), "GFLOP/s")
	b.ReportMetric(float64((benchcpu.Now()-c0).Milliseconds())/n, "cpu-ms/op")
}

// BenchmarkLLMLayer times one real-size Qwen3 decoder layer over S = 469
// with bf16 weight storage. Skipped with -short.
func BenchmarkLLMLayer(b *testing.B) {
	if testing.Short() {
		b.Skip("real-size layer: skipped with -short")
	}
	vb, err := NewBackbone(tensor.DefaultBF16Weights(), 0)
	require.NoError(b, err)
	defer vb.Close()
	require.NoError(b, vb.LLMLayer())
	b.ReportAllocs()
	c0 := benchcpu.Now()
	for b.Loop() {
		if err := vb.LLMLayer(); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(vb.LLMFLOPs()/1e9/(b.Elapsed().Seconds()/n), "GFLOP/s")
	b.ReportMetric(float64((benchcpu.Now()-c0).Milliseconds())/n, "cpu-ms/op")
}

// BenchmarkDiTStep runs complete real-size denoise Runs (32 blocks, bf16
// weight storage, ~2.3 GB, tens of seconds to build) and reports the best
// step, the cross K/V prologue and the Run. Opt-in: GR00TGW_REAL_BENCH=1.
func BenchmarkDiTStep(b *testing.B) {
	if testing.Short() || os.Getenv("GR00TGW_REAL_BENCH") == "" {
		b.Skip("set GR00TGW_REAL_BENCH=1 (real-size DiT, ~2.3 GB)")
	}
	d, err := NewDiT(tensor.DefaultBF16Weights())
	require.NoError(b, err)
	_, err = d.Run()
	require.NoError(b, err)
	best := math.Inf(1)
	var kv, den float64
	for b.Loop() {
		t, err := d.Run()
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range t.Steps {
			best = min(best, float64(s.Wall.Microseconds())/1e3)
		}
		kv += float64(t.CrossKV.Wall.Microseconds()) / 1e3
		den += float64(t.Denoise.Wall.Microseconds()) / 1e3
	}
	n := float64(b.N)
	b.ReportMetric(best, "ms/step-best")
	b.ReportMetric(kv/n, "ms/crossKV")
	b.ReportMetric(den/n, "ms/denoise")
}
