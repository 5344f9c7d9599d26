// Package backbone runs GR00T N1.7's Qwen3-VL backbone in fp32: the vision
// tower (patch embedding, interpolated learned position embedding, 2-D
// rotary, pre-norm ViT blocks, deepstack and final mergers) and the Qwen3
// text decoder truncated to select_layer (interleaved mRoPE, QK-norm, GQA,
// deepstack injection), returning the last kept layer's output before the
// final norm (upstream's gr00t/model/modules/qwen3_backbone.py reads
// hidden_states[-1] of transformers' Qwen3-VL, the pre-norm output).
//
// Weights are packed once with tensor.Kernels, straight from the
// checkpoint's BF16 bits when the source offers them (BF16Source); the
// arithmetic is fp32. A Model is immutable after Load and may back several
// Runners; a Runner owns every activation buffer for one Layout and is not
// safe for concurrent use.
package backbone

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// ErrInput is wrapped by errors about inputs that do not fit the model or
// the runner's layout (wrong widths, too many patches or tokens, unknown
// token ids). device/cpu wraps it as device.ErrInput: the gateway checks
// requests against the layout before the device, so one reaching the model
// is a bug of the encoder or a plugin, answered 500.
var ErrInput = errors.New("backbone: invalid input")

// TapFunc receives a named intermediate tensor (named as the goldens' files
// in testdata/n17-tiny/caseA: vision_patch_embed, vision_pos_embed,
// vision_block_i, vision_deepstack_i, vision_merger, llm_inputs_embeds,
// llm_layer_i). data
// is a view into runner buffers, valid only during the call.
type TapFunc func(name string, shape []int, data []float32)

// linear is one packed nn.Linear.
type linear struct {
	w tensor.Packed
	b []float32 // nil without bias
}

type visionBlock struct {
	norm1W, norm1B, norm2W, norm2B []float32
	qkv, proj, fc1, fc2            linear
}

type merger struct {
	normW, normB []float32
	fc1, fc2     linear
}

type textLayer struct {
	inNorm, postNorm []float32
	q, k, v, o       linear
	qNorm, kNorm     []float32
	gate, up, down   linear
}

// Model holds the backbone's packed fp32 weights.
type Model struct {
	cfg model.Config
	k   tensor.Kernels

	patch     linear
	posTable  []float32 // [num_position_embeddings, hidden]
	blocks    []visionBlock
	merger    merger
	deepstack []merger
	isTap     []int // isTap[block] = deepstack index or -1

	embed  []float32 // [vocab, hidden]; nil when embedH holds it
	embedH []uint16  // [vocab, hidden] bf16 bits (from a BF16Source)
	layers []textLayer

	visInvFreq  []float32 // [head_dim/4]
	textInvFreq []float32 // [head_dim/2]
	params      int64
}

// Config returns the configuration the model was loaded with.
func (m *Model) Config() model.Config { return m.cfg }

// Params is the number of backbone parameters loaded.
func (m *Model) Params() int64 { return m.params }

// Source yields a planned tensor as a fresh float32 slice (model.Checkpoint
// implements it).
type Source interface {
	Float32(name string) ([]float32, error)
}

// BF16Source is optionally implemented by a Source (model.Checkpoint
// implements it): BF16 yields a tensor's bf16 bit patterns without
// widening (ok false when the tensor is stored in another dtype) and
// Release says the loader holds its own copy of a tensor. LoadFrom then
// packs every linear weight straight from the bits (tensor.PackLinearBF16:
// bf16 panels with bf16-storage kernels, fp32 panels otherwise), keeps the
// token embedding as bf16 bits, and releases each tensor once copied, so
// that neither a widened fp32 copy nor the mapped checkpoint stays
// resident. The values, and so the results, are the same as through
// Float32.
type BF16Source interface {
	BF16(name string) (bits []uint16, ok bool, err error)
	Release(name string) error
}

// Load packs the backbone weights of ck with k.
func Load(ck *model.Checkpoint, k tensor.Kernels) (*Model, error) {
	return LoadFrom(ck.Config, ck, k)
}

// embedRow writes the embedding of token id to dst.
func (m *Model) embedRow(dst []float32, id int) {
	h := len(dst)
	if m.embedH == nil {
		copy(dst, m.embed[id*h:(id+1)*h])
		return
	}
	for i, v := range m.embedH[id*h : (id+1)*h] {
		dst[i] = math.Float32frombits(uint32(v) << 16)
	}
}

// LoadFrom packs the backbone weights of cfg read from src (which must
// already have been checked against model.Plan(cfg): lengths are trusted).
func LoadFrom(cfg model.Config, src Source, k tensor.Kernels) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, k: k}
	var err error
	bs, _ := src.(BF16Source)
	release := func(name string) {
		if bs != nil && err == nil {
			if e := bs.Release(name); e != nil {
				err = fmt.Errorf("backbone: %w", e)
			}
		}
	}
	get := func(name string) []float32 {
		if err != nil {
			return nil
		}
		w, e := src.Float32(name)
		if e != nil {
			err = fmt.Errorf("backbone: %w", e)
			return nil
		}
		m.params += int64(len(w))
		release(name)
		return w
	}
	// bits is name's bf16 bits from a BF16Source, nil otherwise.
	bits := func(name string) []uint16 {
		if bs == nil || err != nil {
			return nil
		}
		h, ok, e := bs.BF16(name)
		if e != nil {
			err = fmt.Errorf("backbone: %w", e)
		}
		if !ok {
			return nil
		}
		m.params += int64(len(h))
		return h
	}
	lin := func(name string, n, kk int, bias bool) linear {
		var l linear
		if h := bits(name + ".weight"); h != nil {
			l.w = tensor.PackLinearBF16(k, h, n, kk)
			release(name + ".weight")
		} else if w := get(name + ".weight"); w != nil {
			l.w = k.PackLinear(w, n, kk)
		}
		if err != nil {
			return linear{}
		}
		if bias {
			l.b = get(name + ".bias")
		}
		return l
	}
	v := cfg.Backbone.Vision
	vp := model.VisionPrefix
	m.patch = lin(vp+"patch_embed.proj", v.HiddenSize, v.PatchDim(), true)
	m.posTable = get(vp + "pos_embed.weight")
	m.blocks = make([]visionBlock, v.Depth)
	for i := range m.blocks {
		b := fmt.Sprintf("%sblocks.%d.", vp, i)
		m.blocks[i] = visionBlock{
			norm1W: get(b + "norm1.weight"), norm1B: get(b + "norm1.bias"),
			norm2W: get(b + "norm2.weight"), norm2B: get(b + "norm2.bias"),
			qkv:  lin(b+"attn.qkv", 3*v.HiddenSize, v.HiddenSize, true),
			proj: lin(b+"attn.proj", v.HiddenSize, v.HiddenSize, true),
			fc1:  lin(b+"mlp.linear_fc1", v.IntermediateSize, v.HiddenSize, true),
			fc2:  lin(b+"mlp.linear_fc2", v.HiddenSize, v.IntermediateSize, true),
		}
	}
	md := v.MergeDim()
	mg := func(p string) merger {
		return merger{normW: get(p + "norm.weight"), normB: get(p + "norm.bias"),
			fc1: lin(p+"linear_fc1", md, md, true), fc2: lin(p+"linear_fc2", v.OutHiddenSize, md, true)}
	}
	m.merger = mg(vp + "merger.")
	m.isTap = make([]int, v.Depth)
	for i := range m.isTap {
		m.isTap[i] = -1
	}
	for k, idx := range v.DeepstackVisualIndexes {
		m.deepstack = append(m.deepstack, mg(fmt.Sprintf("%sdeepstack_merger_list.%d.", vp, k)))
		m.isTap[idx] = k
	}

	t := cfg.Backbone.Text
	lp := model.LLMPrefix
	if h := bits(lp + "embed_tokens.weight"); h != nil {
		m.embedH = cloneTable(h)
		release(lp + "embed_tokens.weight")
	} else {
		m.embed = get(lp + "embed_tokens.weight")
	}
	m.layers = make([]textLayer, cfg.SelectLayer)
	qd, kvd := t.NumAttentionHeads*t.HeadDim, t.NumKeyValueHeads*t.HeadDim
	for i := range m.layers {
		b := fmt.Sprintf("%slayers.%d.", lp, i)
		m.layers[i] = textLayer{
			inNorm: get(b + "input_layernorm.weight"), postNorm: get(b + "post_attention_layernorm.weight"),
			q:     lin(b+"self_attn.q_proj", qd, t.HiddenSize, false),
			k:     lin(b+"self_attn.k_proj", kvd, t.HiddenSize, false),
			v:     lin(b+"self_attn.v_proj", kvd, t.HiddenSize, false),
			o:     lin(b+"self_attn.o_proj", t.HiddenSize, qd, false),
			qNorm: get(b + "self_attn.q_norm.weight"), kNorm: get(b + "self_attn.k_norm.weight"),
			gate: lin(b+"mlp.gate_proj", t.IntermediateSize, t.HiddenSize, false),
			up:   lin(b+"mlp.up_proj", t.IntermediateSize, t.HiddenSize, false),
			down: lin(b+"mlp.down_proj", t.HiddenSize, t.IntermediateSize, false),
		}
	}
	if err != nil {
		return nil, err
	}
	m.visInvFreq = invFreq(10000, v.HeadDim()/2)
	m.textInvFreq = invFreq(t.RopeTheta, t.HeadDim)
	return m, nil
}

// invFreq is torch's 1/(theta^(arange(0, dim, 2)/dim)) in float32: dim/2
// frequencies.
func invFreq(theta float64, dim int) []float32 {
	out := make([]float32, dim/2)
	for j := range out {
		e := float32(2*j) / float32(dim)
		out[j] = 1 / float32(math.Pow(theta, float64(e)))
	}
	return out
}

// Layout bounds the inputs a Runner accepts; its buffers are sized for it
// once, so any input within it runs without allocating.
type Layout struct {
	// MaxPatches bounds the total patch rows over all images (DROID: 1792).
	MaxPatches int
	// MaxImages bounds the number of images (DROID: 4).
	MaxImages int
	// MaxFrames bounds the total temporal frames over all images (attention
	// segments); 0 means MaxImages.
	MaxFrames int
	// MaxSeq bounds the text sequence length S (DROID demo: 469).
	MaxSeq int
}

// cloneTable copies src (the 622 MB token embedding at real size) in
// 1 MiB chunks on GOMAXPROCS goroutines, each chunk through a call whose
// prologue is a preemption point. One runtime.memmove of the whole table
// cannot be preempted: a GC cycle that started meanwhile spun on it
// (runtime.suspendG, a preemption signal storm) for as long as the copy
// faulted its pages in, up to 1.7 s of a real-size load on a Zen 3 VM; and
// on one goroutine the faults were serial.
func cloneTable(src []uint16) []uint16 {
	dst := make([]uint16, len(src))
	const chunk = 1 << 19 // values
	chunks := (len(src) + chunk - 1) / chunk
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), chunks) {
		wg.Go(func() {
			for {
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				off := c * chunk
				copyChunk(dst[off:], src[off:min(off+chunk, len(src))])
			}
		})
	}
	wg.Wait()
	return dst
}

//go:noinline
func copyChunk(dst, src []uint16) { copy(dst, src) }
