//go:build !amd64 || purego

package inflate

// useAdlerSIMD is false: no vector kernel on this platform.
var useAdlerSIMD = false

// adlerKernel is never called without SIMD; it exists for the shared code.
func adlerKernel(p []byte) (sum, pre, wsum uint64) {
	return adlerKernelGo(p)
}
