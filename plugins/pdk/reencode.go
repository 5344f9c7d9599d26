package pdk

import (
	"slices"
	"strconv"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

// Reencoder is implemented by a plugin that can re-express a previous
// action chunk against the current state (the "reencode" feature, ABI.md
// §11), for real-time chunking's `rtc.mode: reencode` (issue 27 point 5).
// The PDK lists abi.FeatureReencode in the plugin's Description and serves
// gw_reencode when the registered plugin implements it.
type Reencoder interface {
	// Reencode returns the chunk the model would have produced for the
	// current state at the new row positions: row i (0 ≤ i < H − Shift,
	// H = Description.ActionHorizon) holds the physical action of the
	// previous chunk's row Shift+i — decoded as Post would decode it with
	// PrevState — re-expressed against State (relative groups) and
	// normalised with step i's statistics; absolute groups keep their
	// normalised value clipped to [−1, 1] (what Post reads of it); padded
	// columns keep the previous row's values. The result is row-major
	// [H − Shift, Dim] and may be reused by the plugin on the next call.
	Reencode(in *ReencodeInput) ([]float32, error)
}

// ReencodeInput is the input of Reencode.
type ReencodeInput struct {
	RequestID  string
	Embodiment string
	StateDType string
	// ActionPred is the previous chunk as the model produced it,
	// normalised, row-major [Horizon, Dim] (Horizon ≥ the embodiment's).
	ActionPred   []float32
	Horizon, Dim int
	// Shift is the number of the previous chunk's rows executed since it
	// was produced: its row Shift becomes row 0.
	Shift int
	// PrevState is the raw state of the request that produced ActionPred;
	// State is the current request's.
	PrevState, State []StateInput
}

// Reencode runs gw_reencode on an input envelope. A plugin that does not
// implement Reencoder gets a plugin_error result.
func (r *Runner) Reencode(in []byte) []byte {
	re, ok := r.p.(Reencoder)
	if !ok {
		return r.fail(abi.StatusPluginError, Errorf(abi.CodePluginError, "", "plugin does not implement reencode"))
	}
	d := &r.decRe
	if err := d.Decode(in); err != nil {
		return r.fail(abi.StatusPluginError, &Error{Code: abi.CodePluginError, Message: err.Error()})
	}
	x := &r.re
	*x = ReencodeInput{PrevState: x.PrevState[:0], State: x.State[:0]}
	x.RequestID, x.Embodiment, _, x.StateDType = requestAttrs(d)
	shift, ok := d.Attr(abi.AttrShift)
	if !ok {
		return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidAction, abi.AttrShift, "missing"))
	}
	n, err := strconv.Atoi(shift)
	if err != nil || n < 0 {
		return r.fail(abi.StatusInvalid, Errorf(abi.CodeInvalidAction, abi.AttrShift, "%q is not a row count", shift))
	}
	x.Shift = n
	if res := r.actionInputs(d, &x.ActionPred, &x.Horizon, &x.Dim, &x.State, &x.PrevState); res != nil {
		return res
	}
	out, err := re.Reencode(x)
	if err != nil {
		return r.fail(asError(err))
	}
	if x.Dim <= 0 || len(out)%x.Dim != 0 {
		return r.fail(abi.StatusPluginError, Errorf(abi.CodePluginError, abi.TensorActionPred, "reencode returned %d values, not rows of %d", len(out), x.Dim))
	}
	r.b.Reset()
	r.dims = append(r.dims[:0], int64(len(out)/x.Dim), int64(x.Dim))
	r.b.Float32(abi.TensorActionPred, r.dims, out)
	return r.okEnvelope()
}

// prevStateInput is stateInput for a prev_state.<group> tensor: the
// group's Key without the prefix; errors name the field prev_state.<key>.
func prevStateInput(t *envelope.Tensor) (StateInput, *Error) {
	tt := *t
	tt.Name = abi.StatePrefix + t.Name[len(abi.PrevStatePrefix):]
	s, err := stateInput(&tt)
	if err != nil {
		err.Field = "prev_" + err.Field
	}
	return s, err
}

// withFeatures returns d with abi.FeatureReencode listed when p implements
// Reencoder (once).
func withFeatures(p Plugin, d abi.Description) abi.Description {
	if _, ok := p.(Reencoder); ok && !slices.Contains(d.Features, abi.FeatureReencode) {
		d.Features = append(slices.Clip(d.Features), abi.FeatureReencode)
	}
	return d
}

// EncodeMinMax is the inverse of UnnormalizeMinMax for Reencode: the
// normalised value 2·(v − lo)/(hi − lo) − 1, computed in float64 and
// rounded to float32 once, not clipped (Post clips what it reads). A dim
// with hi = lo, which UnnormalizeMinMax maps to lo whatever x, gives 0.
func EncodeMinMax(v, lo, hi float64) float32 {
	if hi == lo {
		return 0
	}
	return float32(2*((v-lo)/(hi-lo)) - 1)
}

// ClipUnit returns x clipped to [−1, 1], as UnnormalizeMinMax and Post
// read a normalised value (NaN passes through).
func ClipUnit(x float32) float32 { return clip32(x) }
