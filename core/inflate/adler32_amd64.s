//go:build amd64 && !purego

#include "textflag.h"

// Byte weights 32, 31, ..., 1 for VPMADDUBSW (signed operand).
DATA adlerWeights<>+0(SB)/8, $0x191a1b1c1d1e1f20
DATA adlerWeights<>+8(SB)/8, $0x1112131415161718
DATA adlerWeights<>+16(SB)/8, $0x090a0b0c0d0e0f10
DATA adlerWeights<>+24(SB)/8, $0x0102030405060708
GLOBL adlerWeights<>(SB), RODATA|NOPTR, $32

// Sixteen words of 1 for VPMADDWD.
DATA adlerOnes<>+0(SB)/8, $0x0001000100010001
DATA adlerOnes<>+8(SB)/8, $0x0001000100010001
DATA adlerOnes<>+16(SB)/8, $0x0001000100010001
DATA adlerOnes<>+24(SB)/8, $0x0001000100010001
GLOBL adlerOnes<>(SB), RODATA|NOPTR, $32

// func adler32AVX2(p *byte, n int) (sum, pre, wsum uint64)
//
// Per 32-byte chunk: pre += sum (before the chunk); sum += Σ bytes
// (VPSADBW into 4 qword lanes); wsum += Σ weight_j·byte_j (VPMADDUBSW to
// words, VPMADDWD to 8 dword lanes).
TEXT ·adler32AVX2(SB), NOSPLIT, $0-40
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1           // sum, qword lanes
	VPXOR Y2, Y2, Y2           // pre, qword lanes
	VPXOR Y3, Y3, Y3           // wsum, dword lanes
	VMOVDQU adlerWeights<>(SB), Y4
	VMOVDQU adlerOnes<>(SB), Y5

loop:
	VMOVDQU (SI), Y6
	VPADDQ Y1, Y2, Y2
	VPSADBW Y0, Y6, Y7
	VPADDQ Y7, Y1, Y1
	VPMADDUBSW Y4, Y6, Y8
	VPMADDWD Y5, Y8, Y8
	VPADDD Y8, Y3, Y3
	ADDQ $32, SI
	SUBQ $32, CX
	JNZ loop

	// Horizontal sums.
	VEXTRACTI128 $1, Y1, X7
	VPADDQ X7, X1, X1
	VPSHUFD $0x4e, X1, X7
	VPADDQ X7, X1, X1
	VMOVQ X1, AX
	MOVQ AX, sum+16(FP)

	VEXTRACTI128 $1, Y2, X7
	VPADDQ X7, X2, X2
	VPSHUFD $0x4e, X2, X7
	VPADDQ X7, X2, X2
	VMOVQ X2, AX
	MOVQ AX, pre+24(FP)

	VEXTRACTI128 $1, Y3, X7
	VPADDD X7, X3, X3
	VPSHUFD $0x4e, X3, X7
	VPADDD X7, X3, X3
	VPSHUFD $0xb1, X3, X7
	VPADDD X7, X3, X3
	VMOVD X3, AX
	MOVQ AX, wsum+32(FP)
	VZEROUPPER
	RET
