package benchmodel

import (
	"fmt"
	"math/rand/v2"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/model/backbone"
	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// DROID request shape: 4 images of 16×28 patches (1,792 rows) and S = 469
// text positions (448 image tokens between 10 and 11 text tokens).
const (
	ViTImages  = 4
	ViTGridH   = 16
	ViTGridW   = 28
	ViTPatches = ViTImages * ViTGridH * ViTGridW
	LLMSeq     = 469
	llmImages  = ViTPatches / 4 // merged image tokens
)

// Backbone is the real-size Qwen3-VL backbone cut to one vision block and
// one decoder layer, built by backbone.LoadFrom with synthetic weights:
//
//   - ViTBlock: one vision block (hidden 1024, 16 heads × 64, MLP 4096,
//     LayerNorm, GELU-tanh, 2-D rotary, attention windowed per image) over
//     the DROID patch rows, through backbone.Runner.VisionBlock;
//   - LLMLayer: one Qwen3 decoder layer (hidden 2048, 16 query / 8 KV heads
//     × 128, QK-norm, interleaved mRoPE, causal GQA attention, SwiGLU 6144)
//     over S = 469 tokens, through backbone.Runner.LLM (which also copies
//     the 469 input embeddings and builds the rotary table: < 1 % of it).
//
// Not safe for concurrent use.
type Backbone struct {
	m     *backbone.Model
	r     *backbone.Runner
	grids [][3]int
	x0, x []float32
	ids   []int32
	pos   []int32
	vis   backbone.VisionOut
	out   []float32
}

// backboneConfig is the real configuration cut down to one vision block,
// no deepstack, one decoder layer and a small vocabulary.
func backboneConfig() model.Config {
	cfg := model.DefaultConfig()
	cfg.Backbone.Vision.Depth = 1
	cfg.Backbone.Vision.DeepstackVisualIndexes = nil
	cfg.Backbone.Text.VocabSize = 1024
	cfg.Backbone.ImageTokenID = 1000
	cfg.SelectLayer = 1
	return cfg
}

type planSource map[string]model.TensorSpec

func (p planSource) Float32(name string) ([]float32, error) {
	s, ok := p[name]
	if !ok {
		return nil, shapeError(name)
	}
	return synth(name, numel(s.Shape), fanIn(name, s.Shape)), nil
}

// NewBackbone builds the model with kernels k (tensor.Default or
// tensor.DefaultBF16Weights) and a runner of threads workers (0:
// GOMAXPROCS), with deterministic unit-variance inputs.
func NewBackbone(k tensor.Kernels, threads int) (*Backbone, error) {
	cfg := backboneConfig()
	src := planSource{}
	for _, s := range model.Plan(cfg) {
		src[s.Name] = s
	}
	m, err := backbone.LoadFrom(cfg, src, k)
	if err != nil {
		return nil, fmt.Errorf("benchmodel: backbone: %w", err)
	}
	r, err := m.NewRunner(backbone.Layout{MaxPatches: ViTPatches, MaxImages: ViTImages, MaxSeq: 512}, threads)
	if err != nil {
		return nil, fmt.Errorf("benchmodel: backbone: %w", err)
	}
	b := &Backbone{m: m, r: r}
	for range ViTImages {
		b.grids = append(b.grids, [3]int{1, ViTGridH, ViTGridW})
	}
	rng := rand.New(rand.NewPCG(11, 12))
	randn := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	b.x0 = randn(ViTPatches * cfg.Backbone.Vision.HiddenSize)
	b.x = make([]float32, len(b.x0))
	th := cfg.Backbone.Text.HiddenSize
	b.vis = backbone.VisionOut{Embeds: randn(llmImages * th), Merged: llmImages}
	b.ids = make([]int32, LLMSeq)
	b.pos = make([]int32, 3*LLMSeq)
	for i := range b.ids {
		b.ids[i] = int32(1 + i%999)
		if i >= 10 && i < 10+llmImages {
			b.ids[i] = int32(cfg.Backbone.ImageTokenID)
		}
		for c := range 3 {
			b.pos[c*LLMSeq+i] = int32(i)
		}
	}
	return b, nil
}

// ResetViT restores the vision block's input (ViTBlock works in place).
func (b *Backbone) ResetViT() { copy(b.x, b.x0) }

// ViTBlock computes the vision block once, in place on the current input.
func (b *Backbone) ViTBlock() error { return b.r.VisionBlock(0, b.x, ViTPatches, b.grids) }

// ViTOutput is the vision block's hidden state [1792, 1024] after the last
// ViTBlock.
func (b *Backbone) ViTOutput() []float32 { return b.x }

// ViTFLOPs is the vision block's multiply-add count ×2: the four GEMMs and
// the two attention products.
func (b *Backbone) ViTFLOPs() float64 {
	const n, h, f, seg = ViTPatches, 1024, 4096, ViTGridH * ViTGridW
	return 2.0*n*(h*3*h+h*h+2*h*f) + 2.0*2*ViTImages*seg*seg*h
}

// LLMLayer runs the decoder layer once over the S = 469 tokens.
func (b *Backbone) LLMLayer() error {
	out, err := b.r.LLM(b.ids, nil, b.pos, b.vis, nil)
	b.out = out
	return err
}

// LLMOutput is the layer's output [469, 2048] after the last LLMLayer.
func (b *Backbone) LLMOutput() []float32 { return b.out }

// LLMFLOPs is the decoder layer's multiply-add count ×2: the seven GEMMs
// and the causal attention (half the score matrix).
func (b *Backbone) LLMFLOPs() float64 {
	const s, h, q, kv, f = LLMSeq, 2048, 2048, 1024, 6144
	return 2.0*s*(h*q+2*h*kv+q*h+3*h*f) + 2.0*2*s*(s+1)/2*q
}

// Close stops the runner's workers.
func (b *Backbone) Close() { b.r.Close() }
