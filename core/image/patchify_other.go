//go:build !amd64 || purego

package image

// forceNoAVX512Patchify, forceNoAVX2Patchify and forceNoFMANorm have no
// effect on this architecture (tests set them).
var forceNoAVX512Patchify, forceNoAVX2Patchify, forceNoFMANorm = false, false, false

// normFMAExact is false: this build has no SIMD patchify kernel.
func normFMAExact(*NormLUT) bool { return false }
