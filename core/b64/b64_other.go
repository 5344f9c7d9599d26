//go:build !amd64 || purego

package b64

const hasSIMD = false

// forceAVX2 has no effect on this architecture (tests set it).
var forceAVX2 = false

func decodeBlocks(dst, src []byte) int { return 0 }
