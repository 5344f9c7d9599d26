package actionhead

import (
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// Tap names. Per-step taps are reported with step = 0..NumSteps-1, the
// others with step = -1. Shapes drop the batch dimension of the goldens.
const (
	TapVLLN           = "vlln_out"        // [S, BackboneDim] after vlln
	TapAdapter        = "adapter_out"     // [S, BackboneDim] after vl_self_attention
	TapStateFeatures  = "state_features"  // [1, Width]
	TapTemb           = "temb"            // per step [Width]
	TapEulerX         = "euler_x"         // per step [Horizon, MaxActionDim]: x at the start of the step
	TapActionFeatures = "action_features" // per step [Horizon, Width]: action encoder + position rows
	TapDiTOut         = "dit_out"         // per step [1+Horizon, OutputDim]: proj_out_2, row 0 = state token
	TapVelocity       = "velocity"        // per step [Horizon, MaxActionDim]
	TapActionPred     = "action_pred"     // [Horizon, MaxActionDim]: x after the last step
)

// Tapper receives intermediate tensors during Run (tests, `gr00tgw run
// --taps`). data is a view of a plan buffer valid only during the call: an
// implementation that keeps it must copy it. A nil Tapper costs nothing.
type Tapper interface {
	Tap(name string, step int, shape []int, data []float32)
}

// AdapterPlan runs vl = vl_self_attention(vlln(backbone_features)) for up
// to SMax tokens with preallocated buffers. It is not safe for concurrent
// use; make one plan per concurrent request.
type AdapterPlan struct {
	m    *Model
	sMax int

	n, q, k, v, a, t []float32 // [sMax, BackboneDim]
	ff               []float32 // [sMax, VLFF]
	att              tensor.Attention
	attArgs          tensor.AttentionArgs
}

// NewAdapterPlan preallocates an adapter plan for sequences of at most sMax
// tokens (about (6·BackboneDim + VLFF)·sMax floats).
func (m *Model) NewAdapterPlan(sMax int) (*AdapterPlan, error) {
	if sMax <= 0 {
		return nil, fmt.Errorf("%w: adapter plan sMax %d must be positive", ErrInput, sMax)
	}
	d := m.cfg.BackboneDim
	p := &AdapterPlan{m: m, sMax: sMax}
	for _, b := range []*[]float32{&p.n, &p.q, &p.k, &p.v, &p.a, &p.t} {
		*b = make([]float32, sMax*d)
	}
	p.ff = make([]float32, sMax*m.cfg.VLFF)
	return p, nil
}

// SMax is the largest sequence length the plan accepts.
func (p *AdapterPlan) SMax() int { return p.sMax }

// Run computes the adapter output for the first S rows of features
// ([S, BackboneDim], row-major) into dst ([S, BackboneDim]; may not alias
// features). Every token attends to every token (upstream uses no mask).
// It allocates nothing unless taps is non-nil.
func (p *AdapterPlan) Run(dst, features []float32, S int, taps Tapper) error {
	cfg := p.m.cfg
	d := cfg.BackboneDim
	switch {
	case S <= 0 || S > p.sMax:
		return fmt.Errorf("%w: adapter: sequence length %d outside [1, %d]", ErrInput, S, p.sMax)
	case len(features) < S*d:
		return fmt.Errorf("%w: adapter: features has %d values, want %d", ErrInput, len(features), S*d)
	case len(dst) < S*d:
		return fmt.Errorf("%w: adapter: dst has %d values, want %d", ErrInput, len(dst), S*d)
	}
	k := p.m.k
	x := dst[:S*d]
	n, q, kk, v, a, tmp := p.n[:S*d], p.q[:S*d], p.k[:S*d], p.v[:S*d], p.a[:S*d], p.t[:S*d]
	layerNorm(x, features[:S*d], S, d, p.m.vllnG, p.m.vllnB, 1e-5)
	if taps != nil {
		taps.Tap(TapVLLN, -1, []int{S, d}, x)
	}
	for i := range p.m.vl {
		b := &p.m.vl[i]
		layerNorm(n, x, S, d, b.ln1g, b.ln1b, 1e-5)
		k.MatMul(q, n, S, b.q.w, b.q.b)
		k.MatMul(kk, n, S, b.k.w, b.k.b)
		k.MatMul(v, n, S, b.v.w, b.v.b)
		mha(&p.att, &p.attArgs, a, q, kk, v, S, S, cfg.VLHeads, cfg.VLHeadDim)
		k.MatMul(tmp, a, S, b.o.w, b.o.b)
		addInPlace(x, tmp)
		layerNorm(n, x, S, d, b.ln3g, b.ln3b, 1e-5)
		ff := p.ff[:S*cfg.VLFF]
		tensor.MatMulAct(k, ff, n, S, b.ff1.w, b.ff1.b, tensor.ActGELUTanh)
		k.MatMul(tmp, ff, S, b.ff2.w, b.ff2.b)
		addInPlace(x, tmp)
	}
	if taps != nil {
		taps.Tap(TapAdapter, -1, []int{S, d}, x)
	}
	return nil
}
