package actionhead

import "math"

// Both sinusoid tables are computed in float32 in upstream's operation
// order (the goldens keep upstream's float32 arguments, which at τ = 750 are
// up to ~3e-5 away from the exact ones); exp, sin and cos themselves are
// evaluated in float64 and rounded once.

func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }
func sin32(x float32) float32 { return float32(math.Sin(float64(x))) }
func cos32(x float32) float32 { return float32(math.Cos(float64(x))) }

// timestepProj writes diffusers Timesteps(len(dst), flip_sin_to_cos=True,
// downscale_freq_shift=1) of τ into dst: half = len/2,
// ω_k = exp(float32(−ln 10000)·k / (half − 1)), dst = [cos(τ·ω), sin(τ·ω)]
// (cos first).
func timestepProj(dst []float32, tau int) {
	half := len(dst) / 2
	negLog := float32(-math.Log(10000))
	div := float32(half - 1)
	t := float32(tau)
	for k := 0; k < half; k++ {
		w := exp32(negLog * float32(k) / div)
		a := t * w
		dst[k] = cos32(a)
		dst[half+k] = sin32(a)
	}
}

// actionSinusoid writes GR00T's SinusoidalPositionalEncoding of τ into dst:
// half = len/2, ω_k = exp(−k · (float32(ln 10000)/half)),
// dst = [sin(τ·ω), cos(τ·ω)] (sin first, divisor half).
func actionSinusoid(dst []float32, tau int) {
	half := len(dst) / 2
	c := float32(math.Log(10000)) / float32(half)
	t := float32(tau)
	for k := 0; k < half; k++ {
		w := exp32(-float32(k) * c)
		a := t * w
		dst[k] = sin32(a)
		dst[half+k] = cos32(a)
	}
}
