package backbone

import (
	"errors"
	"fmt"
	"math"

	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

const (
	tinyDir = "../../../testdata/n17-tiny"
	caseA   = tinyDir + "/caseA"
)

var (
	loadOnce sync.Once
	tinyM    *Model
	loadErr  error
)

func tinyModel(t testing.TB) *Model {
	loadOnce.Do(func() {
		ck, err := model.Open(tinyDir)
		if err != nil {
			loadErr = err
			return
		}
		defer ck.Close()
		tinyM, loadErr = Load(ck, tensor.Default())
	})
	require.NoError(t, loadErr)
	return tinyM
}

func readF32(t testing.TB, name string) ([]float32, []int) {
	a, err := npy.ReadFile(filepath.Join(caseA, name+".npy"))
	require.NoError(t, err)
	f, err := a.Float32s()
	require.NoError(t, err)
	return f, a.Shape
}

func readI32(t testing.TB, name string) ([]int32, []int) {
	a, err := npy.ReadFile(filepath.Join(caseA, name+".npy"))
	require.NoError(t, err)
	v, err := a.Int64s()
	require.NoError(t, err)
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out, a.Shape
}

// caseAInputs are the golden backbone inputs of case A.
type caseAInputs struct {
	pix        []float32
	rows, cols int
	grids      [][3]int
	ids, mask  []int32
	pos        []int32
}

func loadCaseA(t testing.TB) caseAInputs {
	var in caseAInputs
	var shape []int
	in.pix, shape = readF32(t, "pixel_values")
	in.rows, in.cols = shape[0], shape[1]
	g, _ := readI32(t, "image_grid_thw")
	for i := 0; i+3 <= len(g); i += 3 {
		in.grids = append(in.grids, [3]int{int(g[i]), int(g[i+1]), int(g[i+2])})
	}
	in.ids, _ = readI32(t, "input_ids")
	in.mask, _ = readI32(t, "attention_mask")
	in.pos, _ = readI32(t, "position_ids")
	return in
}

// Compare returns the Pearson correlation of got and want and max|got −
// want| relative to max|want|.
func Compare(got, want []float32) (pcc, rel float64) {
	var mg, mw float64
	for i := range want {
		mg += float64(got[i])
		mw += float64(want[i])
	}
	n := float64(len(want))
	mg, mw = mg/n, mw/n
	var sgw, sgg, sww, md, mx float64
	for i := range want {
		a, b := float64(got[i])-mg, float64(want[i])-mw
		sgw += a * b
		sgg += a * a
		sww += b * b
		md = max(md, math.Abs(float64(got[i])-float64(want[i])))
		mx = max(mx, math.Abs(float64(want[i])))
	}
	return sgw / math.Sqrt(sgg*sww), md / mx
}

func TestLinspaceMatchesTorch(t *testing.T) {
	// torch.linspace(0, 47, 28) in float32, as the goldens' generator
	// computed it: the port must be within 1e-6 relative of these
	// coordinates.
	want28 := []float64{0.0, 1.7407407760620117, 3.4814815521240234, 5.222222328186035, 6.962963104248047, 8.703703880310059, 10.44444465637207, 12.185185432434082, 13.925926208496094, 15.666666984558105, 17.407407760620117, 19.148147583007812, 20.88888931274414, 22.62963104248047, 24.370370864868164, 26.11111068725586, 27.851852416992188, 29.592592239379883, 31.333332061767578, 33.074073791503906, 34.814815521240234, 36.55555725097656, 38.296295166015625, 40.03703689575195, 41.77777862548828, 43.518516540527344, 45.25925827026367, 47.0}
	want16 := []float64{0.0, 3.133333444595337, 6.266666889190674, 9.40000057220459, 12.533333778381348, 15.666666984558105, 18.80000114440918, 21.933334350585938, 25.066665649414062, 28.19999885559082, 31.333332061767578, 34.46666717529297, 37.599998474121094, 40.733333587646484, 43.866668701171875, 47.0}
	for _, w := range [][]float64{want16, want28} {
		for i, v := range w {
			got := float64(linspace(i, len(w), 47))
			assert.InDelta(t, v, got, 4e-6, "n=%d i=%d", len(w), i)
		}
	}
}

// TestGoldenBackbone feeds case A's pixel_values / input_ids / position_ids
// and checks every backbone tap against the fp32 goldens: PCC ≥ 0.99999 and
// max|d| ≤ 1e-3 × max|golden|.
func TestGoldenBackbone(t *testing.T) {
	m := tinyModel(t)
	in := loadCaseA(t)
	r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: len(in.grids), MaxSeq: len(in.ids)}, 0)
	require.NoError(t, err)
	defer r.Close()

	type fig struct {
		name     string
		pcc, rel float64
	}
	var figs []fig
	seen := map[string]bool{}
	tap := func(name string, shape []int, data []float32) {
		seen[name] = true
		want, wshape := readF32(t, name)
		n := 1
		for _, d := range shape {
			n *= d
		}
		require.Equal(t, len(want), n, "%s shape %v vs golden %v", name, shape, wshape)
		pcc, rel := Compare(data[:n], want)
		figs = append(figs, fig{name, pcc, rel})
		assert.GreaterOrEqual(t, pcc, 0.99999, name)
		assert.LessOrEqual(t, rel, 1e-3, name)
	}
	vo, err := r.Vision(in.pix, in.rows, in.cols, in.grids, tap)
	require.NoError(t, err)
	out, err := r.LLM(in.ids, in.mask, in.pos, vo, tap)
	require.NoError(t, err)
	want, _ := readF32(t, "backbone_features")
	pcc, rel := Compare(out, want)
	figs = append(figs, fig{"backbone_features", pcc, rel})
	assert.GreaterOrEqual(t, pcc, 0.99999)
	assert.LessOrEqual(t, rel, 1e-3)
	// bf16 golden: only a loose PCC (different rounding points).
	wb, _ := readF32(t, "backbone_features_bf16")
	pb, _ := Compare(out, wb)
	figs = append(figs, fig{"backbone_features_bf16 (fp32 run vs bf16 golden)", pb, math.NaN()})
	assert.GreaterOrEqual(t, pb, 0.9999)

	names := []string{"vision_patch_embed", "vision_pos_embed", "vision_merger", "llm_inputs_embeds"}
	for i := 0; i < 4; i++ {
		names = append(names, fmt.Sprintf("vision_block_%d", i), fmt.Sprintf("llm_layer_%d", i))
	}
	for i := 0; i < 3; i++ {
		names = append(names, fmt.Sprintf("vision_deepstack_%d", i))
	}
	for _, n := range names {
		assert.True(t, seen[n], "tap %s not produced", n)
	}
	for _, f := range figs {
		t.Logf("%-52s PCC %.9f (1-PCC %.1e)  max|d|/max %.3g", f.name, f.pcc, 1-f.pcc, f.rel)
	}
}

// float32Only hides the BF16Source fast path of a checkpoint.
type float32Only struct{ ck *model.Checkpoint }

func (f float32Only) Float32(name string) ([]float32, error) { return f.ck.Float32(name) }

// TestBF16SourceMatchesFloat32: packing straight from the checkpoint's bf16
// bits (BF16Source, bf16 panels and the bf16 embedding table) gives the
// same bits as widening every tensor to fp32 first and storing fp32 panels.
func TestBF16SourceMatchesFloat32(t *testing.T) {
	ck, err := model.Open(tinyDir)
	require.NoError(t, err)
	defer ck.Close()
	var _ BF16Source = ck
	in := loadCaseA(t)
	run := func(m *Model) []float32 {
		r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: len(in.grids), MaxSeq: len(in.ids)}, 0)
		require.NoError(t, err)
		defer r.Close()
		vo, err := r.Vision(in.pix, in.rows, in.cols, in.grids, nil)
		require.NoError(t, err)
		out, err := r.LLM(in.ids, in.mask, in.pos, vo, nil)
		require.NoError(t, err)
		return slices.Clone(out)
	}
	fast, err := Load(ck, tensor.DefaultBF16Weights())
	require.NoError(t, err)
	require.NotNil(t, fast.embedH, "the embedding is kept as bf16 bits")
	plain, err := LoadFrom(ck.Config, float32Only{ck}, tensor.Default())
	require.NoError(t, err)
	require.Nil(t, plain.embedH)
	require.Equal(t, plain.Params(), fast.Params())
	require.Equal(t, run(plain), run(fast))
}

// TestGoldenBackbonePureGo repeats the golden comparison with the portable
// GEMM kernels and the backbone's own vector loops switched off (the
// attention keeps tensor.Default: core/tensor tests its scalar path).
func TestGoldenBackbonePureGo(t *testing.T) {
	ck, err := model.Open(tinyDir)
	require.NoError(t, err)
	m, err := Load(ck, tensor.Portable())
	ck.Close()
	require.NoError(t, err)
	in := loadCaseA(t)
	saved := useAVX2
	useAVX2 = false
	defer func() { useAVX2 = saved }()
	r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: 4, MaxSeq: 512}, 0)
	require.NoError(t, err)
	defer r.Close()
	vo, err := r.Vision(in.pix, in.rows, in.cols, in.grids, nil)
	require.NoError(t, err)
	out, err := r.LLM(in.ids, in.mask, in.pos, vo, nil)
	require.NoError(t, err)
	want, _ := readF32(t, "backbone_features")
	pcc, rel := Compare(out, want)
	t.Logf("pure Go: backbone_features PCC %.12f max|d|/max %.3g", pcc, rel)
	assert.GreaterOrEqual(t, pcc, 0.99999)
	assert.LessOrEqual(t, rel, 1e-3)
}

func TestRunnerDeterministicAndAllocFree(t *testing.T) {
	m := tinyModel(t)
	in := loadCaseA(t)
	r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: 4, MaxSeq: 512}, 0)
	require.NoError(t, err)
	defer r.Close()
	run := func() []float32 {
		vo, err := r.Vision(in.pix, in.rows, in.cols, in.grids, nil)
		require.NoError(t, err)
		out, err := r.LLM(in.ids, in.mask, in.pos, vo, nil)
		require.NoError(t, err)
		return out
	}
	a := slices.Clone(run())
	b := run()
	require.Equal(t, a, b, "repeated runs must be bit-identical")
	if testing.Short() || raceEnabled {
		t.Log("allocation check not run: counts are meaningless under -race, and -short skips it")
		return
	}
	allocs := testing.AllocsPerRun(2, func() { run() })
	assert.Zero(t, allocs, "warm backbone run allocates")
}

// TestPaddedSequence: trailing padding (mask 0) must not change the
// unpadded positions' outputs (causal + key mask).
func TestPaddedSequence(t *testing.T) {
	m := tinyModel(t)
	in := loadCaseA(t)
	r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: 4, MaxSeq: 512}, 0)
	require.NoError(t, err)
	defer r.Close()
	vo, err := r.Vision(in.pix, in.rows, in.cols, in.grids, nil)
	require.NoError(t, err)
	ref, err := r.LLM(in.ids, in.mask, in.pos, vo, nil)
	require.NoError(t, err)
	ref = slices.Clone(ref)
	s := len(in.ids)
	const pad = 5
	ids := append(slices.Clone(in.ids), make([]int32, pad)...)
	mask := append(slices.Clone(in.mask), make([]int32, pad)...)
	pos := make([]int32, 3*(s+pad))
	for c := 0; c < 3; c++ {
		copy(pos[c*(s+pad):], in.pos[c*s:(c+1)*s])
		for i := s; i < s+pad; i++ {
			pos[c*(s+pad)+i] = 1
		}
	}
	out, err := r.LLM(ids, mask, pos, vo, nil)
	require.NoError(t, err)
	assert.Equal(t, ref, out[:len(ref)])
}

func TestRunnerInputErrors(t *testing.T) {
	m := tinyModel(t)
	in := loadCaseA(t)
	r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: 4, MaxSeq: 469}, 1)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Vision(in.pix, in.rows, 1000, in.grids, nil)
	assert.ErrorIs(t, err, ErrInput)
	assert.ErrorContains(t, err, "pixel_values has 1000 columns, want 1536")
	_, err = r.Vision(in.pix, in.rows, in.cols, [][3]int{{1, 16, 27}}, nil)
	assert.ErrorContains(t, err, "grid [1 16 27]")
	_, err = r.Vision(in.pix, in.rows, in.cols, append(slices.Clone(in.grids), [3]int{1, 2, 2}), nil)
	assert.ErrorContains(t, err, "5 images, layout allows 1..4")
	vo, err := r.Vision(in.pix, in.rows, in.cols, in.grids, nil)
	require.NoError(t, err)
	_, err = r.LLM(make([]int32, 470), nil, make([]int32, 3*470), vo, nil)
	assert.ErrorContains(t, err, "sequence length 470 outside [1, 469]")
	ids := slices.Clone(in.ids)
	ids[0] = 151936
	_, err = r.LLM(ids, in.mask, in.pos, vo, nil)
	assert.ErrorContains(t, err, "input_ids[0] = 151936 outside the vocabulary")
	ids = slices.Clone(in.ids)
	ids[10] = 1
	_, err = r.LLM(ids, in.mask, in.pos, vo, nil)
	assert.ErrorContains(t, err, "447 image-pad tokens but 448 image embeddings")
	assert.True(t, errors.Is(err, ErrInput))
}

func BenchmarkBackboneTiny(b *testing.B) {
	m := tinyModel(b)
	in := loadCaseA(b)
	r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: 4, MaxSeq: 512}, 0)
	require.NoError(b, err)
	defer r.Close()
	b.ReportAllocs()
	c0 := benchcpu.Now().Seconds()
	for b.Loop() {
		vo, err := r.Vision(in.pix, in.rows, in.cols, in.grids, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.LLM(in.ids, in.mask, in.pos, vo, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((benchcpu.Now().Seconds()-c0)*1000/float64(b.N), "cpu-ms/op")
}

// TestVisionBlockMatchesVision: VisionBlock(i) on block i−1's output
// reproduces Vision's block i bit for bit, allocation-free once warm, and
// rejects inputs that do not fit.
func TestVisionBlockMatchesVision(t *testing.T) {
	m := tinyModel(t)
	in := loadCaseA(t)
	r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: 4, MaxSeq: 512}, 0)
	require.NoError(t, err)
	defer r.Close()
	blocks := map[string][]float32{}
	_, err = r.Vision(in.pix, in.rows, in.cols, in.grids, func(name string, _ []int, data []float32) {
		blocks[name] = slices.Clone(data)
	})
	require.NoError(t, err)
	x := slices.Clone(blocks["vision_block_0"])
	require.NoError(t, r.VisionBlock(1, x, in.rows, in.grids))
	require.Equal(t, blocks["vision_block_1"], x)
	if !testing.Short() && !raceEnabled {
		allocs := testing.AllocsPerRun(2, func() { _ = r.VisionBlock(1, x, in.rows, in.grids) })
		assert.Zero(t, allocs, "warm VisionBlock allocates")
	}
	assert.ErrorIs(t, r.VisionBlock(len(m.blocks), x, in.rows, in.grids), ErrInput)
	assert.ErrorContains(t, r.VisionBlock(0, x, in.rows-4, in.grids), "x has")
	assert.ErrorContains(t, r.VisionBlock(0, x[:10], in.rows, in.grids), "x has 10 values")
	assert.ErrorContains(t, r.VisionBlock(0, x, in.rows, [][3]int{{1, 3, 2}}), "grid [1 3 2]")
}

// TestVisionRopeCacheFollowsGrids: the rotary tables are cached per set of
// grids; switching grids between calls must give the same result as a
// fresh runner.
func TestVisionRopeCacheFollowsGrids(t *testing.T) {
	m := tinyModel(t)
	in := loadCaseA(t)
	g0 := in.grids[0]
	require.NotEqual(t, g0[1], g0[2])
	rows0 := g0[0] * g0[1] * g0[2]
	// The first image's patches under a transposed grid (same patch count,
	// different rotary angles).
	swapped := [][3]int{{g0[0], g0[2], g0[1]}}
	one := func(r *Runner) []float32 {
		vo, err := r.Vision(in.pix[:rows0*in.cols], rows0, in.cols, swapped, nil)
		require.NoError(t, err)
		return slices.Clone(vo.Embeds)
	}
	fresh, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: 4, MaxSeq: 512}, 0)
	require.NoError(t, err)
	defer fresh.Close()
	want := one(fresh)

	r, err := m.NewRunner(Layout{MaxPatches: in.rows, MaxImages: 4, MaxSeq: 512}, 0)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Vision(in.pix, in.rows, in.cols, in.grids, nil)
	require.NoError(t, err)
	require.Equal(t, want, one(r), "tables not rebuilt for new grids")
}

// BenchmarkAttentionRealVision: one real-size ViT attention (4 images × 448
// patches, 16 heads × 64) on tensor.Attention, one call per image as the
// runner makes them.
func BenchmarkAttentionRealVision(b *testing.B) {
	const n, heads, hd, seg = 1792, 16, 64, 448
	h := heads * hd
	qkv := make([]float32, n*3*h)
	for i := range qkv {
		qkv[i] = float32(math.Sin(float64(i))) * 0.3
	}
	out := make([]float32, n*h)
	var at tensor.Attention
	var args tensor.AttentionArgs
	run := func() {
		for s := 0; s < n; s += seg {
			args = tensor.AttentionArgs{Q: qkv[s*3*h:], K: qkv[s*3*h:], V: qkv[s*3*h:], Out: out[s*h:],
				QStride: 3 * h, KStride: 3 * h, VStride: 3 * h, OutStride: h, KOff: h, VOff: 2 * h,
				NQ: seg, NK: seg, Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.125}
			at.Run(&args)
		}
	}
	run()
	b.ReportAllocs()
	c0 := benchcpu.Now().Seconds()
	for b.Loop() {
		run()
	}
	cpu := (benchcpu.Now().Seconds() - c0) / float64(b.N)
	flop := float64(4 * heads * seg * seg * hd * 4)
	b.ReportMetric(flop/1e9/(b.Elapsed().Seconds()/float64(b.N)), "GFLOP/s")
	b.ReportMetric(flop/1e9/cpu, "GFLOP/cpu-s")
	b.ReportMetric(cpu*1000, "cpu-ms/op")
}

// TestCloneTable: the chunked, parallel copy of the token embedding equals
// the source across chunk boundaries and owns its memory.
func TestCloneTable(t *testing.T) {
	for _, n := range []int{0, 1, 1<<19 - 1, 1 << 19, 5<<18 + 3} {
		src := make([]uint16, n)
		for i := range src {
			src[i] = uint16(i*7 + i>>16)
		}
		got := cloneTable(src)
		require.Equal(t, src, got, "n=%d", n)
		if n > 0 {
			got[n-1]++
			require.NotEqual(t, src[n-1], got[n-1], "n=%d: the clone shares memory", n)
		}
	}
}
