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
	if a >= 0 && int(a) < len(activationNames) {
		return activationNames[a]
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

var activationNames = [...]string{ActNone: "none", ActGELUTanh: "gelu_tanh", ActGELUErf: "gelu_erf", ActSiLU: "silu"}

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
// goroutine, with the best vector level of the CPU (AVX-512F, else
// AVX2+FMA; NEON on arm64), or with the scalar float64 references
// GELUTanh, GELUErf and SiLU where there is none (other architectures,
// -tags purego). Results
// depend only on the value, not on its position, so fused and unfused
// activations agree bit for bit.
//
// Accuracy contract of the vector kernels (SiLU and SiLUMul, GELU-tanh,
// GELU-erf, and the exp of the attention softmax). AVX-512, AVX2 and NEON
// run the same operation sequence and return the same bits for every input
// (TestVecKindsBitIdentical, TestVecBitsDigest). Errors
// are in float32 ulps of the exact value (0.5 = correctly rounded; the ulp
// of a subnormal is 2⁻¹⁴⁹), measured against float64 oracles written with
// package math (exp, x/(1+e⁻ˣ), x/(1+e⁻²ᵘ), x·erfc(−x/√2)/2) over every
// 4099th float32 of both signs, every 1021st in [−110, 110] (TestVecAccuracy)
// and, once, every 3rd in [−110, 110], plus ±0, ±tiny and subnormal inputs,
// the exp overflow (88.72) and underflow (−87.34, −103.97) boundaries,
// ±16, ±large, ±MaxFloat32, ±Inf and NaN:
//
//	exp        ≤ 1.01 ulp for the softmax's arguments x − max ≤ 0, gradual
//	           underflow to 0 below −103.97, exp(−Inf) = 0
//	SiLU       ≤ 3.3 ulp everywhere, subnormal results included
//	GELU-erf   ≤ 3.1 ulp for |x| < 1 (Taylor series of Φ), ≤ 7 ulp elsewhere
//	           (Numerical Recipes' erfc with −x²/2 split exactly, so the
//	           negative tail keeps its relative accuracy down to underflow)
//	GELU-tanh  ≤ 2 ulp for x ≥ 0, ≤ 3.4 ulp for x ≥ −1, ≤ 30 ulp for
//	           x > −4.6; below, where |y| < 1e-6·|x|, |error| ≤ 2e-12·|x|
//
// GELU-tanh's error grows in the negative tail because the fp32 argument
// u = √(2/π)·(x + 0.044715·x³) carries ~1 ulp of relative error that
// e^(−2|u|) multiplies by 2|u| (torch's fp32 formula has the same
// conditioning). For x < 0, GELU-tanh and SiLU are evaluated as
// x·e/(1 + e) with e = e^(−|s|) (scaled by 2²⁴ to stay normal), so they
// underflow gradually instead of overflowing exp. NaN gives NaN, +Inf gives +Inf and
// −Inf gives NaN (as the float64 formulas do). The scalar references agree
// to 0.5 ulp, except that GELUTanh's 0.5·x·(1 + tanh u) and GELUErf's
// 0.5·x·(1 + erf(x/√2)) cancel in float64 below x ≈ −5.5 and −5.9, where
// the results are below 1e-11·|x| and 1e-8·|x|.
func Activate(act Activation, x []float32) { activateKind(vecKind, act, x) }

// activateKind is Activate at vector level kind (0: the scalar references).
func activateKind(kind kernelKind, act Activation, x []float32) {
	switch act {
	case ActNone:
		return
	case ActGELUTanh, ActSiLU, ActGELUErf:
		if activateSIMD(kind, act, x) {
			return
		}
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
// same vector SiLU as Activate (one more rounding for the product). It panics if len(y) < len(x).
func SiLUMul(x, y []float32) {
	if len(y) < len(x) {
		panic(fmt.Sprintf("tensor: SiLUMul: y has %d floats, x %d", len(y), len(x)))
	}
	y = y[:len(x)]
	if siluMulSIMD(vecKind, x, y) {
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
