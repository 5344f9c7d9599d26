package tensor

import "math"

// MeanInvStd returns the statistics of one LayerNorm row x: mean =
// float32(μ) and inv = float32(1/√(σ² + eps)), with μ = Σx/n and the biased
// variance σ² = Σ(x − μ)²/n accumulated in float64 (two passes), so that
// the caller applies y = (x − mean)·inv·w + b in float32. With SIMD (AVX2
// and AVX-512 CPUs alike, one implementation; NEON on arm64, the same
// bits) each sum takes 16 float64
// partial sums and fuses the square; the float64 results then differ from
// the sequential sums of the scalar path (other architectures, -tags
// purego) only in their last bits, so mean and inv agree except when such a
// difference straddles a float32 rounding boundary (≤ 1 ulp, rare).
func MeanInvStd(x []float32, eps float64) (mean, inv float32) {
	n := float64(len(x))
	mu := sumF64(x) / n
	q := sqDevF64(x, mu)
	return float32(mu), float32(1 / math.Sqrt(q/n+eps))
}

// InvRMS returns float32(1/√(Σx²/n + eps)) for one RMSNorm row x, Σx² in
// float64 as in MeanInvStd.
func InvRMS(x []float32, eps float64) float32 {
	q := sqDevF64(x, 0)
	return float32(1 / math.Sqrt(q/float64(len(x))+eps))
}

// sumF64 returns Σ float64(x[i]): the SIMD kernel on the multiple of 16,
// then the tail in order.
func sumF64(x []float32) float64 {
	var s float64
	n := 0
	if normSIMD {
		n = len(x) &^ 15
		if n > 0 {
			s = sumF64AVX2(&x[0], n)
		}
	}
	for _, v := range x[n:] {
		s += float64(v)
	}
	return s
}

// sqDevF64 returns Σ (float64(x[i]) − mean)², as sumF64.
func sqDevF64(x []float32, mean float64) float64 {
	var q float64
	n := 0
	if normSIMD {
		n = len(x) &^ 15
		if n > 0 {
			q = sqDevF64AVX2(&x[0], n, mean)
		}
	}
	for _, v := range x[n:] {
		d := float64(v) - mean
		q += d * d
	}
	return q
}
