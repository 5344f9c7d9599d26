//go:build !amd64 || purego

package image

// forceNoAVX512Patchify has no effect on this architecture (tests set it).
var forceNoAVX512Patchify = false
