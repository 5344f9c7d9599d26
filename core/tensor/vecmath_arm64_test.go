//go:build arm64 && !purego

package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSoftmaxRowHalfBlock: on NEON a score row of 16q + 8 (arm64's GEMM
// panels are 8 wide) gets exactly the bits of the same row padded with 8
// −Inf to a multiple of 16, so a query's attention output does not depend
// on how many masked keys pad its row (core/model/backbone's
// TestPaddedSequence); and rowMaxNEON, rowMaxMinNEON agree with a scalar
// max/min on such rows.
func TestSoftmaxRowHalfBlock(t *testing.T) {
	if !hasNEON {
		t.Skip("no ASIMD")
	}
	r := rand.New(rand.NewPCG(51, 52))
	neg := float32(math.Inf(-1))
	for _, n := range []int{8, 24, 40, 472} {
		for _, span := range []float64{10, 60, 130} {
			row := make([]float32, n)
			for i := range row {
				row[i] = float32(r.Float64()*span - span/2)
				if span == 10 && i%9 == 4 {
					row[i] = neg
				}
			}
			mx, mn := neg, float32(math.Inf(1))
			for _, v := range row {
				mx, mn = max(mx, v), min(mn, v)
			}
			gmx, gmn := rowMaxMinNEON(&row[0], n)
			require.Equal(t, mx, gmx, "n=%d max", n)
			require.Equal(t, mn, gmn, "n=%d min", n)
			require.Equal(t, mx, rowMaxNEON(&row[0], n), "n=%d rowMax", n)

			padded := append(append([]float32(nil), row...), make16(neg, 8)...)
			got := append([]float32(nil), row...)
			inv := softmaxRow(kindNEON, got)
			want := softmaxRow(kindNEON, padded)
			require.Equal(t, math.Float32bits(want), math.Float32bits(inv), "n=%d span=%g: 1/Σ", n, span)
			require.Equal(t, padded[:n], got, "n=%d span=%g", n, span)
			for i, v := range row {
				e := math.Exp(float64(v - mx))
				require.LessOrEqual(t, ulpErr(got[i], e), 1.5, "n=%d exp(%g)", n, v-mx)
			}
		}
	}
}
