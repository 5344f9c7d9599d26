//go:build wasip1 && gwbench

package main

import (
	"math"

	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// Breakdown exports (build tag gwbench, see breakdown_bench_test.go): the
// chunk decode alone, current and previous implementation, on a fixed
// chunk, for A/B timing inside one module.

var (
	benchPred = func() []float32 {
		p := make([]float32, Horizon*132)
		for i := range p {
			p[i] = float32(i%97)/35 - 1.38 // a third outside [-1, 1], like caseA
		}
		return p
	}()
	benchRS = pdk.Mat3{0, -1, 0, 1, 0, 0, 0, 0, 1}
	benchTS = [3]float64{0.4, 0.1, 0.3}
	benchJS = [7]float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}
)

//go:wasmexport gw_bench_steps
func benchSteps() { plugin.steps(benchPred, 132, &benchRS, &benchTS, &benchJS) }

//go:wasmexport gw_bench_steps_ref
func benchStepsRef() { plugin.stepsRef(benchPred, 132, &benchRS, &benchTS, &benchJS) }

// stepsRef is steps as it was before the half-scale table and the range
// pre-check: un() per value with a select-based clip.
func (d *Droid) stepsRef(pred []float32, dim int, rs *pdk.Mat3, ts *[3]float64, js *[7]float64) {
	for k := 0; k < Horizon; k++ {
		row := (*[17]float32)(pred[k*dim:])
		b := (*[34]float64)(d.bounds[k*34:])
		rel := [9]float64{
			unRef(row[0], b[0], b[1]), unRef(row[1], b[2], b[3]), unRef(row[2], b[4], b[5]),
			unRef(row[3], b[6], b[7]), unRef(row[4], b[8], b[9]), unRef(row[5], b[10], b[11]),
			unRef(row[6], b[12], b[13]), unRef(row[7], b[14], b[15]), unRef(row[8], b[16], b[17]),
		}
		eefStep((*[9]float64)(rs), ts, &rel, (*[9]float32)(d.eef[k*9:]))
		d.grip[k] = float32(unRef(row[9], b[18], b[19]))
		jo := (*[7]float32)(d.joint[k*7:])
		for j := range jo {
			jo[j] = float32(js[j] + unRef(row[10+j], b[20+2*j], b[21+2*j]))
		}
	}
}

func unRef(x float32, lo, hs float64) float64 {
	t := float32(clip1(x) + 1)
	return float64(float64(t)*hs) + lo
}

var benchIn = &pdk.PostInput{
	Embodiment: Tag, StateDType: "float32", ActionPred: benchPred, Horizon: Horizon, Dim: 132,
	State: []pdk.StateInput{
		{Key: "eef_9d", Dim: 9, Values: []float64{0.4, 0.1, 0.3, 0, -1, 0, 1, 0, 0}},
		{Key: "gripper_position", Dim: 1, Values: []float64{0.5}},
		{Key: "joint_position", Dim: 7, Values: []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}},
	},
}

//go:wasmexport gw_bench_post_full
func benchPostFull() {
	if _, err := plugin.Post(benchIn); err != nil {
		panic(err)
	}
}

//go:wasmexport gw_bench_post_validate
func benchPostValidate() {
	if checkDType(benchIn.StateDType) != nil || validateState(benchIn.State) != nil {
		panic("invalid")
	}
}

//go:wasmexport gw_bench_post_frame
func benchPostFrame() {
	var s32 [9]float32
	for i := range s32 {
		s32[i] = float32(benchIn.State[0].Values[i])
	}
	rs := pdk.Rot6DToMat32(s32[3:])
	benchRS = pdk.QuatRoundTrip(&rs)
}

// clip1 is the previous float clip (a select on the bits, which Go on
// wasm moves through memory).
func clip1(x float32) float32 {
	b := math.Float32bits(x)
	if x < -1 {
		b = 0xBF800000 // -1
	}
	if x > 1 {
		b = 0x3F800000 // 1
	}
	return math.Float32frombits(b)
}

// eefStep is the previous implementation's step (a call per step, rel
// in memory). It composes one step: rs/ts are the state rotation and translation,
// rel the un-normalised relative action (xyz, rot6d); out receives xyz and
// the first two rows of rs·Rot6D(rel) as float32.
func eefStep(rs *[9]float64, ts *[3]float64, rel *[9]float64, out *[9]float32) {
	// Gram-Schmidt (pdk.Rot6DToMat64): rows u, v, w = u × v.
	a0, a1, a2 := rel[3], rel[4], rel[5]
	na := math.Sqrt(float64(float64(a0*a0)+float64(a1*a1)) + float64(a2*a2))
	u0, u1, u2 := a0/na, a1/na, a2/na
	b0, b1, b2 := rel[6], rel[7], rel[8]
	dot := float64(float64(u0*b0)+float64(u1*b1)) + float64(u2*b2)
	v0, v1, v2 := b0-float64(dot*u0), b1-float64(dot*u1), b2-float64(dot*u2)
	nb := math.Sqrt(float64(float64(v0*v0)+float64(v1*v1)) + float64(v2*v2))
	v0, v1, v2 = v0/nb, v1/nb, v2/nb
	w0 := float64(u1*v2) - float64(u2*v1)
	w1 := float64(u2*v0) - float64(u0*v2)
	w2 := float64(u0*v1) - float64(u1*v0)

	// Rows 0 and 1 of rs·[u; v; w] (Mat3.Mul order) and ta = rs·xyz + ts
	// (Mat3.Apply order).
	x, y, z := rel[0], rel[1], rel[2]
	s0, s1, s2 := rs[0], rs[1], rs[2]
	out[0] = float32((float64(float64(s0*x)+float64(s1*y)) + float64(s2*z)) + ts[0])
	out[3] = float32(float64(float64(s0*u0)+float64(s1*v0)) + float64(s2*w0))
	out[4] = float32(float64(float64(s0*u1)+float64(s1*v1)) + float64(s2*w1))
	out[5] = float32(float64(float64(s0*u2)+float64(s1*v2)) + float64(s2*w2))
	s0, s1, s2 = rs[3], rs[4], rs[5]
	out[1] = float32((float64(float64(s0*x)+float64(s1*y)) + float64(s2*z)) + ts[1])
	out[6] = float32(float64(float64(s0*u0)+float64(s1*v0)) + float64(s2*w0))
	out[7] = float32(float64(float64(s0*u1)+float64(s1*v1)) + float64(s2*w1))
	out[8] = float32(float64(float64(s0*u2)+float64(s1*v2)) + float64(s2*w2))
	s0, s1, s2 = rs[6], rs[7], rs[8]
	out[2] = float32((float64(float64(s0*x)+float64(s1*y)) + float64(s2*z)) + ts[2])
}
