//go:build !amd64 || purego

package tensor

func callKernel(kind kernelKind, a, b, c *float32, ldc, kc, mode int, bias *float32) {
	panic("tensor: no SIMD micro-kernel on this architecture")
}

func callKernelBF16(kind kernelKind, a *float32, b *uint16, c *float32, ldc, kc, mode int, bias *float32) {
	panic("tensor: no SIMD micro-kernel on this architecture")
}

func widenBF16(kind kernelKind, dst []float32, src []uint16) { widenBF16Go(dst, src) }

func activateSIMD(act Activation, x []float32) int { return 0 }

func rowMaxSIMD(row []float32) (float32, bool) { return 0, false }

func expShiftSumSIMD(row []float32, shift float32) (float32, bool) { return 0, false }

func siluMulSIMD(x, y []float32) bool { return false }
