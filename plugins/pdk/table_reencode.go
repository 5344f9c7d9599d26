package pdk

import "github.com/gr00tgw/gr00tgw/plugins/abi"

// Reencode implements Reencoder for a Table: absolute groups keep their
// normalised values clipped to [−1, 1] (their statistics do not depend on
// the row, so a clipped value decodes to the same physical action at any
// position: an identity up to clipping); a relative group's row i becomes
// normalise_i(prev_state + unnormalise_{Shift+i}(x) − state) with the
// per-step relative_action bounds, the states rounded to float32 for a
// float32 state_dtype as Post rounds them; padded columns are copied.
func (t *Table) Reencode(in *ReencodeInput) ([]float32, error) {
	d := &t.desc
	if !t.ready {
		return nil, Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	h, cols := d.ActionHorizon, len(t.alo)
	if in.Horizon < h || in.Dim < cols || len(in.ActionPred) != in.Horizon*in.Dim {
		return nil, Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "shape [%d, %d] (%d values), want at least [%d, %d]", in.Horizon, in.Dim, len(in.ActionPred), h, cols)
	}
	if in.Shift < 0 || in.Shift >= h {
		return nil, Errorf(abi.CodeInvalidAction, abi.AttrShift, "%d is outside 0..%d", in.Shift, h-1)
	}
	if in.StateDType != "float32" && in.StateDType != "float64" {
		return nil, Errorf(abi.CodeInvalidState, "state_dtype", "%q, want float32 or float64", in.StateDType)
	}
	f32 := in.StateDType == "float32"
	n, dim := h-in.Shift, in.Dim
	if cap(t.re) < n*dim {
		t.re = make([]float32, n*dim)
	}
	out := t.re[:n*dim]
	copy(out, in.ActionPred[in.Shift*dim:(in.Shift+n)*dim]) // padded columns (and every column, overwritten below)
	col := 0
	for gi, a := range d.Actions {
		si := t.relState[gi]
		if si < 0 {
			for i := 0; i < n; i++ {
				for j := 0; j < a.Dim; j++ {
					out[i*dim+col+j] = clip32(out[i*dim+col+j])
				}
			}
			col += a.Dim
			continue
		}
		key := d.State[si].Key
		prev, err := lastStep(in.PrevState, key, a.Dim, "prev_state.", f32)
		if err != nil {
			return nil, err
		}
		cur, err := lastStep(in.State, key, a.Dim, "state.", f32)
		if err != nil {
			return nil, err
		}
		lo, hi := t.rlo[gi], t.rhi[gi]
		for i := 0; i < n; i++ {
			k := in.Shift + i
			for j := 0; j < a.Dim; j++ {
				abs := prev[j] + UnnormalizeMinMax(in.ActionPred[k*dim+col+j], lo[k*a.Dim+j], hi[k*a.Dim+j])
				out[i*dim+col+j] = EncodeMinMax(abs-cur[j], lo[i*a.Dim+j], hi[i*a.Dim+j])
			}
		}
		col += a.Dim
	}
	return out, nil
}

// lastStep returns the last timestep of state group key (at least dim
// finite values), rounded to float32 when f32; field prefixes the error.
func lastStep(st []StateInput, key string, dim int, field string, f32 bool) ([]float64, error) {
	s := findState(st, key)
	if s == nil || len(s.Values) < dim || !AllFinite(s.Values) {
		return nil, Errorf(abi.CodeInvalidState, field+key, "reencode needs %d finite values", dim)
	}
	v := append([]float64(nil), s.Values[len(s.Values)-dim:]...)
	if f32 {
		for i := range v {
			v[i] = float64(float32(v[i]))
		}
	}
	return v, nil
}

var _ Reencoder = (*Table)(nil)
