//go:build !amd64 || purego

package b64

const hasSIMD = false

func decodeBlocks(dst, src []byte) int { return 0 }
