//go:build amd64 && !purego

#include "textflag.h"

// func decodeAVX512(dst, src *byte, blocks int, tab *[4][64]byte) int
// Per 64 input characters: translate with VPERMI2B over the 128-entry
// table (bytes ≥ 0x80 or outside the alphabet leave bit 7 set: stop
// before that block), pack 6-bit values pairwise with VPMADDUBSW (a·64+b)
// and VPMADDWD (x·4096+y), reorder the 3 useful bytes of each dword with
// VPERMB and store 48 bytes (masked). Returns the number of blocks done.
TEXT ·decodeAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ blocks+16(FP), CX
	MOVQ tab+24(FP), R8
	VMOVDQU64 0(R8), Z20   // translation, characters 0..63
	VMOVDQU64 64(R8), Z21  // translation, characters 64..127
	VMOVDQU64 128(R8), Z22 // 0x40, 0x01 byte pairs
	VMOVDQU64 192(R8), Z24 // output byte order
	MOVL $0x00011000, AX
	VPBROADCASTD AX, Z23   // words 0x1000, 0x0001
	MOVQ $0xffffffffffff, AX
	KMOVQ AX, K1           // 48-byte store mask
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE done
	VMOVDQU64 (SI), Z0
	VMOVDQA64 Z0, Z1
	VPERMI2B Z21, Z20, Z1  // Z1[i] = table[Z0[i] & 127]
	VPORQ Z0, Z1, Z2
	VPMOVB2M Z2, K2
	KORTESTQ K2, K2
	JNZ done
	VPMADDUBSW Z22, Z1, Z1 // words: a·64 + b
	VPMADDWD Z23, Z1, Z1   // dwords: x·4096 + y (24 bits)
	VPERMB Z1, Z24, Z1
	VMOVDQU8 Z1, K1, (DI)
	ADDQ $64, SI
	ADDQ $48, DI
	INCQ AX
	JMP loop

done:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET

// TRANSLATE(s, hi, lo, t) checks and translates the 32 characters in s
// (Muła and Lemire's nibble lookups): lo = tab0[low nibble], hi =
// tab1[high nibble], and lo AND hi is non-zero exactly in the bytes that
// are not in the alphabet (bytes ≥ 0x80 included: their high nibble's
// entry meets every low-nibble entry); s += tab2[high nibble − (s ==
// '/')], the offset from ASCII to the 6-bit value. hi is left holding
// the invalid bits. Y8–Y10 hold the three tables, Y13 0x2f in every byte.
#define TRANSLATE(s, hi, lo, t) \
	VPSRLD $4, s, hi \
	VPAND Y13, s, lo \
	VPAND Y13, hi, hi \
	VPCMPEQB Y13, s, t \
	VPADDB hi, t, t \
	VPSHUFB lo, Y8, lo \
	VPSHUFB hi, Y9, hi \
	VPSHUFB t, Y10, t \
	VPAND lo, hi, hi \
	VPADDB t, s, s

// PACK(s) packs the 32 6-bit values in s into 24 bytes at the bottom of
// s: pairs a·64 + b (VPMADDUBSW), then x·4096 + y (VPMADDWD), the three
// bytes of each dword big-endian and together per lane (VPSHUFB with
// Y11), the two lanes' 12 bytes together (VPERMD with Y12).
#define PACK(s) \
	VPMADDUBSW Y14, s, s \
	VPMADDWD Y15, s, s \
	VPSHUFB Y11, s, s \
	VPERMD s, Y12, s

// func decodeAVX2(dst, src *byte, blocks int, tab *[5][32]byte) int
// decodeAVX512 for AVX2: per 64 characters two 32-byte halves are checked
// and translated (TRANSLATE); a block with any character outside the
// alphabet stops the loop before it. Exactly 48 bytes are stored per
// block (32 + 16 + 8, the first store's last 8 bytes overwritten by the
// second). Returns the number of blocks done.
TEXT ·decodeAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ blocks+16(FP), CX
	MOVQ tab+24(FP), R8
	VMOVDQU 0(R8), Y8    // low-nibble classes
	VMOVDQU 32(R8), Y9   // high-nibble classes
	VMOVDQU 64(R8), Y10  // ASCII → 6-bit offsets
	VMOVDQU 96(R8), Y11  // per-lane byte order
	VMOVDQU 128(R8), Y12 // dword order
	MOVL $0x2f2f2f2f, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x01400140, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14 // byte pairs 0x40, 0x01
	MOVL $0x00011000, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15 // words 0x1000, 0x0001
	XORQ AX, AX

loop2:
	CMPQ AX, CX
	JGE done2
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	TRANSLATE(Y0, Y2, Y3, Y4)
	TRANSLATE(Y1, Y5, Y6, Y7)
	VPOR Y2, Y5, Y2
	VPTEST Y2, Y2
	JNZ done2
	PACK(Y0)
	PACK(Y1)
	VMOVDQU Y0, (DI)
	VMOVDQU X1, 24(DI)
	VEXTRACTI128 $1, Y1, X1
	VMOVQ X1, 40(DI)
	ADDQ $64, SI
	ADDQ $48, DI
	INCQ AX
	JMP loop2

done2:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET
