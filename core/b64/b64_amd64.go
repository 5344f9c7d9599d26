//go:build amd64 && !purego

package b64

import "golang.org/x/sys/cpu"

// hasAVX512 selects the AVX-512 VBMI kernel (VPERMI2B translation, VPERMB
// packing), hasAVX2 the AVX2 one (nibble lookups with VPSHUFB); hasSIMD
// reports either.
var (
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI
	hasAVX2   = cpu.X86.HasAVX2
	hasSIMD   = hasAVX512 || hasAVX2
)

// forceAVX2 makes decodeBlocks use the AVX2 kernel on an AVX-512 CPU
// (tests and benchmarks).
var forceAVX2 = false

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

// tables2 holds the AVX2 kernel's constants, each 16 bytes repeated in
// both 128-bit lanes: the class bits of a character's low nibble and of
// its high nibble (a character is in the alphabet exactly when the two
// share no bit; every high nibble ≥ 8 has bit 0x10, which every low
// nibble has too), the offset that turns a character into its 6-bit value
// by high nibble (index 1: '/', which the kernel moves there from 2), the
// byte order that packs each lane's four 24-bit dwords big-endian into 12
// bytes, and the dword order that joins the two lanes' 12 bytes.
var tables2 = func() (t [5][32]byte) {
	lo := [16]byte{0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1a, 0x1b, 0x1b, 0x1b, 0x1a}
	hi := [16]byte{0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10}
	roll := [16]int8{0, 16, 19, 4, -65, -65, -71, -71}
	for lane := range 2 {
		for i := range 16 {
			t[0][16*lane+i] = lo[i]
			t[1][16*lane+i] = hi[i]
			t[2][16*lane+i] = byte(roll[i])
			t[3][16*lane+i] = 0x80
		}
		for j := range 12 {
			t[3][16*lane+j] = byte(4*(j/3) + 2 - j%3)
		}
	}
	for i, d := range []uint32{0, 1, 2, 4, 5, 6, 3, 7} {
		t[4][4*i] = byte(d)
	}
	return t
}()

//go:noescape
func decodeAVX2(dst, src *byte, blocks int, tab *[5][32]byte) int

// decodeBlocks decodes whole 64-character blocks of src (len a multiple of
// 64) into dst while they hold only alphabet characters and returns how
// many it decoded (48 bytes each).
func decodeBlocks(dst, src []byte) int {
	n := len(src) / 64
	if n == 0 || len(dst) < n*48 {
		return 0
	}
	if hasAVX512 && !forceAVX2 {
		return decodeAVX512(&dst[0], &src[0], n, &tables)
	}
	return decodeAVX2(&dst[0], &src[0], n, &tables2)
}
