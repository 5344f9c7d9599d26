package plugins

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

// StateGroup is one raw state group of a request.
type StateGroup struct {
	Key string
	// Steps is 0 when the request sent a flat [D] list, else the number of
	// timesteps it sent as [[D], …] (Values is then row-major).
	Steps  int
	Values []float64
}

// Camera describes one camera's decoded frames (pixels stay native).
type Camera struct {
	Key      string `json:"key,omitempty"`
	Frames   int    `json:"frames"` // number of frames sent, oldest first
	Height   int    `json:"height"`
	Width    int    `json:"width"`
	Channels int    `json:"channels,omitempty"` // 0 means 3
}

// PreInput is the non-pixel part of an observation.
type PreInput struct {
	RequestID   string
	Embodiment  string // as sent by the client; "" if absent
	Instruction string
	StateDType  string // "float32" (default when "") or "float64"
	State       []StateGroup
	Cameras     []Camera
}

// PreOutput is the result of Pre.
type PreOutput struct {
	// State is the normalised state padded to Description.MaxStateDim.
	State []float32
}

// PostInput is the model output to decode plus the request's raw state.
type PostInput struct {
	RequestID  string
	Embodiment string
	StateDType string
	// ActionPred is the normalised chunk, row-major [Horizon, Dim]
	// (N1.7: [40, 132]).
	ActionPred []float32
	Horizon    int
	Dim        int
	State      []StateGroup
}

// ActionGroup is one decoded action group, row-major [Horizon, Dim].
type ActionGroup struct {
	Key     string
	Horizon int
	Dim     int
	Values  []float32
}

// PostOutput is the result of Post: physical actions per group, in the
// order of Description.Actions.
type PostOutput struct {
	Actions []ActionGroup

	vals []float32 // backing store of every group's Values (PostInto reuses it)
}

var builders = sync.Pool{New: func() any { return new(envelope.Builder) }}

// nameCache holds the envelope names of the groups a plugin describes, so
// that a request costs no string building: "state."+key, "video."+key, and
// the action keys keyed by their tensor name. Read-only after load.
type nameCache struct {
	state, video namePairs // key → prefixed name
	action       namePairs // "action."+key → key
}

// namePairs maps from[i] to to[i], in description order. Requests name
// the groups in that order, so lookup tries the caller's position first:
// one string comparison instead of hashing the key (a map lookup per group
// was ~0.2 µs of host time per DROID request).
type namePairs struct{ from, to []string }

func (n *namePairs) add(from, to string) {
	n.from, n.to = append(n.from, from), append(n.to, to)
}

// lookup returns the name paired with s, trying position i first.
func (n *namePairs) lookup(i int, s string) (string, bool) {
	if i < len(n.from) && n.from[i] == s {
		return n.to[i], true
	}
	for j, f := range n.from {
		if f == s {
			return n.to[j], true
		}
	}
	return "", false
}

func newNameCache(d *Description) nameCache {
	var c nameCache
	for _, g := range d.State {
		c.state.add(g.Key, abi.StatePrefix+g.Key)
	}
	for _, g := range d.Cameras {
		c.video.add(g.Key, abi.VideoPrefix+g.Key)
	}
	for _, g := range d.Actions {
		c.action.add(abi.ActionPrefix+g.Key, g.Key)
	}
	return c
}

// prefixed returns prefix+key, from m when key is described (the i-th
// group of a request is usually m's i-th).
func prefixed(m *namePairs, i int, prefix, key string) string {
	if n, ok := m.lookup(i, key); ok {
		return n
	}
	return prefix + key
}

func (p *Plugin) stateTensors(b *envelope.Builder, stage string, st []StateGroup) error {
	for i, g := range st {
		switch {
		case g.Steps == 0:
			b.Float64(prefixed(&p.names.state, i, abi.StatePrefix, g.Key), []int64{int64(len(g.Values))}, g.Values)
		case g.Steps > 0 && len(g.Values)%g.Steps == 0:
			b.Float64(prefixed(&p.names.state, i, abi.StatePrefix, g.Key), []int64{int64(g.Steps), int64(len(g.Values) / g.Steps)}, g.Values)
		default:
			return &GuestError{Plugin: p.name, Stage: stage, Code: abi.CodeInvalidState, Field: "state." + g.Key,
				Message: fmt.Sprintf("%d values do not form %d equal timesteps", len(g.Values), g.Steps)}
		}
	}
	return nil
}

func attrs(b *envelope.Builder, id, emb, dtype string) {
	if id != "" {
		b.Attr(abi.AttrRequestID, id)
	}
	if emb != "" {
		b.Attr(abi.AttrEmbodiment, emb)
	}
	if dtype != "" {
		b.Attr(abi.AttrStateDType, dtype)
	}
}

// Pre validates the observation's non-pixel parts and returns the
// normalised, padded state. Errors: *GuestError (the request is invalid),
// ErrPoolExhausted, ErrClosed, or *CallError (ErrTimeout, ErrTrap,
// ErrBadPointer).
func (p *Plugin) Pre(ctx context.Context, in *PreInput) (*PreOutput, error) {
	out := &PreOutput{}
	if err := p.PreInto(ctx, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// PreInto is Pre writing the result into out, reusing out.State's
// capacity: a caller that keeps one PreOutput per worker allocates nothing
// per request. On error out is unspecified.
func (p *Plugin) PreInto(ctx context.Context, in *PreInput, out *PreOutput) error {
	b := builders.Get().(*envelope.Builder)
	defer builders.Put(b)
	b.Reset()
	b.PadAttrs(abi.AttrsPad)
	attrs(b, in.RequestID, in.Embodiment, in.StateDType)
	b.Attr(abi.AttrInstruction, in.Instruction)
	for i, c := range in.Cameras {
		ch := c.Channels
		if ch == 0 {
			ch = 3
		}
		b.Descriptor(prefixed(&p.names.video, i, abi.VideoPrefix, c.Key), envelope.Uint8, []int64{int64(c.Frames), int64(c.Height), int64(c.Width), int64(ch)})
	}
	if err := p.stateTensors(b, "pre", in.State); err != nil {
		return err
	}
	if err := b.Err(); err != nil {
		return &GuestError{Plugin: p.name, Stage: "pre", Code: "request_too_large", Message: err.Error()}
	}
	return p.invoke(ctx, "pre", b, func(e *envelope.Envelope) error {
		t := e.Tensor(abi.TensorState)
		if t == nil {
			return fmt.Errorf("pre result has no %q tensor", abi.TensorState)
		}
		v, err := t.Float32s()
		if err != nil {
			return err
		}
		if len(v) != p.desc.MaxStateDim {
			return fmt.Errorf("pre result state has %d values, describe says max_state_dim %d", len(v), p.desc.MaxStateDim)
		}
		out.State = append(out.State[:0], v...)
		return nil
	})
}

// Post decodes a normalised action chunk into physical actions. Errors as
// for Pre.
func (p *Plugin) Post(ctx context.Context, in *PostInput) (*PostOutput, error) {
	out := &PostOutput{}
	if err := p.PostInto(ctx, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// PostInto is Post writing the result into out, reusing its Actions and
// their values' storage: a caller that keeps one PostOutput per worker
// allocates nothing per request. The previous result's Values are
// overwritten. On error out is unspecified.
func (p *Plugin) PostInto(ctx context.Context, in *PostInput, out *PostOutput) error {
	if in.Horizon*in.Dim != len(in.ActionPred) {
		return &GuestError{Plugin: p.name, Stage: "post", Code: abi.CodeInvalidAction, Field: abi.TensorActionPred,
			Message: fmt.Sprintf("%d values for shape [%d, %d]", len(in.ActionPred), in.Horizon, in.Dim)}
	}
	b := builders.Get().(*envelope.Builder)
	defer builders.Put(b)
	b.Reset()
	b.PadAttrs(abi.AttrsPad)
	attrs(b, in.RequestID, in.Embodiment, in.StateDType)
	b.Float32(abi.TensorActionPred, []int64{int64(in.Horizon), int64(in.Dim)}, in.ActionPred)
	if err := p.stateTensors(b, "post", in.State); err != nil {
		return err
	}
	if err := b.Err(); err != nil {
		return &GuestError{Plugin: p.name, Stage: "post", Code: "request_too_large", Message: err.Error()}
	}
	return p.invoke(ctx, "post", b, func(e *envelope.Envelope) error {
		total := 0
		for i := range e.Tensors {
			total += len(e.Tensors[i].Data) / 4
		}
		vals := out.vals[:0] // one allocation for all groups, kept by out
		if cap(vals) < total {
			vals = make([]float32, 0, total)
		}
		out.Actions = out.Actions[:0]
		for i := range e.Tensors {
			t := &e.Tensors[i]
			if !strings.HasPrefix(t.Name, abi.ActionPrefix) || len(t.Dims) != 2 {
				return fmt.Errorf("post result tensor %q %v: want action.<key> [H, D]", t.Name, t.Dims)
			}
			v, err := t.Float32s()
			if err != nil {
				return err
			}
			start := len(vals)
			vals = append(vals, v...)
			key, ok := p.names.action.lookup(i, t.Name) // t.Name aliases guest memory
			if !ok {
				key = strings.Clone(t.Name[len(abi.ActionPrefix):])
			}
			if out.Actions == nil {
				out.Actions = make([]ActionGroup, 0, len(e.Tensors))
			}
			out.Actions = append(out.Actions, ActionGroup{
				Key: key, Horizon: int(t.Dims[0]), Dim: int(t.Dims[1]),
				Values: vals[start:len(vals):len(vals)],
			})
		}
		out.vals = vals
		return nil
	})
}
