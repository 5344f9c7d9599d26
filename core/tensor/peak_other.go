//go:build !(amd64 || arm64) || purego

package tensor

// FMAPeak returns 0: this build has no SIMD kernels (see the amd64/arm64
// version).
func FMAPeak(threads int) float64 { return 0 }
