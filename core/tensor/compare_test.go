package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPCC(t *testing.T) {
	a := []float32{1, 2, 3, 4}
	require.InDelta(t, 1, PCC(a, []float32{2, 4, 6, 8}), 1e-15)
	require.InDelta(t, -1, PCC(a, []float32{4, 3, 2, 1}), 1e-15)
	require.InDelta(t, 0, PCC([]float64{1, -1, 1, -1}, []float64{1, 1, -1, -1}), 1e-15)
	for _, c := range [][2][]float64{{{1, 2}, {1}}, {{}, {}}, {{3, 3, 3}, {1, 2, 3}}} {
		require.True(t, math.IsNaN(PCC(c[0], c[1])), "%v", c)
	}
}
