package pdk

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

// Runner drives a Plugin through gwabi v1 byte messages: it decodes input
// envelopes, calls the plugin and encodes the result (status header plus
// body). The wasm export shims use one Runner; native tests and benchmarks
// use it to exercise exactly the guest-side path without wasm.
//
// A Runner is not safe for concurrent use. Results alias the Runner's
// buffer and are valid until its next call.
type Runner struct {
	p     Plugin
	dec   envelope.Envelope
	b     envelope.Builder
	out   []byte
	obs   Observation
	post  PostInput
	state []StateInput
	dims  []int64
	names []string // "action."+key per output group (actionName)
}

// NewRunner returns a Runner for p.
func NewRunner(p Plugin) *Runner { return &Runner{p: p} }

// Describe returns the result of gw_describe: the Description as JSON.
func (r *Runner) Describe() []byte {
	d := r.p.Describe()
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
	if err := r.dec.Decode(in); err != nil {
		return r.fail(abi.StatusPluginError, &Error{Code: abi.CodePluginError, Message: err.Error()})
	}
	o := &r.obs
	*o = Observation{State: o.State[:0], Cameras: o.Cameras[:0]}
	o.RequestID, _ = r.dec.Attr(abi.AttrRequestID)
	o.Embodiment, _ = r.dec.Attr(abi.AttrEmbodiment)
	o.Instruction, _ = r.dec.Attr(abi.AttrInstruction)
	o.StateDType = stateDType(&r.dec)
	for i := range r.dec.Tensors {
		t := &r.dec.Tensors[i]
		switch {
		case strings.HasPrefix(t.Name, abi.VideoPrefix):
			c := CameraInput{Key: t.Name[len(abi.VideoPrefix):]}
			if len(t.Dims) != 4 {
				return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidCamera, "images."+c.Key, "descriptor rank %d, want [T,H,W,C]", len(t.Dims)))
			}
			c.Frames, c.Height, c.Width, c.Channels = int(t.Dims[0]), int(t.Dims[1]), int(t.Dims[2]), int(t.Dims[3])
			o.Cameras = append(o.Cameras, c)
		case strings.HasPrefix(t.Name, abi.StatePrefix):
			s, err := stateInput(t)
			if err != nil {
				return r.fail(abi.StatusInvalid, err)
			}
			o.State = append(o.State, s)
		}
	}
	st, err := r.p.Pre(o)
	if err != nil {
		return r.fail(asError(err))
	}
	r.b.Reset()
	r.dims = append(r.dims[:0], int64(len(st)))
	r.b.Float32(abi.TensorState, r.dims, st)
	return r.okEnvelope()
}

// Post runs gw_post on an input envelope.
func (r *Runner) Post(in []byte) []byte {
	if err := r.dec.Decode(in); err != nil {
		return r.fail(abi.StatusPluginError, &Error{Code: abi.CodePluginError, Message: err.Error()})
	}
	p := &r.post
	*p = PostInput{State: p.State[:0]}
	p.RequestID, _ = r.dec.Attr(abi.AttrRequestID)
	p.Embodiment, _ = r.dec.Attr(abi.AttrEmbodiment)
	p.StateDType = stateDType(&r.dec)
	for i := range r.dec.Tensors {
		t := &r.dec.Tensors[i]
		switch {
		case t.Name == abi.TensorActionPred:
			if len(t.Dims) != 2 {
				return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "rank %d, want [H, D]", len(t.Dims)))
			}
			v, err := t.Float32s()
			if err != nil {
				return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "%v", err))
			}
			p.ActionPred, p.Horizon, p.Dim = v, int(t.Dims[0]), int(t.Dims[1])
		case strings.HasPrefix(t.Name, abi.StatePrefix):
			s, err := stateInput(t)
			if err != nil {
				return r.fail(abi.StatusInvalid, err)
			}
			p.State = append(p.State, s)
		}
	}
	if p.ActionPred == nil {
		return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "missing"))
	}
	acts, err := r.p.Post(p)
	if err != nil {
		return r.fail(asError(err))
	}
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
	if n := r.names[i]; len(n) == len(abi.ActionPrefix)+len(key) && n[len(abi.ActionPrefix):] == key {
		return n
	}
	r.names[i] = abi.ActionPrefix + key
	return r.names[i]
}

func stateDType(e *envelope.Envelope) string {
	if v, ok := e.Attr(abi.AttrStateDType); ok && v != "" {
		return v
	}
	return "float32"
}

func stateInput(t *envelope.Tensor) (StateInput, *Error) {
	s := StateInput{Key: t.Name[len(abi.StatePrefix):]}
	v, err := t.Float64s()
	if err != nil {
		return s, Errorf(abi.CodeInvalidState, "state."+s.Key, "%v", err)
	}
	s.Values = v
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
