//go:build amd64 && !purego

package b64

import "golang.org/x/sys/cpu"

// hasSIMD selects the AVX-512 VBMI kernel (VPERMI2B translation, VPERMB
// packing).
var hasSIMD = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI

// tables holds the kernel's constants: the 128-entry ASCII → 6-bit
// translation (0x80 for bytes outside the alphabet), the multipliers of
// the two packing steps and the byte order of the 48 output bytes.
var tables = func() (t [4][64]byte) {
	for i := range 128 {
		t[i/64][i%64] = 0x80
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for v, c := range []byte(alphabet) {
		t[c/64][c%64] = byte(v)
	}
	for i := 0; i < 64; i += 2 {
		t[2][i], t[2][i+1] = 0x40, 0x01 // byte pairs: a·64 + b
	}
	for j := range 48 {
		t[3][j] = byte(4*(j/3) + 2 - j%3) // 24-bit lanes, big-endian bytes
	}
	return t
}()

//go:noescape
func decodeAVX512(dst, src *byte, blocks int, tab *[4][64]byte) int

// decodeBlocks decodes whole 64-character blocks of src (len a multiple of
// 64) into dst while they hold only alphabet characters and returns how
// many it decoded (48 bytes each).
func decodeBlocks(dst, src []byte) int {
	n := len(src) / 64
	if n == 0 || len(dst) < n*48 {
		return 0
	}
	return decodeAVX512(&dst[0], &src[0], n, &tables)
}
