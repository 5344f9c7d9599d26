package actionhead

import (
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// DenoisePlan runs the state encoder, the DiT and the flow-matching Euler
// sampler for one embodiment with buffers preallocated for VL sequences of
// at most SMax tokens. Cross-attention keys and values are computed once per
// Run (they depend only on vl); the per-step timestep quantities come from
// the Model. It is not safe for concurrent use; make one plan per concurrent
// request. Plans share the Model's weights.
type DenoisePlan struct {
	m    *Model
	emb  *projectors
	sMax int

	crossK, crossV [][]float32 // per DiT block (nil for self blocks): [sMax, Width]
	nKeys          []int       // per DiT block: rows of crossK/V valid in this Run
	gather         []float32   // [sMax, BackboneDim]

	z, n, q, k, v, a, t []float32 // [Tokens, Width]
	ff                  []float32 // [Tokens, FF]
	out                 []float32 // [Tokens, OutputDim]
	enc1, enc2          []float32 // [Horizon, Width]
	dec                 []float32 // [Horizon, HiddenSize]
	vel, x              []float32 // [Horizon, MaxActionDim]
	sHid                []float32 // [HiddenSize]
	sFeat               []float32 // [Width]: the state token, constant over the steps
	rtcS                []float32 // [Horizon]: RTC's per-row update strengths

	att       tensor.Attention
	attArgs   tensor.AttentionArgs
	alt       DiT          // nil: the model's fp32 blocks (see UseDiT)
	interrupt func() error // see SetInterrupt
	maxSteps  int          // see LimitSteps; 0: every step
}

// LimitSteps makes the following Runs stop after the first n Euler steps
// (n ≤ 0 or n ≥ NumSteps: every step, the default). Such a Run's output is
// not the model's prediction: it is for warm-ups, where one step already
// runs every kernel and reads every DiT weight once, and each further step
// repeats the same work (at real size ~0.4 s a step on 2 cores). Not safe
// for concurrent use.
func (p *DenoisePlan) LimitSteps(n int) { p.maxSteps = max(n, 0) }

// SetInterrupt installs f (nil: none), polled before every step and every
// DiT block: a non-nil error stops Run with it, so that a cancelled request
// gives the device back within one block. Not safe for concurrent use.
func (p *DenoisePlan) SetInterrupt(f func() error) { p.interrupt = f }

func (p *DenoisePlan) interrupted() error {
	if p.interrupt == nil {
		return nil
	}
	return p.interrupt()
}

// NewDenoisePlan preallocates a denoise plan for VL sequences of at most
// sMax tokens, using the first embodiment slot the model was loaded with
// (see Use). The cross-attention K/V cache takes 2·Layers/2·sMax·Width
// floats (100 MB at real size with sMax 512).
func (m *Model) NewDenoisePlan(sMax int) (*DenoisePlan, error) {
	if sMax <= 0 {
		return nil, fmt.Errorf("%w: denoise plan sMax %d must be positive", ErrInput, sMax)
	}
	c := m.cfg
	T, W, H := c.Tokens(), c.Width, c.Horizon
	p := &DenoisePlan{m: m, emb: m.emb[0], sMax: sMax}
	p.crossK = make([][]float32, c.Layers)
	p.crossV = make([][]float32, c.Layers)
	p.nKeys = make([]int, c.Layers)
	for i, b := range m.dit {
		if b.kind != SelfBlock {
			p.crossK[i] = make([]float32, sMax*W)
			p.crossV[i] = make([]float32, sMax*W)
		}
	}
	p.gather = make([]float32, sMax*c.BackboneDim)
	for _, b := range []*[]float32{&p.z, &p.n, &p.q, &p.k, &p.v, &p.a, &p.t} {
		*b = make([]float32, T*W)
	}
	p.ff = make([]float32, T*c.FF)
	p.out = make([]float32, T*c.OutputDim)
	p.enc1 = make([]float32, H*W)
	p.enc2 = make([]float32, H*W)
	p.dec = make([]float32, H*c.HiddenSize)
	p.vel = make([]float32, H*c.MaxActionDim)
	p.x = make([]float32, H*c.MaxActionDim)
	p.rtcS = make([]float32, H)
	p.sHid = make([]float32, c.HiddenSize)
	p.sFeat = make([]float32, W)
	return p, nil
}

// SMax is the largest VL sequence length the plan accepts.
func (p *DenoisePlan) SMax() int { return p.sMax }

// Embodiment is the projector slot the plan currently uses.
func (p *DenoisePlan) Embodiment() int { return p.emb.id }

// Use selects the embodiment slot for the following Runs; the slot must have
// been loaded by Load.
func (p *DenoisePlan) Use(embodiment int) error {
	e := p.m.projectors(embodiment)
	if e == nil {
		return fmt.Errorf("%w: embodiment %d not loaded (have %v)", ErrInput, embodiment, p.m.Embodiments())
	}
	p.emb = e
	return nil
}

// Run samples one action chunk.
//
//   - actionPred [Horizon, MaxActionDim]: receives x after the last Euler
//     step (normalised actions).
//   - vl [S, BackboneDim]: the adapter output.
//   - imageMask [S]: true at image tokens (input_ids == image token id).
//   - attnMask [S] or nil: false at padding tokens (nil: all valid).
//   - state [MaxStateDim]: the normalised, zero-padded state.
//   - noise [Horizon, MaxActionDim]: the initial x.
//   - taps: nil, or receives every intermediate (see the Tap constants).
//
// Text cross blocks attend to the valid non-image tokens, image blocks to
// the valid image tokens; a key set that some block needs but that is empty
// is an error (upstream would produce NaN). Run allocates nothing unless
// taps is non-nil (or the DiT installed by UseDiT allocates), and repeated
// Runs on the same inputs are bit-identical.
func (p *DenoisePlan) Run(actionPred, vl []float32, S int, imageMask, attnMask []bool, state, noise []float32, taps Tapper) error {
	return p.RunRTC(actionPred, vl, S, imageMask, attnMask, state, noise, nil, taps)
}

// RunRTC is Run with real-time chunking when rtc is non-nil (see RTC;
// validated here, errors wrap ErrInput): rows 0..Overlap−1 of the initial
// x are the previous chunk's rows Horizon−Overlap..Horizon−1, and every
// Euler step moves row i by (dt·v)·s_i instead of dt·v. Overlap = Frozen =
// 0 is Run, bit for bit.
func (p *DenoisePlan) RunRTC(actionPred, vl []float32, S int, imageMask, attnMask []bool, state, noise []float32, rtc *RTC, taps Tapper) error {
	c := p.m.cfg
	T, W, H, A, Bd := c.Tokens(), c.Width, c.Horizon, c.MaxActionDim, c.BackboneDim
	switch {
	case S <= 0 || S > p.sMax:
		return fmt.Errorf("%w: denoise: sequence length %d outside [1, %d]", ErrInput, S, p.sMax)
	case len(vl) < S*Bd:
		return fmt.Errorf("%w: denoise: vl has %d values, want %d", ErrInput, len(vl), S*Bd)
	case len(imageMask) < S:
		return fmt.Errorf("%w: denoise: image mask has %d entries, want %d", ErrInput, len(imageMask), S)
	case attnMask != nil && len(attnMask) < S:
		return fmt.Errorf("%w: denoise: attention mask has %d entries, want %d", ErrInput, len(attnMask), S)
	case len(state) < c.MaxStateDim:
		return fmt.Errorf("%w: denoise: state has %d values, want %d", ErrInput, len(state), c.MaxStateDim)
	case len(noise) < H*A:
		return fmt.Errorf("%w: denoise: noise has %d values, want %d", ErrInput, len(noise), H*A)
	case len(actionPred) < H*A:
		return fmt.Errorf("%w: denoise: actionPred has %d values, want %d", ErrInput, len(actionPred), H*A)
	}
	if rtc != nil {
		if err := rtc.Validate(H, A); err != nil {
			return fmt.Errorf("denoise: %w", err)
		}
		if rtc.Overlap == 0 && rtc.Frozen == 0 {
			rtc = nil // s ≡ 1: the plain sampler
		}
	}
	if p.alt == nil && !p.m.HasDiT() {
		return fmt.Errorf("%w: denoise: the model was loaded without its DiT and the plan has none (UseDiT)", ErrConfig)
	}
	if p.alt != nil {
		am := attnMask
		if am != nil {
			am = am[:S]
		}
		// The alternative DiT validates the key sets itself; its errors
		// are about the request (e.g. an empty key set).
		if err := p.alt.PrepareCross(vl[:S*Bd], S, imageMask[:S], am); err != nil {
			return fmt.Errorf("%w: denoise: DiT: %w", ErrInput, err)
		}
	} else if err := p.crossKV(vl, S, imageMask, attnMask); err != nil {
		return err
	}
	k, e := p.m.k, p.emb

	// State token (row 0 of z), constant over the steps; z is rewritten at
	// the start of every step.
	k.MatMul(p.sHid, state[:c.MaxStateDim], 1, e.st1.w, e.st1.b)
	reluInPlace(p.sHid)
	k.MatMul(p.sFeat, p.sHid, 1, e.st2.w, e.st2.b)
	if taps != nil {
		taps.Tap(TapStateFeatures, -1, []int{1, W}, p.sFeat)
	}
	copy(p.x, noise[:H*A])
	if rtc != nil {
		copy(p.x[:rtc.Overlap*A], rtc.Prev[(rtc.Horizon-rtc.Overlap)*A:rtc.Horizon*A])
		rtc.Strengths(p.rtcS)
	}
	dt := float32(1) / float32(c.NumSteps)
	steps := c.NumSteps
	if p.maxSteps > 0 {
		steps = min(steps, p.maxSteps)
	}

	for s := 0; s < steps; s++ {
		if err := p.interrupted(); err != nil {
			return err
		}
		if taps != nil {
			taps.Tap(TapTemb, s, []int{W}, p.m.temb[s])
			taps.Tap(TapEulerX, s, []int{H, A}, p.x)
		}
		z := p.z[:T*W]
		copy(z[:W], p.sFeat)
		// Action encoder: W3(swish(W2·[W1·x ; sinusoid(τ)])) + pos.
		k.MatMul(p.enc1, p.x, H, e.a1.w, e.a1.b)
		tensor.MatMulAct(k, p.enc2, p.enc1, H, e.a2.w, e.a2Bias[s], tensor.ActSiLU)
		act := z[W:]
		k.MatMul(act, p.enc2, H, e.a3.w, e.a3.b)
		addInPlace(act, p.m.pos)
		if taps != nil {
			taps.Tap(TapActionFeatures, s, []int{H, W}, act)
		}
		if p.alt != nil {
			if err := p.alt.Forward(p.out[:T*c.OutputDim], z, p.m.temb[s]); err != nil {
				return fmt.Errorf("denoise: DiT step %d: %w", s, err)
			}
		} else if err := p.dit(s); err != nil {
			return err
		}
		if taps != nil {
			taps.Tap(TapDiTOut, s, []int{T, c.OutputDim}, p.out)
		}
		// Action decoder on the action rows only.
		k.MatMul(p.dec, p.out[c.OutputDim:], H, e.d1.w, e.d1.b)
		reluInPlace(p.dec)
		k.MatMul(p.vel, p.dec, H, e.d2.w, e.d2.b)
		if taps != nil {
			taps.Tap(TapVelocity, s, []int{H, A}, p.vel)
		}
		if rtc == nil {
			for i, v := range p.vel {
				p.x[i] += dt * v
			}
			continue
		}
		for i, v := range p.vel {
			// (dt·v)·s rounded, then added: upstream's order, no fused
			// multiply-add (frozen rows get exactly +0).
			p.x[i] += float32(float32(dt*v) * p.rtcS[i/A])
		}
	}
	copy(actionPred, p.x)
	if taps != nil {
		taps.Tap(TapActionPred, -1, []int{H, A}, p.x)
	}
	return nil
}

// crossKV gathers the text and image key rows of vl and computes every
// cross block's K and V once for the Run.
func (p *DenoisePlan) crossKV(vl []float32, S int, imageMask, attnMask []bool) error {
	c := p.m.cfg
	Bd := c.BackboneDim
	for _, kind := range []BlockKind{TextBlock, ImageBlock} {
		n := 0
		for j := 0; j < S; j++ {
			if attnMask != nil && !attnMask[j] {
				continue
			}
			if imageMask[j] == (kind == ImageBlock) {
				copy(p.gather[n*Bd:(n+1)*Bd], vl[j*Bd:(j+1)*Bd])
				n++
			}
		}
		for i := range p.m.dit {
			b := &p.m.dit[i]
			if b.kind != kind {
				continue
			}
			if n == 0 {
				name := "text (non-image)"
				if kind == ImageBlock {
					name = "image"
				}
				return fmt.Errorf("%w: denoise: DiT block %d attends to %s tokens but the request has none", ErrInput, i, name)
			}
			p.nKeys[i] = n
			p.m.k.MatMul(p.crossK[i][:n*c.Width], p.gather[:n*Bd], n, b.k.w, b.k.b)
			p.m.k.MatMul(p.crossV[i][:n*c.Width], p.gather[:n*Bd], n, b.v.w, b.v.b)
		}
	}
	return nil
}

// dit runs the DiT on p.z for Euler step s and leaves proj_out_2's output
// in p.out.
func (p *DenoisePlan) dit(s int) error {
	c := p.m.cfg
	T, W := c.Tokens(), c.Width
	k := p.m.k
	z, n, q, a, t := p.z[:T*W], p.n[:T*W], p.q[:T*W], p.a[:T*W], p.t[:T*W]
	for i := range p.m.dit {
		if err := p.interrupted(); err != nil {
			return err
		}
		b := &p.m.dit[i]
		ada := b.ada[s]
		layerNorm(n, z, T, W, nil, nil, 1e-5)
		modulate(n, T, W, ada[:W], ada[W:])
		k.MatMul(q, n, T, b.q.w, b.q.b)
		if b.kind == SelfBlock {
			k.MatMul(p.k, n, T, b.k.w, b.k.b)
			k.MatMul(p.v, n, T, b.v.w, b.v.b)
			mha(&p.att, &p.attArgs, a, q, p.k, p.v, T, T, c.Heads, c.HeadDim)
		} else {
			nk := p.nKeys[i]
			mha(&p.att, &p.attArgs, a, q, p.crossK[i][:nk*W], p.crossV[i][:nk*W], T, nk, c.Heads, c.HeadDim)
		}
		k.MatMul(t, a, T, b.o.w, b.o.b)
		addInPlace(z, t)
		layerNorm(n, z, T, W, nil, nil, 1e-5)
		tensor.MatMulAct(k, p.ff, n, T, b.ff1.w, b.ff1.b, tensor.ActGELUTanh)
		k.MatMul(t, p.ff, T, b.ff2.w, b.ff2.b)
		addInPlace(z, t)
	}
	mod := p.m.outMod[s]
	layerNorm(n, z, T, W, nil, nil, 1e-6)
	modulate(n, T, W, mod[W:], mod[:W]) // proj_out_1 halves: shift, then scale
	k.MatMul(p.out, n, T, p.m.out2.w, p.m.out2.b)
	return nil
}
