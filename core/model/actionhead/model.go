package actionhead

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gr00tgw/gr00tgw/core/safetensors"
	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// Prefix is the checkpoint name prefix of every action-head tensor.
const Prefix = "action_head."

// ErrWeights is wrapped by every error about a missing or mis-shaped
// checkpoint tensor.
var ErrWeights = errors.New("actionhead: bad weights")

// ErrInput is wrapped by every error about a request's tensors (lengths,
// sequence length above the plan's maximum, empty key sets). The gateway
// maps it to a client error.
var ErrInput = errors.New("actionhead: bad input")

// Weights gives access to checkpoint tensors by full name (with the
// "action_head." prefix) as a float32 copy and its shape. The caller of Load
// may release the source once Load returns: the Model keeps its own copies.
type Weights interface {
	Float32(name string) ([]float32, []int, error)
}

// SlotWeights is optionally implemented by a Weights to widen only one
// index of a tensor's first axis (one embodiment slot of a category-specific
// [E, in, out] weight) instead of the whole tensor: at real size this keeps
// Load's transient memory at one slot (≤ 19 MB) instead of all 32 (600 MB).
// It returns the slot's values and the full tensor's shape.
type SlotWeights interface {
	Float32Slot(name string, slot int) ([]float32, []int, error)
}

// BF16Weights is optionally implemented by a Weights (FromSafetensors
// does): BF16 yields a tensor's bf16 bit patterns without widening (ok
// false, no error, when it is stored in another dtype) and Release says the
// loader holds its own copy of a tensor. Load then packs every weight
// matrix straight from the bits (tensor.PackLinearBF16 / PackKNBF16: bf16
// panels with bf16-storage kernels), and releases each tensor once copied,
// so that neither a widened fp32 copy nor the mapped checkpoint stays
// resident. The values, and so the results, are those of Float32.
type BF16Weights interface {
	BF16(name string) (bits []uint16, shape []int, ok bool, err error)
	Release(name string) error
}

// FromSafetensors adapts a safetensors Set (BF16, F16 or F32 tensors) to
// Weights (and SlotWeights, BF16Weights). The Set must stay open while
// Load runs.
func FromSafetensors(s *safetensors.Set) Weights { return setWeights{s} }

type setWeights struct{ s *safetensors.Set }

func (w setWeights) BF16(name string) ([]uint16, []int, bool, error) {
	info, ok := w.s.Info(name)
	if !ok {
		return nil, nil, false, fmt.Errorf("tensor[%s]: %w", name, safetensors.ErrNotFound)
	}
	h, ok, err := w.s.BF16(name)
	return h, info.Shape, ok, err
}

func (w setWeights) Release(name string) error { return w.s.Release(name) }

func (w setWeights) Float32(name string) ([]float32, []int, error) {
	info, ok := w.s.Info(name)
	if !ok {
		return nil, nil, fmt.Errorf("tensor[%s]: %w", name, safetensors.ErrNotFound)
	}
	data, err := w.s.Float32(name)
	if err != nil {
		return nil, nil, err
	}
	return data, info.Shape, nil
}

func (w setWeights) Float32Slot(name string, slot int) ([]float32, []int, error) {
	info, ok := w.s.Info(name)
	if !ok {
		return nil, nil, fmt.Errorf("tensor[%s]: %w", name, safetensors.ErrNotFound)
	}
	if len(info.Shape) == 0 || slot < 0 || slot >= info.Shape[0] {
		return nil, info.Shape, fmt.Errorf("tensor[%s]: slot %d outside shape %v", name, slot, info.Shape)
	}
	b, err := w.s.Bytes(name)
	if err != nil {
		return nil, nil, err
	}
	per := int(info.NumElements()) / info.Shape[0]
	width := info.DType.Bits() / 8
	if width == 0 || len(b) != per*info.Shape[0]*width {
		return nil, nil, fmt.Errorf("tensor[%s]: %d bytes of %s for shape %v", name, len(b), info.DType, info.Shape)
	}
	out := make([]float32, per)
	if err := safetensors.Widen(out, b[slot*per*width:(slot+1)*per*width], info.DType); err != nil {
		return nil, nil, fmt.Errorf("tensor[%s]: %w", name, err)
	}
	return out, info.Shape, nil
}

// linear is a packed weight and its bias (nil when absent).
type linear struct {
	w tensor.Packed
	b []float32
}

type vlBlock struct {
	ln1g, ln1b, ln3g, ln3b []float32
	q, k, v, o, ff1, ff2   linear
}

type ditBlock struct {
	kind                 BlockKind
	q, k, v, o, ff1, ff2 linear
	// ada[step] is norm1.linear(silu(temb(τ_step))): scale then shift.
	ada [][]float32
}

// projectors are the category-specific MLPs of one embodiment slot.
type projectors struct {
	id         int
	st1, st2   linear // state encoder
	a1, a2, a3 linear // action encoder; a2 holds only the rows for W1's output
	// a2Bias[step] = sinusoid(τ_step)·W2[Width:2·Width] + b2: the half of W2
	// that sees the (row-constant) timestep encoding, hoisted.
	a2Bias [][]float32
	d1, d2 linear // action decoder
}

// Model is a loaded action head: packed weights plus everything that
// depends only on weights and the fixed timestep buckets. It is immutable
// and safe for concurrent use by any number of plans.
type Model struct {
	cfg  Config
	k    tensor.Kernels
	taus []int

	vllnG, vllnB []float32
	vl           []vlBlock
	dit          []ditBlock
	temb         [][]float32 // [step][Width]
	outMod       [][]float32 // [step]: proj_out_1(silu(temb)): shift then scale
	out2         linear
	pos          []float32 // position_embedding rows 0..Horizon-1
	emb          []*projectors
}

// Config returns the architecture the model was loaded with.
func (m *Model) Config() Config { return m.cfg }

// Embodiments returns the projector slots loaded, in Load order.
func (m *Model) Embodiments() []int {
	out := make([]int, len(m.emb))
	for i, p := range m.emb {
		out[i] = p.id
	}
	return out
}

// Timesteps returns the discrete τ of each Euler step (0, 250, 500, 750).
func (m *Model) Timesteps() []int { return slices.Clone(m.taus) }

func (m *Model) projectors(id int) *projectors {
	for _, p := range m.emb {
		if p.id == id {
			return p
		}
	}
	return nil
}

// loader fetches and shape-checks tensors; the first error sticks.
type loader struct {
	w   Weights
	k   tensor.Kernels
	err error
}

func (l *loader) get(name string, shape ...int) []float32 { return l.getSlot(name, -1, shape...) }

// getSlot fetches a tensor of the given shape; with slot ≥ 0 it returns only
// index slot of the first axis (through SlotWeights when available).
func (l *loader) getSlot(name string, slot int, shape ...int) []float32 {
	if l.err != nil {
		return nil
	}
	full := Prefix + name
	n := 1
	for _, d := range shape {
		n *= d
	}
	var (
		data []float32
		got  []int
		err  error
	)
	sw, partial := l.w.(SlotWeights)
	partial = partial && slot >= 0
	if partial {
		data, got, err = sw.Float32Slot(full, slot)
	} else {
		data, got, err = l.w.Float32(full)
	}
	if err == nil && !slices.Equal(got, shape) {
		err = fmt.Errorf("shape %v, want %v", got, shape)
	}
	want := n
	if partial {
		want = n / shape[0]
	}
	if err == nil && len(data) != want {
		err = fmt.Errorf("shape %v but %d values", got, len(data))
	}
	if err != nil {
		l.err = fmt.Errorf("actionhead: tensor[%s]: %w: %w", full, ErrWeights, err)
		return nil
	}
	if slot >= 0 && !partial {
		per := n / shape[0]
		data = data[slot*per : (slot+1)*per]
	}
	return data
}

// bits returns slot (≥ 0) or all (slot < 0) of a tensor of the given
// shape as bf16 bits when the weights offer them (BF16Weights), else nil.
func (l *loader) bits(name string, slot int, shape ...int) []uint16 {
	bw, ok := l.w.(BF16Weights)
	if !ok || l.err != nil {
		return nil
	}
	full := Prefix + name
	h, got, ok, err := bw.BF16(full)
	n := 1
	for _, d := range shape {
		n *= d
	}
	switch {
	case err != nil:
	case !ok:
		return nil
	case !slices.Equal(got, shape):
		err = fmt.Errorf("shape %v, want %v", got, shape)
	case len(h) != n:
		err = fmt.Errorf("shape %v but %d values", got, len(h))
	}
	if err != nil {
		l.err = fmt.Errorf("actionhead: tensor[%s]: %w: %w", full, ErrWeights, err)
		return nil
	}
	if slot >= 0 {
		per := n / shape[0]
		h = h[slot*per : (slot+1)*per]
	}
	return h
}

// release tells BF16Weights that the loader is done with a tensor.
func (l *loader) release(name string) {
	if bw, ok := l.w.(BF16Weights); ok && l.err == nil {
		if err := bw.Release(Prefix + name); err != nil {
			l.err = fmt.Errorf("actionhead: tensor[%s]: %w", Prefix+name, err)
		}
	}
}

// linear loads nn.Linear weight [out, in] and bias [out].
func (l *loader) linear(name string, out, in int) linear {
	var p tensor.Packed
	if h := l.bits(name+".weight", -1, out, in); h != nil {
		p = tensor.PackLinearBF16(l.k, h, out, in)
	} else if w := l.get(name+".weight", out, in); w != nil {
		p = l.k.PackLinear(w, out, in)
	}
	l.release(name + ".weight")
	b := l.get(name+".bias", out)
	l.release(name + ".bias")
	if l.err != nil {
		return linear{}
	}
	return linear{w: p, b: b}
}

// category loads slot id of a CategorySpecificLinear: W [E, in, out] used as
// x·W[id], b [E, out]. Rows [r0, r1) of W[id] (input features) are packed.
func (l *loader) category(name string, e, in, out, id, r0, r1 int) linear {
	var p tensor.Packed
	if h := l.bits(name+".W", id, e, in, out); h != nil {
		p = tensor.PackKNBF16(l.k, h[r0*out:r1*out], r1-r0, out)
	} else if slot := l.getSlot(name+".W", id, e, in, out); slot != nil {
		p = l.k.PackKN(slot[r0*out:r1*out], r1-r0, out)
	}
	l.release(name + ".W")
	bias := slices.Clone(l.getSlot(name+".b", id, e, out))
	if l.err != nil {
		return linear{}
	}
	return linear{w: p, b: bias}
}

// apply1 computes y = x·Wᵀ + b for one row through the kernels.
func apply1(k tensor.Kernels, y, x []float32, l linear) { k.MatMul(y, x, 1, l.w, l.b) }

// Load reads and packs the action head for the given embodiment slots (at
// least one; DROID is 24), checking every tensor's shape against cfg, and
// precomputes the timestep embeddings, AdaLN rows, output modulation and the
// action encoder's timestep term for every Euler step. Errors wrap
// ErrWeights or ErrConfig and name the tensor.
func Load(cfg Config, w Weights, k tensor.Kernels, embodiments ...int) (*Model, error) {
	return load(cfg, w, k, true, embodiments)
}

// LoadWithoutDiT is Load without the transformer's own weights (the DiT
// blocks, proj_out_1 and proj_out_2, ≈ 4.2 GB of fp32 at real size) and
// without the AdaLN and output-modulation rows precomputed from them: for
// callers that run the transformer through another implementation (see
// DiT). Every DenoisePlan of such a Model must be given a DiT with UseDiT
// before Run; Run fails with ErrConfig otherwise. The checkpoint must
// still hold the DiT tensors' siblings (timestep encoder, projectors,
// position embedding, VL self-attention).
func LoadWithoutDiT(cfg Config, w Weights, k tensor.Kernels, embodiments ...int) (*Model, error) {
	return load(cfg, w, k, false, embodiments)
}

// HasDiT reports whether the model holds its fp32 transformer (false after
// LoadWithoutDiT).
func (m *Model) HasDiT() bool { return len(m.dit) > 0 }

func load(cfg Config, w Weights, k tensor.Kernels, withDiT bool, embodiments []int) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(embodiments) == 0 {
		return nil, fmt.Errorf("%w: no embodiment slot requested", ErrConfig)
	}
	for _, id := range embodiments {
		if id < 0 || id >= cfg.Embodiments {
			return nil, fmt.Errorf("%w: embodiment %d outside [0, %d)", ErrConfig, id, cfg.Embodiments)
		}
	}
	l := &loader{w: w, k: k}
	m := &Model{cfg: cfg, k: k}
	W, Bd := cfg.Width, cfg.BackboneDim
	for s := 0; s < cfg.NumSteps; s++ {
		m.taus = append(m.taus, cfg.Timestep(s))
	}

	m.vllnG = l.get("vlln.weight", Bd)
	m.vllnB = l.get("vlln.bias", Bd)
	for i := 0; i < cfg.VLLayers; i++ {
		p := fmt.Sprintf("vl_self_attention.transformer_blocks.%d.", i)
		m.vl = append(m.vl, vlBlock{
			ln1g: l.get(p+"norm1.weight", Bd), ln1b: l.get(p+"norm1.bias", Bd),
			ln3g: l.get(p+"norm3.weight", Bd), ln3b: l.get(p+"norm3.bias", Bd),
			q: l.linear(p+"attn1.to_q", Bd, Bd), k: l.linear(p+"attn1.to_k", Bd, Bd),
			v: l.linear(p+"attn1.to_v", Bd, Bd), o: l.linear(p+"attn1.to_out.0", Bd, Bd),
			ff1: l.linear(p+"ff.net.0.proj", cfg.VLFF, Bd), ff2: l.linear(p+"ff.net.2", Bd, cfg.VLFF),
		})
	}

	// Timestep embeddings per step.
	lin1 := l.linear("model.timestep_encoder.timestep_embedder.linear_1", W, cfg.TimestepInDim)
	lin2 := l.linear("model.timestep_encoder.timestep_embedder.linear_2", W, W)
	if l.err != nil {
		return nil, l.err
	}
	proj := make([]float32, cfg.TimestepInDim)
	h := make([]float32, W)
	siluT := make([][]float32, cfg.NumSteps)
	for s, tau := range m.taus {
		timestepProj(proj, tau)
		apply1(k, h, proj, lin1)
		siluInto(h, h)
		t := make([]float32, W)
		apply1(k, t, h, lin2)
		m.temb = append(m.temb, t)
		siluT[s] = make([]float32, W)
		siluInto(siluT[s], t)
	}

	for i := 0; withDiT && i < cfg.Layers; i++ {
		p := fmt.Sprintf("model.transformer_blocks.%d.", i)
		kvIn := W
		kind := cfg.Kind(i)
		if kind != SelfBlock {
			kvIn = Bd
		}
		b := ditBlock{
			kind: kind,
			q:    l.linear(p+"attn1.to_q", W, W),
			k:    l.linear(p+"attn1.to_k", W, kvIn), v: l.linear(p+"attn1.to_v", W, kvIn),
			o:   l.linear(p+"attn1.to_out.0", W, W),
			ff1: l.linear(p+"ff.net.0.proj", cfg.FF, W), ff2: l.linear(p+"ff.net.2", W, cfg.FF),
		}
		ada := l.linear(p+"norm1.linear", 2*W, W)
		if l.err != nil {
			return nil, l.err
		}
		for s := range m.taus {
			row := make([]float32, 2*W)
			apply1(k, row, siluT[s], ada)
			b.ada = append(b.ada, row)
		}
		m.dit = append(m.dit, b)
	}
	if withDiT {
		out1 := l.linear("model.proj_out_1", 2*W, W)
		m.out2 = l.linear("model.proj_out_2", cfg.OutputDim, W)
		if l.err != nil {
			return nil, l.err
		}
		for s := range m.taus {
			row := make([]float32, 2*W)
			apply1(k, row, siluT[s], out1)
			m.outMod = append(m.outMod, row)
		}
	}
	pos := l.get("position_embedding.weight", cfg.MaxSeqLen, W)
	if l.err != nil {
		return nil, l.err
	}
	m.pos = slices.Clone(pos[:cfg.Horizon*W])

	E, S, A, Hd := cfg.Embodiments, cfg.MaxStateDim, cfg.MaxActionDim, cfg.HiddenSize
	for _, id := range embodiments {
		if m.projectors(id) != nil {
			continue
		}
		p := &projectors{id: id}
		p.st1 = l.category("state_encoder.layer1", E, S, Hd, id, 0, S)
		p.st2 = l.category("state_encoder.layer2", E, Hd, W, id, 0, Hd)
		p.a1 = l.category("action_encoder.W1", E, A, W, id, 0, A)
		p.a2 = l.category("action_encoder.W2", E, 2*W, W, id, 0, W)
		// The timestep half of W2 (rows W..2W), used only here.
		w2e := l.category("action_encoder.W2", E, 2*W, W, id, W, 2*W)
		p.a3 = l.category("action_encoder.W3", E, W, W, id, 0, W)
		p.d1 = l.category("action_decoder.layer1", E, cfg.OutputDim, Hd, id, 0, cfg.OutputDim)
		p.d2 = l.category("action_decoder.layer2", E, Hd, A, id, 0, Hd)
		if l.err != nil {
			return nil, l.err
		}
		// Hoist the timestep half of W2: e·W2[W:2W] + b2 per step.
		e := make([]float32, W)
		for _, tau := range m.taus {
			actionSinusoid(e, tau)
			row := make([]float32, W)
			apply1(k, row, e, w2e)
			p.a2Bias = append(p.a2Bias, row)
		}
		m.emb = append(m.emb, p)
	}
	return m, nil
}
