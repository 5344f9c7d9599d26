package plugins

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/tetratelabs/wazero/api"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

const stageReencode = "reencode"

// ErrNoReencode is returned by Reencode for a plugin whose description does
// not list the reencode feature.
var ErrNoReencode = errors.New("plugin does not implement reencode")

// reencodeSig is gw_reencode's signature, that of gw_pre and gw_post.
var reencodeSig = sig{[]api.ValueType{i32, i32}, []api.ValueType{i64}}

// checkFeatures checks the optional capabilities d lists against the
// compiled module: a module listing "reencode" must export gw_reencode with
// the signature (i32,i32) -> i64. Unknown features are ignored (a newer
// guest on an older host).
func (p *Plugin) checkFeatures(d *Description) error {
	if !slices.Contains(d.Features, abi.FeatureReencode) {
		return nil
	}
	def, ok := p.compiled.ExportedFunctions()[abi.ExportReencode]
	if !ok {
		return fmt.Errorf("wasm: plugin[%s] describe lists feature %s but the module does not export %s, want %s", p.name, abi.FeatureReencode, abi.ExportReencode, reencodeSig)
	}
	if got := (sig{def.ParamTypes(), def.ResultTypes()}); !sameTypes(got.params, reencodeSig.params) || !sameTypes(got.results, reencodeSig.results) {
		return fmt.Errorf("wasm: plugin[%s] export[%s] has signature %s, want %s", p.name, abi.ExportReencode, got, reencodeSig)
	}
	return nil
}

// CanReencode reports whether the plugin implements Reencode (its
// description lists the reencode feature; ABI.md §11).
func (p *Plugin) CanReencode() bool { return slices.Contains(p.desc.Features, abi.FeatureReencode) }

// ReencodeInput is a previous action chunk to re-express against the
// current state, for real-time chunking's reencode mode (issue 27 point 5).
type ReencodeInput struct {
	RequestID  string
	Embodiment string
	// StateDType is the dtype of both states ("" means float32).
	StateDType string
	// ActionPred is the previous chunk as the model produced it,
	// normalised, row-major [Rows, Dim] (N1.7: [40, 132]); Rows must be at
	// least the embodiment's action_horizon H.
	ActionPred []float32
	Rows, Dim  int
	// Shift (0 ≤ Shift < H) is the number of the previous chunk's rows
	// executed since it was produced: its row Shift becomes row 0.
	Shift int
	// PrevState is the raw state of the request that produced ActionPred,
	// State the current request's.
	PrevState, State []StateGroup
}

// ReencodeOutput is the re-expressed chunk: normalised, row-major
// [Rows, Dim] with Rows = H − Shift; row i is the previous chunk's row
// Shift+i for the current state at position i.
type ReencodeOutput struct {
	ActionPred []float32
	Rows, Dim  int
}

// Reencode calls the plugin's gw_reencode (ABI.md §11). Errors: ErrNoReencode
// (wrapped) for a plugin without the feature, *GuestError for a bad input
// (a shift outside 0..H−1, a missing state group), and those of Pre.
func (p *Plugin) Reencode(ctx context.Context, in *ReencodeInput) (*ReencodeOutput, error) {
	h := p.desc.ActionHorizon
	switch {
	case !p.CanReencode():
		return nil, fmt.Errorf("wasm: plugin[%s]: %w", p.name, ErrNoReencode)
	case in.Rows*in.Dim != len(in.ActionPred) || in.Rows < h || in.Dim != p.desc.MaxActionDim:
		return nil, &GuestError{Plugin: p.name, Stage: stageReencode, Code: abi.CodeInvalidAction, Field: abi.TensorActionPred,
			Message: fmt.Sprintf("%d values for shape [%d, %d], want [≥%d, %d]", len(in.ActionPred), in.Rows, in.Dim, h, p.desc.MaxActionDim)}
	case in.Shift < 0 || in.Shift >= h:
		return nil, &GuestError{Plugin: p.name, Stage: stageReencode, Code: abi.CodeInvalidAction, Field: abi.AttrShift,
			Message: fmt.Sprintf("%d is outside 0..%d", in.Shift, h-1)}
	}
	b := builders.Get().(*envelope.Builder)
	defer builders.Put(b)
	b.Reset()
	attrs(b, in.RequestID, in.Embodiment, in.StateDType)
	b.Attr(abi.AttrShift, strconv.Itoa(in.Shift))
	b.Float32(abi.TensorActionPred, []int64{int64(in.Rows), int64(in.Dim)}, in.ActionPred)
	if err := p.stateTensors(b, stageReencode, in.State); err != nil {
		return nil, err
	}
	for _, g := range in.PrevState {
		if g.Steps < 0 || (g.Steps > 0 && len(g.Values)%g.Steps != 0) {
			return nil, &GuestError{Plugin: p.name, Stage: stageReencode, Code: abi.CodeInvalidState, Field: abi.PrevStatePrefix + g.Key,
				Message: fmt.Sprintf("%d values do not form %d equal timesteps", len(g.Values), g.Steps)}
		}
		dims := []int64{int64(len(g.Values))}
		if g.Steps > 0 {
			dims = []int64{int64(g.Steps), int64(len(g.Values) / g.Steps)}
		}
		b.Float64(abi.PrevStatePrefix+g.Key, dims, g.Values)
	}
	if err := b.Err(); err != nil {
		return nil, &GuestError{Plugin: p.name, Stage: stageReencode, Code: "request_too_large", Message: err.Error()}
	}
	out := &ReencodeOutput{}
	err := p.invoke(ctx, stageReencode, b, func(e *envelope.Envelope) error {
		t := e.Tensor(abi.TensorActionPred)
		if t == nil || len(t.Dims) != 2 {
			return fmt.Errorf("reencode result has no %s [rows, dim] tensor", abi.TensorActionPred)
		}
		rows, dim := int(t.Dims[0]), int(t.Dims[1])
		if rows != h-in.Shift || dim != in.Dim {
			return fmt.Errorf("reencode result %s is [%d, %d], want [%d, %d]", abi.TensorActionPred, rows, dim, h-in.Shift, in.Dim)
		}
		v, err := t.Float32s()
		if err != nil {
			return err
		}
		out.ActionPred, out.Rows, out.Dim = append([]float32(nil), v...), rows, dim
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
