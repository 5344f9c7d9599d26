package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// seqMeanInvStd and seqInvRMS are the sequential float64 statistics the
// norms used before MeanInvStd (and the scalar path still is).
func seqMeanInvStd(x []float32, eps float64) (float32, float32) {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	mean := s / float64(len(x))
	var q float64
	for _, v := range x {
		d := float64(v) - mean
		q += d * d
	}
	return float32(mean), float32(1 / math.Sqrt(q/float64(len(x))+eps))
}

func seqInvRMS(x []float32, eps float64) float32 {
	var q float64
	for _, v := range x {
		q += float64(v) * float64(v)
	}
	return float32(1 / math.Sqrt(q/float64(len(x))+eps))
}

// ulps32 is the distance between a and b in float32 steps.
func ulps32(a, b float32) int64 {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if ia < 0x80000000 != (ib < 0x80000000) {
		return math.MaxInt64
	}
	if d := ia - ib; d < 0 {
		return -d
	} else {
		return d
	}
}

// TestNormStats: MeanInvStd and InvRMS equal the sequential float64
// statistics exactly on the scalar path and within 1 float32 ulp (almost
// always exactly) on the SIMD one, for the model's row widths, ragged
// lengths and rows with a large common offset (the two-pass variance).
func TestNormStats(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	type tc struct {
		name         string
		n            int
		scale, shift float64
	}
	cases := []tc{
		{"n1", 1, 1, 0}, {"n15", 15, 1, 0}, {"n16", 16, 1, 0}, {"n17", 17, 2, 0.5},
		{"tiny48", 48, 1, 0}, {"siglip1152", 1152, 3, 0}, {"dit1536", 1536, 1, 0},
		{"qwen2048", 2048, 0.5, 0}, {"offset1000", 1024, 1e-2, 1000}, {"huge", 999, 1e18, 0},
	}
	exact, total := 0, 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for rep := 0; rep < 20; rep++ {
				x := make([]float32, c.n)
				for i := range x {
					x[i] = float32(r.NormFloat64()*c.scale + c.shift)
				}
				for _, eps := range []float64{1e-5, 1e-6} {
					wm, wi := seqMeanInvStd(x, eps)
					gm, gi := MeanInvStd(x, eps)
					wr, gr := seqInvRMS(x, eps), InvRMS(x, eps)
					if !normSIMD {
						require.Equal(t, [3]float32{wm, wi, wr}, [3]float32{gm, gi, gr})
						continue
					}
					require.LessOrEqual(t, ulps32(gm, wm), int64(1), "mean %g vs %g", gm, wm)
					require.LessOrEqual(t, ulps32(gi, wi), int64(1), "inv %g vs %g", gi, wi)
					require.LessOrEqual(t, ulps32(gr, wr), int64(1), "rms %g vs %g", gr, wr)
					total += 3
					if gm == wm {
						exact++
					}
					if gi == wi {
						exact++
					}
					if gr == wr {
						exact++
					}
				}
			}
		})
	}
	t.Logf("SIMD=%v: %d of %d statistics bit-identical to the sequential sums", normSIMD, exact, total)
}

// BenchmarkNormStats times MeanInvStd on the model's row widths.
func BenchmarkNormStats(b *testing.B) {
	r := rand.New(rand.NewPCG(53, 54))
	for _, n := range []int{48, 1152, 2048} {
		x := randSlice(r, n)
		b.Run(fmt.Sprintf("n%d/simd=%v", n, normSIMD), func(b *testing.B) {
			for b.Loop() {
				MeanInvStd(x, 1e-5)
			}
		})
		b.Run(fmt.Sprintf("n%d/sequential", n), func(b *testing.B) {
			for b.Loop() {
				seqMeanInvStd(x, 1e-5)
			}
		})
	}
}
