package actionhead

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDot4 checks the AVX2 path and the scalar fallback against a float64
// sum for every length up to 70 (tails included).
func TestDot4(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	saved := hasAVX2FMA
	defer func() { hasAVX2FMA = saved }()
	for _, simd := range []bool{false, saved} {
		hasAVX2FMA = simd
		for n := 0; n <= 70; n++ {
			a := [4][]float32{randSlice(rng, n, 1), randSlice(rng, n, 1), randSlice(rng, n, 1), randSlice(rng, n, 1)}
			b := randSlice(rng, n, 1)
			var got [4]float32
			got[0], got[1], got[2], got[3] = dot4(a[0], a[1], a[2], a[3], b)
			for r := range 4 {
				var want float64
				for p := range n {
					want += float64(a[r][p]) * float64(b[p])
				}
				require.InDelta(t, want, got[r], 1e-5, "simd %v n %d row %d", simd, n, r)
			}
		}
	}
}
