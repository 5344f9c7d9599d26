// Package tensor holds the dense fp32 primitives the GR00T model graph runs
// on, behind the small Kernels interface so that faster implementations
// (SIMD GEMM, fused attention) drop in without touching the graph.
//
// All matrices are row-major float32 slices. Kernels never allocate on the
// heap in their steady state: callers own every output and scratch buffer.
package tensor

// Packed is a weight matrix prepared once, at load time, for repeated use as
// the right-hand operand of MatMul. Its layout is private to the Kernels
// implementation that produced it. A Packed value is immutable and safe for
// concurrent use.
type Packed interface {
	// N is the number of output features (rows of an nn.Linear weight).
	N() int
	// K is the number of input features (columns of an nn.Linear weight).
	K() int
}

// Kernels is the set of dense primitives the model graph needs. An
// implementation must be safe for concurrent use by one caller at a time per
// output buffer; it may use every core internally.
type Kernels interface {
	// PackLinear prepares w, given in nn.Linear layout [n, k] (out, in), for
	// MatMul. The implementation may copy w; the caller keeps ownership of w.
	PackLinear(w []float32, n, k int) Packed

	// PackKN prepares w, given as [k, n] (in, out) — the layout of GR00T's
	// category-specific weights used as x·W — for MatMul.
	PackKN(w []float32, k, n int) Packed

	// MatMul computes y[m, n] = x[m, k] · Wᵀ + bias, where W is the packed
	// [n, k] weight and bias (length n) may be nil. y is overwritten and must
	// not alias x.
	MatMul(y, x []float32, m int, w Packed, bias []float32)
}
