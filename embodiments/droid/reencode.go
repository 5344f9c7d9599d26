package main

import (
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// Reencode implements pdk.Reencoder (issue 27 point 5, `rtc.mode:
// reencode`). Row i of the result is the previous chunk's row k = Shift+i,
// decoded as Post decodes it against PrevState — eef pose T_abs =
// T_prev·T_rel(k), joints prev + rel(k), the gripper absolute — and
// encoded back against State at step i: T_rel' = T_state⁻¹·T_abs (rot6d =
// the first two rows of its rotation), joints abs − state, each
// normalised with step i's relative_action min/max (pdk.EncodeMinMax, not
// clipped); the absolute gripper keeps its normalised value clipped to
// [−1, 1]; columns 17… keep the previous row's values. Both states are
// read as Post reads them (dtype, Gram-Schmidt, quaternion round trip), so
// decoding the result with State gives the previous chunk's physical
// actions again wherever the re-encoded values lie within [−1, 1]. The
// arithmetic is float64 throughout; it is not on the per-request hot path
// of a plain predict, so it is written for clarity, not for the guest's
// dispatch loop.
func (d *Droid) Reencode(in *pdk.ReencodeInput) ([]float32, error) {
	if !d.ready {
		return nil, pdk.Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	if in.Horizon < Horizon || in.Dim < 17 || len(in.ActionPred) != in.Horizon*in.Dim {
		return nil, pdk.Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "shape [%d, %d] (%d values), want at least [%d, 17]", in.Horizon, in.Dim, len(in.ActionPred), Horizon)
	}
	if in.Shift < 0 || in.Shift >= Horizon {
		return nil, pdk.Errorf(abi.CodeInvalidAction, abi.AttrShift, "%d is outside 0..%d", in.Shift, Horizon-1)
	}
	f64, err := isFloat64(in.StateDType)
	if err != nil {
		return nil, err
	}
	pe, _, pj, err := stateGroups(in.PrevState)
	if err != nil {
		return nil, prevField(err)
	}
	if err := checkRotation(pe.Values, f64); err != nil {
		return nil, prevField(err)
	}
	ce, _, cj, err := stateGroups(in.State)
	if err != nil {
		return nil, err
	}
	if err := checkRotation(ce.Values, f64); err != nil {
		return nil, err
	}
	rOld, tOld, jOld := stateFrame(pe.Values, pj.Values, f64)
	rNew, tNew, jNew := stateFrame(ce.Values, cj.Values, f64)
	rNewT := transpose(&rNew)

	n, dim := Horizon-in.Shift, in.Dim
	if cap(d.re) < n*dim {
		d.re = make([]float32, n*dim)
	}
	out := d.re[:n*dim]
	copy(out, in.ActionPred[in.Shift*dim:(in.Shift+n)*dim])
	un := func(x float32, lo, hi float64) float64 { return pdk.UnnormalizeMinMax(x, lo, hi) }
	for i := 0; i < n; i++ {
		k := in.Shift + i
		x := in.ActionPred[k*dim : k*dim+17]
		o := out[i*dim : i*dim+17]
		eLo, eHi := d.relEEFMin[k*9:k*9+9], d.relEEFMax[k*9:k*9+9]
		// Decode row k against the previous state.
		var rel [9]float64
		for j := range rel {
			rel[j] = un(x[j], eLo[j], eHi[j])
		}
		pos := add3(rOld.Apply([3]float64{rel[0], rel[1], rel[2]}), tOld)
		rRel := pdk.Rot6DToMat64(rel[3:9])
		rAbs := rOld.Mul(&rRel)
		// Encode it against the current state at step i.
		p := rNewT.Apply(sub3(pos, tNew))
		r := rNewT.Mul(&rAbs)
		enc := [9]float64{p[0], p[1], p[2], r[0], r[1], r[2], r[3], r[4], r[5]}
		nLo, nHi := d.relEEFMin[i*9:i*9+9], d.relEEFMax[i*9:i*9+9]
		for j, v := range enc {
			o[j] = pdk.EncodeMinMax(v, nLo[j], nHi[j])
		}
		o[9] = pdk.ClipUnit(x[9])
		jLo, jHi := d.relJointMin[k*7:k*7+7], d.relJointMax[k*7:k*7+7]
		nJLo, nJHi := d.relJointMin[i*7:i*7+7], d.relJointMax[i*7:i*7+7]
		for j := 0; j < 7; j++ {
			abs := jOld[j] + un(x[10+j], jLo[j], jHi[j])
			o[10+j] = pdk.EncodeMinMax(abs-jNew[j], nJLo[j], nJHi[j])
		}
	}
	return out, nil
}

var _ pdk.Reencoder = (*Droid)(nil)

// stateFrame returns the reference frame Post composes relative actions
// onto: the eef rotation (Gram-Schmidt of the state's rot6d in its dtype,
// round-tripped through a quaternion) and translation, and the joint
// positions, all as Post reads them.
func stateFrame(eef, joint []float64, f64 bool) (r pdk.Mat3, t [3]float64, j [7]float64) {
	if f64 {
		r = pdk.Rot6DToMat64(eef[3:9])
		t = [3]float64{eef[0], eef[1], eef[2]}
		copy(j[:], joint)
	} else {
		var s [9]float32
		for i := range s {
			s[i] = float32(eef[i])
		}
		r = pdk.Rot6DToMat32(s[3:])
		t = [3]float64{float64(s[0]), float64(s[1]), float64(s[2])}
		for i := range j {
			j[i] = float64(float32(joint[i]))
		}
	}
	return pdk.QuatRoundTrip(&r), t, j
}

// prevField renames a state error's field state.<key> to prev_state.<key>
// (Reencode validates both states with the same code).
func prevField(err error) error {
	if e, ok := err.(*pdk.Error); ok && len(e.Field) > 6 && e.Field[:6] == "state." {
		c := *e
		c.Field = "prev_" + e.Field
		return &c
	}
	return err
}

func transpose(m *pdk.Mat3) pdk.Mat3 {
	return pdk.Mat3{m[0], m[3], m[6], m[1], m[4], m[7], m[2], m[5], m[8]}
}

func add3(a, b [3]float64) [3]float64 { return [3]float64{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }
func sub3(a, b [3]float64) [3]float64 { return [3]float64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }
