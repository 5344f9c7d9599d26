//go:build (!amd64 && !arm64) || purego

package tensor

func callKernel(kind kernelKind, a, b, c *float32, ldc, kc, mode int, bias *float32) {
	panic("tensor: no SIMD micro-kernel on this architecture")
}

// kernelRowsA is false: no in-place-A kernel here, callers pack A.
const kernelRowsA = false

func callKernelRows(kind kernelKind, a *float32, lda int, b, c *float32, ldc, kc int) {
	panic("tensor: no in-place-A micro-kernel on this architecture")
}

func callKernelBF16(kind kernelKind, a *float32, b *uint16, c *float32, ldc, kc, mode int, bias *float32) {
	panic("tensor: no SIMD micro-kernel on this architecture")
}

func widenBF16(kind kernelKind, dst []float32, src []uint16) { widenBF16Go(dst, src) }

// vecKind is 0: the elementwise kernels run their scalar references.
const vecKind kernelKind = 0

func vecKinds() []kernelKind { return []kernelKind{0} }

func activateSIMD(kind kernelKind, act Activation, x []float32) bool { return false }

func softmaxSIMD(kind kernelKind, row []float32) (float32, bool) { return 0, false }

func expShiftSumSIMD(kind kernelKind, row []float32, shift float32) (float32, bool) {
	return 0, false
}

func siluMulSIMD(kind kernelKind, x, y []float32) bool { return false }

// normSIMD is false: MeanInvStd and InvRMS sum sequentially.
const normSIMD = false

func sumF64AVX2(x *float32, n int) float64 { panic("tensor: no SIMD") }

func sqDevF64AVX2(x *float32, n int, mean float64) float64 { panic("tensor: no SIMD") }
