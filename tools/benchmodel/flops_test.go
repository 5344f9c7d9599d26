package benchmodel

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// TestCountingKernels: the counter adds 2·m·n·k per product, fused or not,
// fp32- or bf16-packed, and the products are K's, bit for bit.
func TestCountingKernels(t *testing.T) {
	k := tensor.DefaultBF16Weights()
	c := &CountingKernels{K: k}
	const m, n, kk = 7, 48, 40
	w := make([]float32, n*kk)
	wb := make([]uint16, n*kk)
	x := make([]float32, m*kk)
	for i := range w {
		wb[i] = uint16(0x3c00 + i%97) // bf16 values around 0.008–0.01
		w[i] = math.Float32frombits(uint32(wb[i]) << 16)
	}
	for i := range x {
		x[i] = float32(i%11) - 5
	}
	want, got := make([]float32, m*n), make([]float32, m*n)
	k.MatMul(want, x, m, k.PackLinear(w, n, kk), nil)
	c.MatMul(got, x, m, c.PackLinear(w, n, kk), nil)
	require.Equal(t, want, got)
	require.EqualValues(t, 2*m*n*kk, c.Flops.Load())
	c.MatMulAct(got, x, m, c.PackLinearBF16(wb, n, kk), nil, tensor.ActSiLU)
	tensor.MatMulAct(k, want, x, m, tensor.PackLinearBF16(k, wb, n, kk), nil, tensor.ActSiLU)
	require.Equal(t, want, got)
	require.EqualValues(t, 4*m*n*kk, c.Flops.Load())
	c.MatMul(got, x, m, c.PackKNBF16(wb, kk, n), nil)
	require.EqualValues(t, 6*m*n*kk, c.Flops.Load())
	var _ tensor.BF16Packer = c
	var _ tensor.FusedMatMul = c
}
