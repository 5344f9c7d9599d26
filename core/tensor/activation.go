package tensor

import (
	"fmt"
	"math"
)

// Activation is an elementwise function applied to a MatMul result, fused
// into the GEMM's store (see MatMulAct).
type Activation int

const (
	// ActNone leaves the product unchanged.
	ActNone Activation = iota
	// ActGELUTanh is 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), torch's
	// gelu(approximate="tanh") (SigLIP2 MLP, DiT feed-forward).
	ActGELUTanh
	// ActGELUErf is 0.5·x·(1 + erf(x/√2)), torch's exact gelu.
	ActGELUErf
	// ActSiLU is x·sigmoid(x).
	ActSiLU
)

// String returns the activation's name as used in logs and flags.
func (a Activation) String() string {
	switch a {
	case ActNone:
		return "none"
	case ActGELUTanh:
		return "gelu_tanh"
	case ActGELUErf:
		return "gelu_erf"
	case ActSiLU:
		return "silu"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// FusedMatMul is implemented by Kernels that apply an activation while
// storing the product, with the output tile still in L1, instead of in a
// separate pass over y. Every Kernels in this package implements it; use
// MatMulAct to call it on any Kernels.
type FusedMatMul interface {
	// MatMulAct computes y = act(x·Wᵀ + bias) with MatMul's contract.
	MatMulAct(y, x []float32, m int, w Packed, bias []float32, act Activation)
}

// MatMulAct computes y[m, n] = act(x[m, k]·Wᵀ + bias) with k, fused when k
// implements FusedMatMul and as MatMul followed by Activate otherwise.
func MatMulAct(k Kernels, y, x []float32, m int, w Packed, bias []float32, act Activation) {
	if f, ok := k.(FusedMatMul); ok {
		f.MatMulAct(y, x, m, w, bias, act)
		return
	}
	k.MatMul(y, x, m, w, bias)
	Activate(act, y[:m*w.N()])
}

// Activate applies act to every element of x in place, on the calling
// goroutine. With AVX-512, GELU-tanh and SiLU take the SIMD path for every
// element (exp by a Cephes-style polynomial: SiLU within ~2 ulp of the
// float64 formula, GELU-tanh within ~30 ulp in its far negative tail where
// the value is < 1e-6·|x|); elsewhere, and for GELU-erf, the float64
// reference functions below are used. Results depend only on the value, not
// on its position, so fused and unfused activations agree bit for bit.
func Activate(act Activation, x []float32) {
	switch act {
	case ActNone:
		return
	case ActGELUTanh, ActSiLU:
		done := activateSIMD(act, x)
		x = x[done:]
	case ActGELUErf:
	default:
		panic(fmt.Sprintf("tensor: Activate: unknown activation %d", int(act)))
	}
	activateGo(act, x)
}

// activateGo is the scalar float64 reference of each activation.
func activateGo(act Activation, x []float32) {
	switch act {
	case ActGELUTanh:
		for i, v := range x {
			x[i] = GELUTanh(v)
		}
	case ActGELUErf:
		for i, v := range x {
			x[i] = GELUErf(v)
		}
	case ActSiLU:
		for i, v := range x {
			x[i] = SiLU(v)
		}
	}
}

// SiLUMul sets x[i] = SiLU(x[i])·y[i] in place (the SwiGLU gate, x the
// gate projection, y the up projection), on the calling goroutine, with the
// same SIMD SiLU as Activate. It panics if len(y) < len(x).
func SiLUMul(x, y []float32) {
	if len(y) < len(x) {
		panic(fmt.Sprintf("tensor: SiLUMul: y has %d floats, x %d", len(y), len(x)))
	}
	y = y[:len(x)]
	if siluMulSIMD(x, y) {
		return
	}
	for i, v := range x {
		x[i] = SiLU(v) * y[i]
	}
}

// GELUTanh is the scalar tanh-approximated GELU, evaluated in float64.
func GELUTanh(x float32) float32 {
	const c = 0.7978845608028654 // √(2/π)
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(c*(v+0.044715*v*v*v))))
}

// GELUErf is the scalar exact GELU, evaluated in float64.
func GELUErf(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Erf(v/math.Sqrt2)))
}

// SiLU is the scalar x·sigmoid(x), evaluated in float64.
func SiLU(x float32) float32 {
	v := float64(x)
	return float32(v / (1 + math.Exp(-v)))
}
