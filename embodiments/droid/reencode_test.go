package main

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// decoded is one Post result, copied out of the plugin's reused buffers.
type decoded struct{ eef, grip, joint []float32 }

func decode(tb testing.TB, d *Droid, pred []float32, st map[string][]float64, dtype string) decoded {
	tb.Helper()
	in := &pdk.PostInput{Embodiment: Tag, StateDType: dtype, ActionPred: pred, Horizon: len(pred) / 132, Dim: 132}
	for _, g := range groups {
		in.State = append(in.State, pdk.StateInput{Key: g.key, Dim: g.dim, Values: st[g.key]})
	}
	out, err := d.Post(in)
	require.NoError(tb, err)
	return decoded{
		eef:   append([]float32(nil), out.Groups[0].Values...),
		grip:  append([]float32(nil), out.Groups[1].Values...),
		joint: append([]float32(nil), out.Groups[2].Values...),
	}
}

func stateInputs(st map[string][]float64) []pdk.StateInput {
	var s []pdk.StateInput
	for _, g := range groups {
		s = append(s, pdk.StateInput{Key: g.key, Dim: g.dim, Values: st[g.key]})
	}
	return s
}

// reached is the state the robot is in after executing rows 0..e−1 of a
// decoded chunk (e ≥ 1): the last executed row's absolute pose, gripper
// and joints.
func reached(a decoded, e int) map[string][]float64 {
	f := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	return map[string][]float64{
		"eef_9d":           f(a.eef[(e-1)*9 : e*9]),
		"gripper_position": f(a.grip[e-1 : e]),
		"joint_position":   f(a.joint[(e-1)*7 : e*7]),
	}
}

// smoothChunk returns a normalised chunk [40, 132] whose physical
// trajectory, decoded against st, is a constant-velocity motion from the
// state: eef translation (k+1)·v in the state frame and rotation by
// (k+1)·ω about a fixed axis, joints (k+1)·δ, the gripper a slow wave
// (one value beyond 1, which Post clips) — inside the checkpoint's
// per-step relative_action bounds, as a trained model's chunk is. The
// encoding here is the test's own (rel = T_state⁻¹·T, min/max
// normalisation); TestReencodeProperty checks that Post decodes it back.
func smoothChunk(d *Droid) []float32 {
	v := [3]float64{0.003, -0.002, 0.0025}
	axis := [3]float64{0.3, -0.5, 0.8}
	na := math.Sqrt(axis[0]*axis[0] + axis[1]*axis[1] + axis[2]*axis[2])
	const omega = 0.004
	delta := [7]float64{0.006, -0.003, 0.0048, -0.006, 0.0018, 0.0054, -0.0042}
	norm := func(x, lo, hi float64) float32 { return float32(2*(x-lo)/(hi-lo) - 1) }
	out := make([]float32, 40*132)
	for k := 0; k < 40; k++ {
		row := out[k*132 : (k+1)*132]
		s := float64(k + 1)
		// Rodrigues: R = I + sinθ K + (1 − cosθ) K².
		th := s * omega
		x, y, z := axis[0]/na, axis[1]/na, axis[2]/na
		c, sn, t := math.Cos(th), math.Sin(th), 1-math.Cos(th)
		rRel := pdk.Mat3{t*x*x + c, t*x*y - sn*z, t*x*z + sn*y, t*x*y + sn*z, t*y*y + c, t*y*z - sn*x, t*x*z - sn*y, t*y*z + sn*x, t*z*z + c}
		// The physical pose is T_state·(s·v, R_rel): relative to the
		// state it is (s·v, R_rel), encoded directly.
		rel := [9]float64{s * v[0], s * v[1], s * v[2], rRel[0], rRel[1], rRel[2], rRel[3], rRel[4], rRel[5]}
		for j := range rel {
			row[j] = norm(rel[j], d.relEEFMin[k*9+j], d.relEEFMax[k*9+j])
		}
		row[9] = float32(0.8 * math.Sin(float64(k)/5))
		if k == 7 {
			row[9] = 1.7
		}
		for j := 0; j < 7; j++ {
			row[10+j] = norm(s*delta[j], d.relJointMin[k*7+j], d.relJointMax[k*7+j])
		}
		for j := 17; j < 132; j++ { // padded columns: arbitrary model values
			row[j] = float32(math.Sin(float64(k*132 + j)))
		}
	}
	return out
}

// TestReencodeProperty is issue 27 point 5's property: when the new state
// is the state the robot reaches along the previous chunk, the re-encoded
// rows decode (Post, against the new state) to the same physical actions
// as the previous chunk's corresponding rows, max|d| ≤ 1e-5. The chunk is
// smoothChunk's in-distribution motion (the tiny checkpoint's own output
// is random: its rotations fall outside the per-step bounds, where Post
// clips and no re-encoding can be exact); every re-encoded value of it
// stays within [−1, 1], which the test asserts, so nothing is clipped.
func TestReencodeProperty(t *testing.T) {
	c := loadCaseA(t)
	d := newInitialised(t, c)
	for _, dtype := range []string{"float32", "float64"} {
		pred := smoothChunk(d)
		old := decode(t, d, pred, c.state, dtype)
		for _, shift := range []int{0, 1, 3, 8, 15, 25, 39} {
			t.Run(fmt.Sprintf("%s/shift=%d", dtype, shift), func(t *testing.T) {
				now := c.state
				if shift > 0 {
					now = reached(old, shift)
				}
				out, err := d.Reencode(&pdk.ReencodeInput{Embodiment: Tag, StateDType: dtype,
					ActionPred: pred, Horizon: 40, Dim: 132, Shift: shift,
					PrevState: stateInputs(c.state), State: stateInputs(now)})
				require.NoError(t, err)
				n := Horizon - shift
				require.Len(t, out, n*132)
				for i := 0; i < n; i++ {
					require.Equal(t, pred[(shift+i)*132+17:(shift+i+1)*132], out[i*132+17:(i+1)*132], "row %d: padded columns", i)
					for j := 0; j < 17; j++ {
						if v := out[i*132+j]; !(v >= -1 && v <= 1) {
							t.Errorf("row %d col %d re-encoded to %v: outside [-1, 1]", i, j, v)
						}
					}
				}
				pad := make([]float32, 40*132) // Post decodes 40 rows; rows ≥ n are not compared
				copy(pad, out)
				got := decode(t, d, pad, now, dtype)
				maxd := 0.0
				cmp := func(name string, a, b []float32, w int) {
					for i := 0; i < n*w; i++ {
						diff := math.Abs(float64(a[i]) - float64(b[shift*w+i]))
						maxd = math.Max(maxd, diff)
						if diff > 1e-5 {
							t.Errorf("%s row %d col %d: %v, previous chunk's row %d: %v (|d| %.3g)", name, i/w, i%w, a[i], shift+i/w, b[shift*w+i], diff)
						}
					}
				}
				cmp("eef_9d", got.eef, old.eef, 9)
				cmp("gripper_position", got.grip, old.grip, 1)
				cmp("joint_position", got.joint, old.joint, 7)
				t.Logf("max|d| = %.3g", maxd)
			})
		}
	}
}

// TestSmoothChunkDecodes checks the test's own encoder: Post decodes
// smoothChunk to the intended motion (to float32 precision).
func TestSmoothChunkDecodes(t *testing.T) {
	c := loadCaseA(t)
	d := newInitialised(t, c)
	pred := smoothChunk(d)
	got := decode(t, d, pred, c.state, "float32")
	js := c.state["joint_position"]
	for k := 0; k < 40; k++ {
		for j, dl := range [7]float64{0.006, -0.003, 0.0048, -0.006, 0.0018, 0.0054, -0.0042} {
			want := float64(float32(js[j])) + float64(k+1)*dl
			require.InDelta(t, want, float64(got.joint[k*7+j]), 2e-6, "joint row %d col %d", k, j)
		}
	}
	require.InDelta(t, d.gripHi, float64(got.grip[7]), 1e-6, "row 7's gripper 1.7 decodes clipped to 1, the upper bound")
	// The eef translation moves by v per row in the state frame: rows
	// k and k+1 differ by R_state·v, the same for every k.
	for k := 0; k+2 < 40; k++ {
		for j := 0; j < 3; j++ {
			d1 := float64(got.eef[(k+1)*9+j] - got.eef[k*9+j])
			d2 := float64(got.eef[(k+2)*9+j] - got.eef[(k+1)*9+j])
			require.InDelta(t, d1, d2, 1e-6, "eef row %d col %d: not a constant velocity", k, j)
		}
	}
}

func TestReencodeErrors(t *testing.T) {
	c := loadCaseA(t)
	d := newInitialised(t, c)
	good := func() *pdk.ReencodeInput {
		return &pdk.ReencodeInput{Embodiment: Tag, StateDType: "float32", ActionPred: c.actionPred, Horizon: 40, Dim: 132,
			Shift: 2, PrevState: stateInputs(c.state), State: stateInputs(c.state)}
	}
	for _, tc := range []struct {
		name   string
		edit   func(in *pdk.ReencodeInput)
		field  string
		substr string
	}{
		{"shift negative", func(in *pdk.ReencodeInput) { in.Shift = -1 }, abi.AttrShift, "-1 is outside 0..39"},
		{"shift at horizon", func(in *pdk.ReencodeInput) { in.Shift = 40 }, abi.AttrShift, "40 is outside 0..39"},
		{"short chunk", func(in *pdk.ReencodeInput) { in.Horizon, in.ActionPred = 16, c.actionPred[:16*132] }, abi.TensorActionPred, "want at least [40, 17]"},
		{"bad dtype", func(in *pdk.ReencodeInput) { in.StateDType = "int8" }, "state_dtype", "int8"},
		{"prev state missing a group", func(in *pdk.ReencodeInput) { in.PrevState = in.PrevState[:2] }, "prev_state.joint_position", "missing"},
		{"state wrong width", func(in *pdk.ReencodeInput) { in.State[0].Values = in.State[0].Values[:8]; in.State[0].Dim = 8 }, "state.eef_9d", "expected 9 values"},
		{"degenerate prev rotation", func(in *pdk.ReencodeInput) {
			in.PrevState[0].Values = []float64{0, 0, 0, 0, 0, 0, 0, 0, 0}
		}, "prev_state.eef_9d", "degenerate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := good()
			tc.edit(in)
			_, err := d.Reencode(in)
			var pe *pdk.Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.field, pe.Field)
			require.Contains(t, pe.Message, tc.substr)
		})
	}
}

// TestReencodeWasm runs gw_reencode of the real droid.wasm through the host
// and checks it bit for bit against the native plugin.
func TestReencodeWasm(t *testing.T) {
	c := loadCaseA(t)
	d := newInitialised(t, c)
	p := openWasm(t)
	require.True(t, p.CanReencode())
	old := decode(t, d, c.actionPred, c.state, "float32")
	now := reached(old, 10)
	var ps, ns []plugins.StateGroup
	for _, g := range groups {
		ps = append(ps, plugins.StateGroup{Key: g.key, Values: c.state[g.key]})
		ns = append(ns, plugins.StateGroup{Key: g.key, Values: now[g.key]})
	}
	got, err := p.Reencode(context.Background(), &plugins.ReencodeInput{Embodiment: Tag, ActionPred: c.actionPred, Rows: 40, Dim: 132,
		Shift: 10, PrevState: ps, State: ns})
	require.NoError(t, err)
	want, err := d.Reencode(&pdk.ReencodeInput{Embodiment: Tag, StateDType: "float32", ActionPred: c.actionPred, Horizon: 40, Dim: 132,
		Shift: 10, PrevState: stateInputs(c.state), State: stateInputs(now)})
	require.NoError(t, err)
	require.Equal(t, 30, got.Rows)
	require.Equal(t, 132, got.Dim)
	require.Equal(t, want, got.ActionPred)

	// The host refuses a shift outside 0..H−1 before calling the guest.
	_, err = p.Reencode(context.Background(), &plugins.ReencodeInput{ActionPred: c.actionPred, Rows: 40, Dim: 132, Shift: 40, PrevState: ps, State: ns})
	var ge *plugins.GuestError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, abi.AttrShift, ge.Field)
	// A guest error names the field.
	_, err = p.Reencode(context.Background(), &plugins.ReencodeInput{ActionPred: c.actionPred, Rows: 40, Dim: 132, Shift: 1, PrevState: ps[:1], State: ns})
	require.ErrorAs(t, err, &ge)
	require.Equal(t, "prev_state.gripper_position", ge.Field)
}
