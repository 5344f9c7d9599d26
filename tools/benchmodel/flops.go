package benchmodel

import (
	"sync/atomic"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// CountingKernels is a tensor.Kernels that counts the GEMM work it is given
// (2·m·n·k per MatMul or MatMulAct, in Flops) and hands everything to K,
// including bf16 packing and fused activations, so that a model runs as it
// would on K alone. Attention products (tensor.Attention) do not go
// through a Kernels and are not counted. Safe for concurrent use as K is.
type CountingKernels struct {
	K     tensor.Kernels
	Flops atomic.Int64
}

// PackLinear packs with K.
func (c *CountingKernels) PackLinear(w []float32, n, k int) tensor.Packed {
	return c.K.PackLinear(w, n, k)
}

// PackKN packs with K.
func (c *CountingKernels) PackKN(w []float32, k, n int) tensor.Packed { return c.K.PackKN(w, k, n) }

// PackLinearBF16 packs with K (directly from the bf16 bits where K can).
func (c *CountingKernels) PackLinearBF16(w []uint16, n, k int) tensor.Packed {
	return tensor.PackLinearBF16(c.K, w, n, k)
}

// PackKNBF16 packs with K (directly from the bf16 bits where K can).
func (c *CountingKernels) PackKNBF16(w []uint16, k, n int) tensor.Packed {
	return tensor.PackKNBF16(c.K, w, k, n)
}

// MatMul counts 2·m·n·k and multiplies with K.
func (c *CountingKernels) MatMul(y, x []float32, m int, w tensor.Packed, bias []float32) {
	c.Flops.Add(2 * int64(m) * int64(w.N()) * int64(w.K()))
	c.K.MatMul(y, x, m, w, bias)
}

// MatMulAct counts 2·m·n·k and multiplies with K (fused where K fuses).
func (c *CountingKernels) MatMulAct(y, x []float32, m int, w tensor.Packed, bias []float32, act tensor.Activation) {
	c.Flops.Add(2 * int64(m) * int64(w.N()) * int64(w.K()))
	tensor.MatMulAct(c.K, y, x, m, w, bias, act)
}
