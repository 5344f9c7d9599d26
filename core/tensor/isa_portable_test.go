//go:build (!amd64 && !arm64) || purego

package tensor

// simdBuild reports whether this build has the SIMD kernels.
const simdBuild = false
