package backbone

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// randomSource draws every planned tensor from N(0, 1/fan-in) (norm
// weights ≈ 1), deterministic per name order.
type randomSource struct {
	spec map[string]model.TensorSpec
	rng  *rand.Rand
}

func (r *randomSource) Float32(name string) ([]float32, error) {
	s := r.spec[name]
	n := int(s.NumElements())
	out := make([]float32, n)
	fan := float32(1)
	if len(s.Shape) >= 2 {
		fan = float32(s.Shape[len(s.Shape)-1])
	}
	scale := 1 / fan
	if len(s.Shape) == 1 {
		for i := range out {
			out[i] = 1 + 0.1*float32(r.rng.NormFloat64())
		}
		return out, nil
	}
	for i := range out {
		out[i] = float32(r.rng.NormFloat64()) * scale * 8
	}
	return out, nil
}

// BenchmarkRealWidth runs the backbone at the real N1.7 widths (ViT 1024,
// LLM 2048, DROID shapes: 4 images of 16×28 patches, S = 469) with 2 ViT
// blocks and 2 decoder layers, and reports per-block/per-layer wall and CPU
// milliseconds so the full 24-block / 16-layer time can be extrapolated.
// Opt-in (it needs ~1.5 GB): GR00T_REAL_BENCH=1.
func BenchmarkRealWidth(b *testing.B) {
	if os.Getenv("GR00T_REAL_BENCH") == "" {
		b.Skip("set GR00T_REAL_BENCH=1")
	}
	cfg := model.DefaultConfig()
	cfg.Backbone.Vision.Depth = 2
	cfg.Backbone.Vision.DeepstackVisualIndexes = []int{0, 1}
	cfg.Backbone.Text.VocabSize = 152000 / 8
	cfg.Backbone.ImageTokenID = 15000
	cfg.SelectLayer = 2
	spec := map[string]model.TensorSpec{}
	for _, s := range model.Plan(cfg) {
		spec[s.Name] = s
	}
	m, err := LoadFrom(cfg, &randomSource{spec: spec, rng: rand.New(rand.NewPCG(1, 2))}, tensor.Default())
	if err != nil {
		b.Fatal(err)
	}
	const imgs, gh, gw = 4, 16, 28
	rows := imgs * gh * gw
	pix := make([]float32, rows*1536)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range pix {
		pix[i] = float32(rng.Float64()*2 - 1)
	}
	grids := [][3]int{{1, gh, gw}, {1, gh, gw}, {1, gh, gw}, {1, gh, gw}}
	// S = 469: 448 image tokens + 21 text tokens, sequential positions.
	const S = 469
	ids := make([]int32, S)
	pos := make([]int32, 3*S)
	for i := range ids {
		ids[i] = int32(100 + i)
		if i >= 4 && i < 4+448 {
			ids[i] = 15000
		}
		for c := 0; c < 3; c++ {
			pos[c*S+i] = int32(i)
		}
	}
	r, err := m.NewRunner(Layout{MaxPatches: rows, MaxImages: 4, MaxSeq: 512}, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var vis, llm, visCPU, llmCPU float64
	b.ReportAllocs()
	for b.Loop() {
		c0 := benchcpu.Now().Seconds()
		t0 := nowSeconds()
		vo, err := r.Vision(pix, rows, 1536, grids, nil)
		if err != nil {
			b.Fatal(err)
		}
		t1 := nowSeconds()
		c1 := benchcpu.Now().Seconds()
		if _, err := r.LLM(ids, nil, pos, vo, nil); err != nil {
			b.Fatal(err)
		}
		vis += t1 - t0
		llm += nowSeconds() - t1
		visCPU += c1 - c0
		llmCPU += benchcpu.Now().Seconds() - c1
	}
	n := float64(b.N)
	b.ReportMetric(vis/n*1000, "vision2blk-ms")
	b.ReportMetric(visCPU/n*1000, "vision2blk-cpu-ms")
	b.ReportMetric(llm/n*1000, "llm2layer-ms")
	b.ReportMetric(llmCPU/n*1000, "llm2layer-cpu-ms")
}
