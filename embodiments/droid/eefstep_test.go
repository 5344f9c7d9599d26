package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// refStep is the eef composition written with the pdk helpers (without
// the per-step quaternion round trips).
func refStep(rs *pdk.Mat3, ts *[3]float64, rel *[9]float64, out []float32) {
	rr := pdk.Rot6DToMat64(rel[3:])
	ra := rs.Mul(&rr)
	ta := rs.Apply([3]float64{rel[0], rel[1], rel[2]})
	out[0], out[1], out[2] = float32(ta[0]+ts[0]), float32(ta[1]+ts[1]), float32(ta[2]+ts[2])
	out[3], out[4], out[5] = float32(ra[0]), float32(ra[1]), float32(ra[2])
	out[6], out[7], out[8] = float32(ra[3]), float32(ra[4]), float32(ra[5])
}

// refStepRoundTrip is the reference's composition to the letter: both
// rotations pass through scipy's quaternion round trip.
func refStepRoundTrip(rs *pdk.Mat3, ts *[3]float64, rel *[9]float64, out []float32) {
	rr := pdk.Rot6DToMat64(rel[3:])
	rr = pdk.QuatRoundTrip(&rr)
	ra := rs.Mul(&rr)
	ra = pdk.QuatRoundTrip(&ra)
	ta := rs.Apply([3]float64{rel[0], rel[1], rel[2]})
	out[0], out[1], out[2] = float32(ta[0]+ts[0]), float32(ta[1]+ts[1]), float32(ta[2]+ts[2])
	out[3], out[4], out[5] = float32(ra[0]), float32(ra[1]), float32(ra[2])
	out[6], out[7], out[8] = float32(ra[3]), float32(ra[4]), float32(ra[5])
}

// randomChunk returns a Droid whose bounds make steps() see the relative
// actions rels (every column's scale is 0 and its lo the wanted value, on
// an all-zero chunk), plus a random state frame. Every 25th step has a
// degenerate rot6d (zero first vector: NaN in every implementation).
func randomChunk(rng *rand.Rand) (d *Droid, pred []float32, rels [Horizon][9]float64, rs pdk.Mat3, ts [3]float64) {
	d = New()
	for k := range rels {
		for j := range rels[k] {
			rels[k][j] = rng.NormFloat64()
		}
		if k%25 == 24 {
			rels[k][3], rels[k][4], rels[k][5] = 0, 0, 0
		}
		for j := range rels[k] {
			d.bounds[k*34+2*j] = rels[k][j]
		}
	}
	var st [9]float64
	for j := range st {
		st[j] = rng.NormFloat64()
	}
	rs = pdk.Rot6DToMat64(st[3:])
	rs = pdk.QuatRoundTrip(&rs)
	ts = [3]float64{st[0], st[1], st[2]}
	return d, make([]float32, Horizon*17), rels, rs, ts
}

func chunks(t *testing.T) int {
	if testing.Short() {
		return 500
	}
	return 5000
}

// TestStepMatchesHelpers: steps' eef composition is bit-identical to the
// pdk helpers on random rotations and on degenerate inputs (NaN in both).
func TestStepMatchesHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var js [7]float64
	var want [9]float32
	for c := range chunks(t) {
		d, pred, rels, rs, ts := randomChunk(rng)
		d.steps(pred, 17, &rs, &ts, &js)
		for k := range rels {
			refStep(&rs, &ts, &rels[k], want[:])
			got := d.eef[k*9 : k*9+9]
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) && !(got[j] != got[j] && want[j] != want[j]) {
					t.Fatalf("chunk %d step %d: out[%d] = %v, helpers give %v (rel %v)", c, k, j, got[j], want[j], rels[k])
				}
			}
		}
	}
}

// TestStepMatchesRoundTrip bounds what skipping the per-step quaternion
// round trips costs: on random rotations (all four of scipy's branches)
// every output is within one float32 ulp of the round-tripped result, and
// nearly all are identical.
func TestStepMatchesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var js [7]float64
	var want [9]float32
	n, differ := 0, 0
	for range chunks(t) {
		d, pred, rels, rs, ts := randomChunk(rng)
		d.steps(pred, 17, &rs, &ts, &js)
		for k := range rels {
			if k%25 == 24 {
				continue // NaN in both
			}
			refStepRoundTrip(&rs, &ts, &rels[k], want[:])
			got := d.eef[k*9 : k*9+9]
			for j := range want {
				n++
				if got[j] == want[j] {
					continue
				}
				differ++
				ulp := math.Nextafter32(float32(math.Abs(float64(want[j]))), float32(math.Inf(1))) - float32(math.Abs(float64(want[j])))
				if d := math.Abs(float64(got[j] - want[j])); d > float64(ulp) || d > 1e-6 {
					t.Fatalf("step %d: out[%d] = %v, round trip gives %v (|d| %.3g > 1 ulp %.3g)", k, j, got[j], want[j], d, ulp)
				}
			}
		}
	}
	t.Logf("%d of %d outputs differ by one float32 ulp", differ, n)
	if differ > n/100 {
		t.Fatalf("%d of %d outputs differ, want under 1%%", differ, n)
	}
}

// BenchmarkSteps compares the chunk decode with the helper-based one
// (including the round trips the reference makes) natively.
func BenchmarkSteps(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	d, pred, rels, rs, ts := randomChunk(rng)
	var js [7]float64
	b.Run("steps", func(b *testing.B) {
		for range b.N {
			d.steps(pred, 17, &rs, &ts, &js)
		}
	})
	var out [9]float32
	b.Run("helpers-roundtrip", func(b *testing.B) {
		for range b.N {
			for k := range rels {
				refStepRoundTrip(&rs, &ts, &rels[k], out[:])
			}
		}
	})
}
