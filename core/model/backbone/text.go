package backbone

import (
	"fmt"
	"math"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// LLM runs the text decoder over one sequence (batch 1): ids, mask and the
// mRoPE table pos ([3, S] row-major t, h, w) all of length S. The image-pad
// tokens (ids == image_token_id) take vis.Embeds rows in order, and
// deepstack feature k is added at those positions after layer k. It returns
// the last kept layer's output [S, hidden] before the final norm (a view
// into the Runner). mask may be nil (all ones); positions with mask 0 are
// never attended to.
func (r *Runner) LLM(ids, mask, pos []int32, vis VisionOut, tap TapFunc) ([]float32, error) {
	cfg := r.m.cfg
	t := cfg.Backbone.Text
	s := len(ids)
	if s == 0 || s > r.l.MaxSeq {
		return nil, fmt.Errorf("%w: sequence length %d outside [1, %d]", ErrInput, s, r.l.MaxSeq)
	}
	if mask != nil && len(mask) != s {
		return nil, fmt.Errorf("%w: attention_mask has %d entries, input_ids %d", ErrInput, len(mask), s)
	}
	if len(pos) != 3*s {
		return nil, fmt.Errorf("%w: position_ids has %d entries, want 3·%d", ErrInput, len(pos), s)
	}
	h := t.HiddenSize
	x := r.tx[:s*h]
	img := int32(cfg.Backbone.ImageTokenID)
	r.imgPos = r.imgPos[:0]
	for i, id := range ids {
		if id == img {
			r.imgPos = append(r.imgPos, int32(i))
			continue
		}
		if id < 0 || int(id) >= t.VocabSize {
			return nil, fmt.Errorf("%w: input_ids[%d] = %d outside the vocabulary [0, %d)", ErrInput, i, id, t.VocabSize)
		}
		r.m.embedRow(x[i*h:(i+1)*h], int(id))
	}
	if len(r.imgPos) != vis.Merged {
		return nil, fmt.Errorf("%w: %d image-pad tokens but %d image embeddings", ErrInput, len(r.imgPos), vis.Merged)
	}
	for k, p := range r.imgPos {
		copy(x[int(p)*h:int(p+1)*h], vis.Embeds[k*h:(k+1)*h])
	}
	if tap != nil {
		tap("llm_inputs_embeds", []int{s, h}, x)
	}
	var keyMask []int32
	for _, m := range mask {
		if m == 0 {
			keyMask = mask
			break
		}
	}
	r.textRope(pos, s)

	nh, nkv, hd := t.NumAttentionHeads, t.NumKeyValueHeads, t.HeadDim
	qd, kvd := nh*hd, nkv*hd
	eps := float32(t.RMSNormEps)
	for li := range r.m.layers {
		if err := r.interrupted(); err != nil {
			return nil, err
		}
		L := &r.m.layers[li]
		xn := r.tn[:s*h]
		r.rows.run(r.pool, opRMSNorm, x, xn, L.inNorm, nil, s, h, eps)
		q, k, v := r.tq[:s*qd], r.tk[:s*kvd], r.tv[:s*kvd]
		r.mm(q, xn, s, L.q)
		r.mm(k, xn, s, L.k)
		r.mm(v, xn, s, L.v)
		// QK-norm: RMSNorm over each head, in place, before RoPE.
		r.rows.run(r.pool, opRMSNorm, q, q, L.qNorm, nil, s*nh, hd, eps)
		r.rows.run(r.pool, opRMSNorm, k, k, L.kNorm, nil, s*nkv, hd, eps)
		r.rope.run(r.pool, q, s, qd, 0, nh, hd, r.tcos, r.tsin)
		r.rope.run(r.pool, k, s, kvd, 0, nkv, hd, r.tcos, r.tsin)
		r.attArgs = tensor.AttentionArgs{
			Q: q, K: k, V: v, Out: r.tattn,
			QStride: qd, KStride: kvd, VStride: kvd, OutStride: qd,
			NQ: s, NK: s, Heads: nh, KVHeads: nkv, HeadDim: hd,
			Scale: float32(1 / math.Sqrt(float64(hd))), Causal: true, KeyMask: keyMask,
		}
		r.att.Run(&r.attArgs)
		r.attArgs = tensor.AttentionArgs{}
		tmp := r.ttmp[:s*h]
		r.mm(tmp, r.tattn[:s*qd], s, L.o)
		r.rows.run(r.pool, opAdd, x, tmp, nil, nil, s, h, 0)
		r.rows.run(r.pool, opRMSNorm, x, xn, L.postNorm, nil, s, h, eps)
		g, u := r.tgate[:s*t.IntermediateSize], r.tup[:s*t.IntermediateSize]
		r.mm(g, xn, s, L.gate)
		r.mm(u, xn, s, L.up)
		r.rows.run(r.pool, opSiLUMul, g, u, nil, nil, s, t.IntermediateSize, 0)
		r.mm(tmp, g, s, L.down)
		r.rows.run(r.pool, opAdd, x, tmp, nil, nil, s, h, 0)
		if li < len(vis.Deepstack) {
			ds := vis.Deepstack[li]
			for k, p := range r.imgPos {
				row := x[int(p)*h : int(p+1)*h]
				src := ds[k*h : (k+1)*h]
				for c := range row {
					row[c] += src[c]
				}
			}
		}
		if tap != nil {
			tap(fmt.Sprintf("llm_layer_%d", li), []int{s, h}, x)
		}
	}
	return x, nil
}

// textRope fills the interleaved-mRoPE cos/sin tables for s positions.
// Frequency slot j uses the h component when j mod 3 = 1 and j < 3·sec[1],
// the w component when j mod 3 = 2 and j < 3·sec[2], else t; the angle is
// float32(pos·inv_freq[j]) and emb = [θ, θ].
func (r *Runner) textRope(pos []int32, s int) {
	t := r.m.cfg.Backbone.Text
	hd := t.HeadDim
	half := hd / 2
	sec := t.MRoPESection
	inv := r.m.textInvFreq
	for i := 0; i < s; i++ {
		cs, sn := r.tcos[i*hd:][:hd], r.tsin[i*hd:][:hd]
		for j := 0; j < half; j++ {
			c := 0
			switch {
			case j%3 == 1 && j < 3*sec[1]:
				c = 1
			case j%3 == 2 && j < 3*sec[2]:
				c = 2
			}
			a := float64(float32(pos[c*s+i]) * inv[j])
			cv, sv := float32(math.Cos(a)), float32(math.Sin(a))
			cs[j], sn[j] = cv, sv
			cs[j+half], sn[j+half] = cv, sv
		}
	}
}
