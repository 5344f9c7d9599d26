package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// refStep is the helper-based composition eefStep replaces.
func refStep(rs *pdk.Mat3, ts *[3]float64, rel *[9]float64, out []float32) {
	rr := pdk.Rot6DToMat64(rel[3:])
	rr = pdk.QuatRoundTrip(&rr)
	ra := rs.Mul(&rr)
	ra = pdk.QuatRoundTrip(&ra)
	ta := rs.Apply([3]float64{rel[0], rel[1], rel[2]})
	out[0], out[1], out[2] = float32(ta[0]+ts[0]), float32(ta[1]+ts[1]), float32(ta[2]+ts[2])
	out[3], out[4], out[5] = float32(ra[0]), float32(ra[1]), float32(ra[2])
	out[6], out[7], out[8] = float32(ra[3]), float32(ra[4]), float32(ra[5])
}

// TestEEFStepMatchesHelpers: the scalar step is bit-identical to the pdk
// helpers on random rotations (all four quaternion branches) and on
// degenerate inputs (zero vectors give NaN in both).
func TestEEFStepMatchesHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 200000
	if testing.Short() {
		n = 20000
	}
	var got, want [9]float32
	for i := range n {
		var rel [9]float64
		for j := range rel {
			rel[j] = rng.NormFloat64()
		}
		if i%1000 == 0 { // degenerate rot6d
			rel[3], rel[4], rel[5] = 0, 0, 0
		}
		var st [9]float64
		for j := range st {
			st[j] = rng.NormFloat64()
		}
		rs := pdk.Rot6DToMat64(st[3:])
		rs = pdk.QuatRoundTrip(&rs)
		ts := [3]float64{st[0], st[1], st[2]}
		eefStep((*[9]float64)(&rs), &ts, &rel, got[:])
		refStep(&rs, &ts, &rel, want[:])
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) && !(got[j] != got[j] && want[j] != want[j]) {
				t.Fatalf("case %d: out[%d] = %v, helpers give %v (rel %v)", i, j, got[j], want[j], rel)
			}
		}
	}
}
