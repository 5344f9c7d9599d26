package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// refSteps is the chunk decode written with the pdk helpers
// (pdk.UnnormalizeMinMax with (min, max), refStep).
func refSteps(d *Droid, pred []float32, dim int, rs *pdk.Mat3, ts *[3]float64, js *[7]float64, eef, grip, joint []float32) {
	un := pdk.UnnormalizeMinMax
	for k := 0; k < Horizon; k++ {
		row := pred[k*dim:]
		var rel [9]float64
		for j := range rel {
			rel[j] = un(row[j], d.relEEFMin[k*9+j], d.relEEFMax[k*9+j])
		}
		refStep(rs, ts, &rel, eef[k*9:k*9+9])
		grip[k] = float32(un(row[9], d.gripLo, d.gripHi))
		for j := 0; j < 7; j++ {
			joint[k*7+j] = float32(js[j] + un(row[10+j], d.relJointMin[k*7+j], d.relJointMax[k*7+j]))
		}
	}
}

// TestStepsChunkMatchesHelpers: the hand-unrolled chunk decode (precomputed
// half-scales, clipping skipped for in-range chunks) is bit-identical to
// the helper-based one, for in-range chunks and for chunks with values
// outside [−1, 1], NaN, ±Inf and −0.
func TestStepsChunkMatchesHelpers(t *testing.T) {
	c := loadCaseA(t)
	d := newInitialised(t, c)
	rng := rand.New(rand.NewPCG(5, 6))
	const dim = 132
	var eef [Horizon * 9]float32
	var grip [Horizon]float32
	var joint [Horizon * 7]float32
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), -1, 1, 1.5, -3}
	for trial := range 200 {
		pred := make([]float32, Horizon*dim)
		for i := range pred {
			pred[i] = float32(rng.Float64()*2 - 1)
		}
		if trial%2 == 1 {
			for range 1 + rng.IntN(20) {
				pred[rng.IntN(Horizon)*dim+rng.IntN(17)] = special[rng.IntN(len(special))]
			}
		}
		var st [9]float64
		for j := range st {
			st[j] = rng.NormFloat64()
		}
		rs := pdk.Rot6DToMat64(st[3:])
		rs = pdk.QuatRoundTrip(&rs)
		ts := [3]float64{st[0], st[1], st[2]}
		var js [7]float64
		for j := range js {
			js[j] = rng.NormFloat64()
		}
		d.steps(pred, dim, &rs, &ts, &js)
		refSteps(d, pred, dim, &rs, &ts, &js, eef[:], grip[:], joint[:])
		same := func(name string, got, want []float32) {
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("trial %d: %s[%d] = %v, helpers give %v", trial, name, i, got[i], want[i])
				}
			}
		}
		same("eef", d.eef[:], eef[:])
		same("grip", d.grip[:], grip[:])
		same("joint", d.joint[:], joint[:])
	}
}

// TestNorm32MatchesHelper: the unrolled state normalisation is
// bit-identical to pdk.NormalizeMinMax32, with and without clipping, on
// constant dims (hi close to lo) and out-of-range values.
func TestNorm32MatchesHelper(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	d := New()
	for trial := range 2000 {
		var x32 [17]float32
		var x [17]float64
		for i := range d.lo {
			d.lo[i] = rng.NormFloat64()
			d.hi[i] = d.lo[i] + rng.ExpFloat64()
			switch rng.IntN(8) {
			case 0:
				d.hi[i] = d.lo[i]
			case 1:
				d.hi[i] = d.lo[i] * (1 + 1e-7)
			}
			x[i] = d.lo[i] + (d.hi[i]-d.lo[i])*(rng.Float64()*3-1)
			x32[i] = float32(x[i])
		}
		clip := trial%2 == 0
		d.setStateBounds(clip)
		var want [17]float32
		pdk.NormalizeMinMax32(want[:], x32[:], d.lo[:], d.hi[:], clip)
		for i := range want {
			if got := d.norm32(i, x[i]); math.Float32bits(got) != math.Float32bits(want[i]) {
				t.Fatalf("trial %d dim %d (clip %v): norm32 = %v, helper %v", trial, i, clip, got, want[i])
			}
		}
	}
}

// TestValidateFastPaths: the branch-free validity checks accept only what
// the one-condition-at-a-time checks accept, on valid inputs and on random
// single-field mutations of them (widths, timesteps, non-finite values,
// order, keys, frame counts, channels, sides, aspect ratios).
func TestValidateFastPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	vals := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, 1e308}
	accepted := 0
	for trial := range 20000 {
		st := []pdk.StateInput{
			{Key: "eef_9d", Dim: 9, Values: vals(9)},
			{Key: "gripper_position", Dim: 1, Values: vals(1)},
			{Key: "joint_position", Dim: 7, Values: vals(7)},
		}
		cams := []pdk.CameraInput{
			{Key: cameras[0], Frames: 2, Height: 180, Width: 320, Channels: 3},
			{Key: cameras[1], Frames: 2, Height: 720, Width: 1280, Channels: 3},
		}
		if trial > 0 {
			i := rng.IntN(3)
			c := &cams[rng.IntN(2)]
			switch rng.IntN(12) {
			case 0:
				st[i].Dim++
			case 1:
				st[i].Values = st[i].Values[:len(st[i].Values)-1]
			case 2:
				st[i].Steps = rng.IntN(3)
			case 3:
				st[i].Values[rng.IntN(len(st[i].Values))] = special[rng.IntN(len(special))]
			case 4:
				st[0], st[i] = st[i], st[0]
			case 5:
				st[i].Key = "other"
			case 6:
				st = st[:i]
			case 7:
				c.Frames = rng.IntN(4)
			case 8:
				c.Channels = rng.IntN(5)
			case 9:
				c.Height, c.Width = rng.IntN(5000), rng.IntN(5000)
			case 10:
				c.Width = c.Height * (160 + rng.IntN(40)) / 100
			case 11:
				cams[0], cams[1] = cams[1], cams[0]
			}
		}
		fastS, slowS := validStateFast(st), validateStateSlow(st)
		if fastS && slowS != nil {
			t.Fatalf("trial %d: state fast path accepts what the slow path rejects: %v (%+v)", trial, slowS, st)
		}
		obs := &pdk.Observation{Cameras: cams}
		fastC, slowC := validCamerasFast(cams), validateCamerasSlow(obs)
		if fastC && slowC != nil {
			t.Fatalf("trial %d: camera fast path accepts what the slow path rejects: %v (%+v)", trial, slowC, cams)
		}
		if trial == 0 && !(fastS && fastC) {
			t.Fatal("a valid request must take both fast paths")
		}
		if fastS && fastC {
			accepted++
		}
	}
	t.Logf("%d of 20000 inputs took both fast paths", accepted)
}
