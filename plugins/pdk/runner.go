package pdk

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unsafe"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
	"github.com/gr00tgw/gr00tgw/plugins/internal/wasmstr"
)

// Runner drives a Plugin through gwabi v1 byte messages: it decodes input
// envelopes, calls the plugin and encodes the result (status header plus
// body). The wasm export shims use one Runner; native tests and benchmarks
// use it to exercise exactly the guest-side path without wasm.
//
// A Runner is not safe for concurrent use. Results alias the Runner's
// buffer and are valid until its next call.
type Runner struct {
	p               Plugin
	decPre, decPost envelope.Envelope // each stage's input decoder
	// The tensor-derived parts of the last Observation / PostInput, kept
	// while the stage's input layout repeats (envelope.Envelope.Reused);
	// copied into r.obs / r.post for each call, since the plugin may
	// modify what it is handed.
	preOK, postOK bool
	preState      []StateInput
	preCams       []CameraInput
	postState     []StateInput
	postPred      []float32
	postH, postD  int
	b             envelope.Builder
	out           []byte
	obs           Observation
	post          PostInput
	dims          []int64
	names         []string // "action."+key per output group (actionName)
	canon         []string // the described state and camera keys (canonical)
	canonOK       bool

	// Each stage's last successful result, reused when the next result
	// has the same layout (see resultCache).
	preRes, postRes resultCache
	scratch         envelope.Envelope
	keys            []string

	decRe envelope.Envelope // gw_reencode's input decoder
	re    ReencodeInput
}

// resultCache is one stage's last successful result (status header plus
// envelope) and where each tensor's values sit in it. A plugin returns the
// same groups with the same shapes on every call, so from the second call
// on a result is written by copying the values alone: in a wasm guest the
// envelope encoder's layout, header and table writes cost about as much as
// a small stage's logic. The cached layout is checked against every result
// (count, keys, shapes) before it is reused.
type resultCache struct {
	buf     []byte
	tensors []cachedTensor
}

type cachedTensor struct {
	key  string    // the group key as the plugin returned it (pre: unused)
	h, d int       // shape [h, d] (pre: [d], h = 0)
	vals []float32 // the values in buf, as float32 (made once: on wasm each unsafe.Slice is a call)
}

// fill records out (an encoded success) as the cache's result, keeping
// keys[i] and the shape of each tensor.
func (r *Runner) fill(c *resultCache, out []byte, keys []string) []byte {
	c.buf = append(c.buf[:0], out...)
	c.tensors = c.tensors[:0]
	if err := r.scratch.Decode(c.buf[abi.ResultHeaderSize:]); err != nil {
		c.tensors = c.tensors[:0]
		return out // cannot happen: we just encoded it; stay uncached
	}
	for i := range r.scratch.Tensors {
		t := &r.scratch.Tensors[i]
		var ct cachedTensor
		switch len(t.Dims) {
		case 1:
			ct.d = int(t.Dims[0])
		case 2:
			ct.h, ct.d = int(t.Dims[0]), int(t.Dims[1])
		default:
			c.tensors = c.tensors[:0]
			return out
		}
		if i < len(keys) {
			ct.key = keys[i]
		}
		if n := len(t.Data) / 4; n > 0 {
			ct.vals = unsafe.Slice((*float32)(unsafe.Pointer(&t.Data[0])), n)
		}
		c.tensors = append(c.tensors, ct)
	}
	return c.buf
}

// canonical returns the plugin's own string for a state or camera key its
// Description names, else key. Keys then share the data pointer of the
// constants a plugin compares them with, and pdk.Equal on wasm settles
// such a comparison inline, without a call. Called when an input layout
// changes; the table is built from Describe on first use.
func (r *Runner) canonical(key string) string {
	if !r.canonOK {
		d := r.p.Describe()
		for _, g := range d.State {
			r.canon = append(r.canon, g.Key)
		}
		for _, c := range d.Cameras {
			r.canon = append(r.canon, c.Key)
		}
		r.canonOK = true
	}
	for _, c := range r.canon {
		if c == key {
			return c
		}
	}
	return key
}

// sameString reports a == b, comparing the data pointers first (a plugin
// returns its keys from the same constants every call).
func sameString(a, b string) bool {
	return wasmstr.Equal(a, b) // compares the data pointers first
}

// NewRunner returns a Runner for p.
func NewRunner(p Plugin) *Runner { return &Runner{p: p} }

// Describe returns the result of gw_describe: the Description as JSON.
func (r *Runner) Describe() []byte {
	d := withFeatures(r.p, r.p.Describe())
	d.ABI = abi.Version
	js, err := json.Marshal(d)
	if err != nil {
		return r.fail(abi.StatusPluginError, &Error{Code: abi.CodePluginError, Message: "describe: " + err.Error()})
	}
	return r.ok(js)
}

// Init runs gw_init with the InitConfig JSON in cfg.
func (r *Runner) Init(cfg []byte) []byte {
	var c abi.InitConfig
	if err := json.Unmarshal(cfg, &c); err != nil {
		return r.fail(abi.StatusInvalid, &Error{Code: abi.CodeInvalidConfig, Message: "init config: " + err.Error()})
	}
	if err := r.p.Init(&c); err != nil {
		return r.fail(asError(err))
	}
	return r.ok(nil)
}

// Pre runs gw_pre on an input envelope.
func (r *Runner) Pre(in []byte) []byte {
	if res := r.observation(in); res != nil {
		return res
	}
	st, err := r.p.Pre(&r.obs)
	if err != nil {
		return r.fail(asError(err))
	}
	return r.encodeState(st)
}

// observation decodes a gw_pre input into r.obs; it returns nil or a
// failure result.
func (r *Runner) observation(in []byte) []byte {
	d := &r.decPre
	if err := d.Decode(in); err != nil {
		r.preOK = false
		return r.fail(abi.StatusPluginError, &Error{Code: abi.CodePluginError, Message: err.Error()})
	}
	// Every field is assigned (the plugin may have changed any of them).
	o := &r.obs
	o.RequestID, o.Embodiment, o.Instruction, o.StateDType = requestAttrs(d)
	if r.preOK && d.Reused() {
		o.State = copyInto(o.State, r.preState)
		o.Cameras = copyInto(o.Cameras, r.preCams)
		return nil
	}
	o.State, o.Cameras = o.State[:0], o.Cameras[:0]
	return r.observationTensors()
}

// observationTensors fills r.obs from a new input layout (observation's
// slow path).
func (r *Runner) observationTensors() []byte {
	d, o := &r.decPre, &r.obs
	r.preOK = false
	for i := range d.Tensors {
		t := &d.Tensors[i]
		switch {
		case len(t.Name) > 0 && t.Name[0] == abi.VideoPrefix[0] && wasmstr.HasPrefix(t.Name, abi.VideoPrefix):
			c := CameraInput{Key: t.Name[len(abi.VideoPrefix):]}
			if len(t.Dims) != 4 {
				return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidCamera, "images."+c.Key, "descriptor rank %d, want [T,H,W,C]", len(t.Dims)))
			}
			c.Frames, c.Height, c.Width, c.Channels = int(t.Dims[0]), int(t.Dims[1]), int(t.Dims[2]), int(t.Dims[3])
			o.Cameras = append(o.Cameras, c)
		case len(t.Name) > 0 && t.Name[0] == abi.StatePrefix[0] && wasmstr.HasPrefix(t.Name, abi.StatePrefix):
			s, err := stateInput(t)
			if err != nil {
				return r.fail(abi.StatusInvalid, err)
			}
			o.State = append(o.State, s)
		}
	}
	for i := range o.State {
		o.State[i].Key = r.canonical(o.State[i].Key)
	}
	for i := range o.Cameras {
		o.Cameras[i].Key = r.canonical(o.Cameras[i].Key)
	}
	r.preState = append(r.preState[:0], o.State...)
	r.preCams = append(r.preCams[:0], o.Cameras...)
	r.preOK = true
	return nil
}

// encodeState encodes Pre's result.
func (r *Runner) encodeState(st []float32) []byte {
	if c := &r.preRes; len(c.tensors) == 1 && c.tensors[0].h == 0 && c.tensors[0].d == len(st) {
		copy(c.tensors[0].vals, st)
		return c.buf
	}
	r.b.Reset()
	r.dims = append(r.dims[:0], int64(len(st)))
	r.b.Float32(abi.TensorState, r.dims, st)
	out := r.okEnvelope()
	if binary.LittleEndian.Uint32(out) != abi.StatusOK {
		return out
	}
	return r.fill(&r.preRes, out, nil)
}

// Post runs gw_post on an input envelope.
func (r *Runner) Post(in []byte) []byte {
	if res := r.postInput(in); res != nil {
		return res
	}
	acts, err := r.p.Post(&r.post)
	if err != nil {
		return r.fail(asError(err))
	}
	return r.encodeActions(acts)
}

// postInput decodes a gw_post input into r.post; it returns nil or a
// failure result.
func (r *Runner) postInput(in []byte) []byte {
	d := &r.decPost
	if err := d.Decode(in); err != nil {
		r.postOK = false
		return r.fail(abi.StatusPluginError, &Error{Code: abi.CodePluginError, Message: err.Error()})
	}
	// Every field is assigned (the plugin may have changed any of them).
	p := &r.post
	p.RequestID, p.Embodiment, _, p.StateDType = requestAttrs(d)
	if r.postOK && d.Reused() {
		p.State = copyInto(p.State, r.postState)
		p.ActionPred, p.Horizon, p.Dim = r.postPred, r.postH, r.postD
		return nil
	}
	p.State, p.ActionPred, p.Horizon, p.Dim = p.State[:0], nil, 0, 0
	return r.postTensors()
}

// postTensors fills r.post from a new input layout (see
// observationTensors).
func (r *Runner) postTensors() []byte {
	d, p := &r.decPost, &r.post
	r.postOK = false
	if res := r.actionInputs(d, &p.ActionPred, &p.Horizon, &p.Dim, &p.State, nil); res != nil {
		return res
	}
	r.postState = append(r.postState[:0], p.State...)
	r.postPred, r.postH, r.postD = p.ActionPred, p.Horizon, p.Dim
	r.postOK = true
	return nil
}

// actionInputs reads the input tensors of Post and Reencode from d:
// action_pred (required, rank 2 [H, D]) into *pred, *h, *dim; every
// state.<key> into *state; with prev non-nil, every prev_state.<key> into
// *prev (otherwise those are ignored). State keys are made canonical. It
// returns nil, or the failure result for the stage to return.
func (r *Runner) actionInputs(d *envelope.Envelope, pred *[]float32, h, dim *int, state, prev *[]StateInput) []byte {
	for i := range d.Tensors {
		t := &d.Tensors[i]
		switch {
		case wasmstr.Equal(t.Name, abi.TensorActionPred):
			if len(t.Dims) != 2 {
				return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "rank %d, want [H, D]", len(t.Dims)))
			}
			v, err := t.Float32s()
			if err != nil {
				return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "%v", err))
			}
			*pred, *h, *dim = v, int(t.Dims[0]), int(t.Dims[1])
		case wasmstr.HasPrefix(t.Name, abi.StatePrefix):
			s, err := stateInput(t)
			if err != nil {
				return r.fail(abi.StatusInvalid, err)
			}
			s.Key = r.canonical(s.Key)
			*state = append(*state, s)
		case prev != nil && wasmstr.HasPrefix(t.Name, abi.PrevStatePrefix):
			s, err := prevStateInput(t)
			if err != nil {
				return r.fail(abi.StatusInvalid, err)
			}
			s.Key = r.canonical(s.Key)
			*prev = append(*prev, s)
		}
	}
	if *pred == nil {
		return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "missing"))
	}
	return nil
}

// encodeActions encodes Post's result.
func (r *Runner) encodeActions(acts *Actions) []byte {
	if c := &r.postRes; len(c.tensors) == len(acts.Groups) && len(c.tensors) > 0 {
		// The shape conditions combined without branches (each is a jump
		// through Go's dispatch loop in a wasm guest); a key with the
		// cached key's data pointer costs no comparison call.
		var miss uint8
		for i := range acts.Groups {
			g, t := &acts.Groups[i], &c.tensors[i]
			miss |= b2u8(g.Horizon != t.h) | b2u8(g.Dim != t.d) | b2u8(len(g.Values) != t.h*t.d) |
				b2u8(len(g.Key) != len(t.key)) | b2u8(unsafe.StringData(g.Key) != unsafe.StringData(t.key))
		}
		hit := miss == 0
		if !hit {
			hit = true
			for i := range acts.Groups {
				g, t := &acts.Groups[i], &c.tensors[i]
				hit = hit && g.Horizon == t.h && g.Dim == t.d && len(g.Values) == t.h*t.d && sameString(g.Key, t.key)
			}
		}
		if hit {
			for i := range acts.Groups {
				copy(c.tensors[i].vals, acts.Groups[i].Values)
			}
			return c.buf
		}
	}
	keys := r.keys[:0]
	for i := range acts.Groups {
		keys = append(keys, acts.Groups[i].Key)
	}
	r.keys = keys
	out := r.encodeActionsSlow(acts)
	if binary.LittleEndian.Uint32(out) != abi.StatusOK {
		return out
	}
	return r.fill(&r.postRes, out, keys)
}

func (r *Runner) encodeActionsSlow(acts *Actions) []byte {
	r.b.Reset()
	for i := range acts.Groups {
		g := &acts.Groups[i]
		if len(g.Values) != g.Horizon*g.Dim {
			return r.fail(abi.StatusPluginError, Errorf(abi.CodePluginError, abi.ActionPrefix+g.Key, "%d values for [%d, %d]", len(g.Values), g.Horizon, g.Dim))
		}
		r.dims = append(r.dims[:0], int64(g.Horizon), int64(g.Dim))
		r.b.Float32(r.actionName(i, g.Key), r.dims, g.Values) // add copies dims
	}
	return r.okEnvelope()
}

// actionName returns "action."+key, cached per output position so that a
// plugin returning the same groups every call costs no allocation.
func (r *Runner) actionName(i int, key string) string {
	for len(r.names) <= i {
		r.names = append(r.names, "")
	}
	if n := r.names[i]; len(n) == len(abi.ActionPrefix)+len(key) && wasmstr.Equal(n[len(abi.ActionPrefix):], key) {
		return n
	}
	r.names[i] = abi.ActionPrefix + key
	return r.names[i]
}

// copyInto returns dst[:0] with src's elements appended. For the few
// elements of an Observation it assigns them one by one: append of
// pointer-holding elements is three runtime calls in a wasm guest
// (typedslicecopy, its overflow check and memmove).
func copyInto[T any](dst, src []T) []T {
	if cap(dst) < len(src) {
		return append(dst[:0], src...)
	}
	dst = dst[:len(src)]
	copy(dst, src)
	return dst
}

// The request attribute keys, prepared for wasmstr.Key.Is (two word
// compares inline instead of a comparison call in a wasm guest).
var (
	keyRequestID   = wasmstr.NewKey(abi.AttrRequestID)
	keyEmbodiment  = wasmstr.NewKey(abi.AttrEmbodiment)
	keyInstruction = wasmstr.NewKey(abi.AttrInstruction)
	keyStateDType  = wasmstr.NewKey(abi.AttrStateDType)
)

// requestAttrs reads the request attributes in one pass (the first of
// duplicate keys wins, as with Envelope.Attr); dtype defaults to
// "float32".
func requestAttrs(e *envelope.Envelope) (id, emb, instruction, dtype string) {
	var seen uint8
	for i := range e.Attrs {
		a := &e.Attrs[i]
		switch {
		case seen&1 == 0 && keyRequestID.Is(a.Key):
			id, seen = a.Value, seen|1
		case seen&2 == 0 && keyEmbodiment.Is(a.Key):
			emb, seen = a.Value, seen|2
		case seen&4 == 0 && keyInstruction.Is(a.Key):
			instruction, seen = a.Value, seen|4
		case seen&8 == 0 && keyStateDType.Is(a.Key):
			dtype, seen = a.Value, seen|8
		}
	}
	if dtype == "" {
		dtype = "float32"
	}
	return id, emb, instruction, dtype
}

func stateInput(t *envelope.Tensor) (StateInput, *Error) {
	s := StateInput{Key: t.Name[len(abi.StatePrefix):]}
	if n := len(t.Data) / 8; t.DType == envelope.FP64 && n > 0 && uintptr(unsafe.Pointer(&t.Data[0]))%8 == 0 {
		s.Values = unsafe.Slice((*float64)(unsafe.Pointer(&t.Data[0])), n) // Float64s' aliasing case, without the call
	} else {
		v, err := t.Float64s()
		if err != nil {
			return s, Errorf(abi.CodeInvalidState, "state."+s.Key, "%v", err)
		}
		s.Values = v
	}
	switch len(t.Dims) {
	case 1:
		s.Dim = int(t.Dims[0])
	case 2:
		s.Steps, s.Dim = int(t.Dims[0]), int(t.Dims[1])
	default:
		return s, Errorf(abi.CodeInvalidState, "state."+s.Key, "rank %d, want [D] or [T, D]", len(t.Dims))
	}
	return s, nil
}

func (r *Runner) header(status uint32, n int) []byte {
	need := abi.ResultHeaderSize + n
	if cap(r.out) < need {
		r.out = make([]byte, need, need+need/2)
	}
	r.out = r.out[:need]
	binary.LittleEndian.PutUint32(r.out, status)
	binary.LittleEndian.PutUint32(r.out[4:], 0)
	return r.out
}

func (r *Runner) ok(body []byte) []byte {
	out := r.header(abi.StatusOK, len(body))
	copy(out[abi.ResultHeaderSize:], body)
	return out
}

func (r *Runner) okEnvelope() []byte {
	out := r.header(abi.StatusOK, 0)
	res, err := r.b.AppendTo(out)
	if err != nil {
		return r.fail(abi.StatusPluginError, &Error{Code: abi.CodePluginError, Message: err.Error()})
	}
	r.out = res
	return res
}

func (r *Runner) fail(status uint32, e *Error) []byte {
	r.b.Reset()
	r.b.Attr(abi.AttrCode, e.Code).Attr(abi.AttrField, e.Field).Attr(abi.AttrMessage, e.Message)
	out := r.header(status, 0)
	res, err := r.b.AppendTo(out)
	if err != nil { // cannot happen: three short attrs
		panic(fmt.Sprintf("pdk: encode error result: %v", err))
	}
	r.out = res
	return res
}
