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
