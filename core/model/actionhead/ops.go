package actionhead

import (
	"math"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// This file holds the small fp32 kernels of the action head that are neither
// GEMMs nor attention (both run on core/tensor): LayerNorm, AdaLN
// modulation, activations, residual adds. They touch at most S × 2048
// floats per call and run on the calling goroutine.

// layerNorm normalises each of the rows of x (width d) into y over the row:
// (x − mean)/sqrt(var + eps), biased variance, statistics accumulated in
// float64 (tensor.MeanInvStd). gamma/beta may be nil (non-affine). y may
// alias x.
func layerNorm(y, x []float32, rows, d int, gamma, beta []float32, eps float64) {
	for r := 0; r < rows; r++ {
		xr := x[r*d : r*d+d]
		yr := y[r*d : r*d+d]
		m32, i32 := tensor.MeanInvStd(xr, eps)
		switch {
		case gamma != nil && beta != nil:
			for i, v := range xr {
				yr[i] = (v-m32)*i32*gamma[i] + beta[i]
			}
		case gamma != nil:
			for i, v := range xr {
				yr[i] = (v - m32) * i32 * gamma[i]
			}
		default:
			for i, v := range xr {
				yr[i] = (v - m32) * i32
			}
		}
	}
}

// modulate applies y = y·(1 + scale) + shift to each row (AdaLN).
func modulate(y []float32, rows, d int, scale, shift []float32) {
	for r := 0; r < rows; r++ {
		yr := y[r*d : r*d+d]
		for i := range yr {
			yr[i] = yr[i]*(1+scale[i]) + shift[i]
		}
	}
}

func silu(x float32) float32 {
	return float32(float64(x) / (1 + math.Exp(-float64(x))))
}

// siluInto writes silu(x) into y.
func siluInto(y, x []float32) {
	for i, v := range x {
		y[i] = silu(v)
	}
}

func reluInPlace(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

func addInPlace(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
