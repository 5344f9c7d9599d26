package actionhead

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// refAttention is a float64 reference: per head, per query, the plain
// softmax(q·kᵀ/√hd)·v.
func refAttention(out, q, k, v []float32, nq, nk, heads, hd int) {
	ld := heads * hd
	s := make([]float64, nk)
	for h := range heads {
		off := h * hd
		for i := range nq {
			mx := math.Inf(-1)
			for t := range nk {
				var d float64
				for p := range hd {
					d += float64(q[i*ld+off+p]) * float64(k[t*ld+off+p])
				}
				s[t] = d / math.Sqrt(float64(hd))
				mx = math.Max(mx, s[t])
			}
			var sum float64
			for t := range s {
				s[t] = math.Exp(s[t] - mx)
				sum += s[t]
			}
			for p := range hd {
				var o float64
				for t := range nk {
					o += s[t] / sum * float64(v[t*ld+off+p])
				}
				out[i*ld+off+p] = float32(o)
			}
		}
	}
}

func randSlice(rng *rand.Rand, n int, sd float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sd)
	}
	return x
}

func TestAttentionMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ nq, nk, heads, hd int }{
		{1, 1, 1, 1}, {3, 5, 2, 3}, {41, 21, 4, 16}, {41, 448, 3, 48}, {130, 130, 2, 64}, {7, 300, 1, 17},
	} {
		ld := c.heads * c.hd
		q := randSlice(rng, c.nq*ld, 1)
		k := randSlice(rng, c.nk*ld, 1)
		v := randSlice(rng, c.nk*ld, 1)
		want := make([]float32, c.nq*ld)
		got := make([]float32, c.nq*ld)
		refAttention(want, q, k, v, c.nq, c.nk, c.heads, c.hd)
		var at tensor.Attention
		var args tensor.AttentionArgs
		mha(&at, &args, got, q, k, v, c.nq, c.nk, c.heads, c.hd)
		for i := range want {
			require.InDelta(t, want[i], got[i], 2e-5, "case %+v index %d", c, i)
		}
	}
}

// BenchmarkAttentionAdapterShape: S = 469 tokens, 4 of the 32 heads × 64
// (multiply by 8 for one adapter block).
func BenchmarkAttentionAdapterShape(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	S, heads, hd := 469, 4, 64
	q := randSlice(rng, S*heads*hd, 1)
	k := randSlice(rng, S*heads*hd, 1)
	v := randSlice(rng, S*heads*hd, 1)
	out := make([]float32, len(q))
	var at tensor.Attention
	var args tensor.AttentionArgs
	b.ReportAllocs()
	for b.Loop() {
		mha(&at, &args, out, q, k, v, S, S, heads, hd)
	}
	flops := 4 * float64(S) * float64(S) * float64(heads*hd)
	b.ReportMetric(flops/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "GFLOP/s")
}
