//go:build amd64 && !purego

#include "textflag.h"

// func paeth3x16AVX512(dst, src, prev *byte, n, dstride, sstride int)
//
// paeth3x8AVX512 (paeth8_amd64.s) for sixteen rows: two eight-row
// wavefronts in two ZMM registers (rows 0–7 "lo", rows 8–15 "hi"), lane 0
// of hi taking its b from lane 7 of lo (one VALIGNQ of the previous lo and
// hi results). Both halves have the same serial chain and run side by side:
// twice the rows for about 1.25× the time of the eight-row kernel (the
// step is then partly bound by throughput, not only by the chain). Steps 0–15
// start the rows, steps 16 … n−2 store all lanes, steps n−1 … n+14 finish
// them. Loads, stores and bounds as in the eight-row kernel with 15 for 7:
// only bytes [0, 3n) of each dst row are written, src must be readable up
// to src + 15·sstride + 3n + 1 and prev up to prev + 3n + 1. n ≥ 17.
//
// Registers as in paeth3x8AVX512; the hi half's row pointers are
// recomputed each step (CX, R15 = the lo pointers + 8 strides), DX counts
// steps, BX is the step (prologue) or the number of finished rows
// (epilogue).

#define LOADX(qa, qb, xa, xb, ya, z) \
	VMOVD (qa), xa \
	VPINSRD $1, (qa)(R10*1), xa, xa \
	VPINSRD $2, (qa)(R10*2), xa, xa \
	VPINSRD $3, (qb), xa, xa \
	VMOVD (qa)(R10*4), xb \
	VPINSRD $1, (qb)(R10*2), xb, xb \
	VPINSRD $2, (qa)(R11*2), xb, xb \
	VPINSRD $3, (qb)(R10*4), xb, xb \
	VINSERTI128 $1, xb, ya, ya \
	VPMOVZXBW ya, z

// PAETH: D = the new result from a = D, b = B, c = C, x = X; C = B;
// X11/X12 = the result's bytes (lanes 0–3, 4–7).
#define PAETH(D, C, X, B, T5, T6, T7, T8, T9, T10, T13, Y11, X11, X12) \
	VPSUBW C, B, T5 \
	VPSUBW C, D, T6 \
	VPADDW T5, T6, T7 \
	VPADDB X, D, T8 \
	VPADDB X, B, T9 \
	VPADDB X, C, T10 \
	VPABSW T5, T5 \
	VPABSW T6, T6 \
	VPABSW T7, T7 \
	VPMINUW T7, T6, T13 \
	VPSUBW T6, T7, T7 \
	VPSUBW T5, T13, T13 \
	VPSRAW $15, T7, T7 \
	VPSRAW $15, T13, D \
	VPTERNLOGD $0xCA, T9, T10, T7 \
	VPTERNLOGD $0xCA, T8, T7, D \
	VMOVDQA64 B, C \
	VPMOVWB D, Y11 \
	VEXTRACTI32X4 $1, Y11, X12

#define STEP \
	LOADX(R8, R9, X2, X5, Y2, Z2) \
	LEAQ (R8)(R10*8), CX \
	LEAQ (R9)(R10*8), R15 \
	LOADX(CX, R15, X14, X15, Y14, Z18) \
	VMOVD (SI), X3 \
	VPMOVZXBW X3, X3 \
	VPBROADCASTQ X3, Z3 \
	VALIGNQ $7, Z3, Z0, Z4 \
	VALIGNQ $7, Z0, Z16, Z20 \
	PAETH(Z0, Z1, Z2, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z13, Y11, X11, X12) \
	PAETH(Z16, Z17, Z18, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z29, Y27, X27, X28) \
	LEAQ (DI)(R13*8), CX \
	LEAQ (R12)(R13*8), R15

#define ST0 VMOVDQU8 X11, K4, (DI)
#define ST1 VMOVDQU8 X11, K5, -4(DI)(R13*1)
#define ST2 VMOVDQU8 X11, K6, -8(DI)(R13*2)
#define ST3 VMOVDQU8 X11, K7, -12(R12)
#define ST4 VMOVDQU8 X12, K4, (DI)(R13*4)
#define ST5 VMOVDQU8 X12, K5, -4(R12)(R13*2)
#define ST6 VMOVDQU8 X12, K6, -8(DI)(R14*2)
#define ST7 VMOVDQU8 X12, K7, -12(R12)(R13*4)
#define ST8 VMOVDQU8 X27, K4, (CX)
#define ST9 VMOVDQU8 X27, K5, -4(CX)(R13*1)
#define ST10 VMOVDQU8 X27, K6, -8(CX)(R13*2)
#define ST11 VMOVDQU8 X27, K7, -12(R15)
#define ST12 VMOVDQU8 X28, K4, (CX)(R13*4)
#define ST13 VMOVDQU8 X28, K5, -4(R15)(R13*2)
#define ST14 VMOVDQU8 X28, K6, -8(CX)(R14*2)
#define ST15 VMOVDQU8 X28, K7, -12(R15)(R13*4)

#define ADVANCE \
	ADDQ $3, R8 \
	ADDQ $3, R9 \
	ADDQ $3, DI \
	ADDQ $3, R12

TEXT ·paeth3x16AVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), R8
	MOVQ prev+16(FP), SI
	MOVQ n+24(FP), DX
	MOVQ dstride+32(FP), R13
	MOVQ sstride+40(FP), R10
	SUBQ $3, R13
	SUBQ $3, R10
	LEAQ (R10)(R10*2), R11
	LEAQ (R8)(R11*1), R9
	LEAQ (R13)(R13*2), R14
	LEAQ (DI)(R14*1), R12
	MOVL $0x7, AX
	KMOVW AX, K4
	MOVL $0x70, AX
	KMOVW AX, K5
	MOVL $0x700, AX
	KMOVW AX, K6
	MOVL $0x7000, AX
	KMOVW AX, K7
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z16, Z16, Z16
	VPXORQ Z17, Z17, Z17
	SUBQ $17, DX // main-loop steps: 16 … n−2

	// Prologue: steps t = 0..15 (BX = t); lane t starts with a = c = 0
	// (zeroing masks: bits 0–7 for lo, 8–15 for hi); lanes k ≤ t stored.
	XORQ BX, BX

pro:
	MOVQ BX, CX
	MOVL $1, AX
	SHLL CX, AX
	NOTL AX
	KMOVW AX, K1
	VMOVDQU64.Z Z0, K1, Z0
	VMOVDQU64.Z Z1, K1, Z1
	SHRL $8, AX
	KMOVW AX, K1
	VMOVDQU64.Z Z16, K1, Z16
	VMOVDQU64.Z Z17, K1, Z17
	STEP
	ST0
	CMPQ BX, $1
	JLT prodone
	ST1
	CMPQ BX, $2
	JLT prodone
	ST2
	CMPQ BX, $3
	JLT prodone
	ST3
	CMPQ BX, $4
	JLT prodone
	ST4
	CMPQ BX, $5
	JLT prodone
	ST5
	CMPQ BX, $6
	JLT prodone
	ST6
	CMPQ BX, $7
	JLT prodone
	ST7
	CMPQ BX, $8
	JLT prodone
	ST8
	CMPQ BX, $9
	JLT prodone
	ST9
	CMPQ BX, $10
	JLT prodone
	ST10
	CMPQ BX, $11
	JLT prodone
	ST11
	CMPQ BX, $12
	JLT prodone
	ST12
	CMPQ BX, $13
	JLT prodone
	ST13
	CMPQ BX, $14
	JLT prodone
	ST14
	CMPQ BX, $15
	JLT prodone
	ST15

prodone:
	ADVANCE
	ADDQ $3, SI
	INCQ BX
	CMPQ BX, $16
	JLT pro

	// Main loop: steps t = 16 .. n−2, every lane active.
main:
	TESTQ DX, DX
	JLE epi
	STEP
	ST0
	ST1
	ST2
	ST3
	ST4
	ST5
	ST6
	ST7
	ST8
	ST9
	ST10
	ST11
	ST12
	ST13
	ST14
	ST15
	ADVANCE
	ADDQ $3, SI
	DECQ DX
	JMP main

	// Epilogue: steps t = n−1 .. n+14 (BX = t−n+1 rows finished); lanes
	// k ≥ BX stored; lane 0's prev pointer stays at pixel n−1.
epi:
	XORQ BX, BX

epiloop:
	STEP
	ST15
	CMPQ BX, $15
	JGE epidone
	ST14
	CMPQ BX, $14
	JGE epidone
	ST13
	CMPQ BX, $13
	JGE epidone
	ST12
	CMPQ BX, $12
	JGE epidone
	ST11
	CMPQ BX, $11
	JGE epidone
	ST10
	CMPQ BX, $10
	JGE epidone
	ST9
	CMPQ BX, $9
	JGE epidone
	ST8
	CMPQ BX, $8
	JGE epidone
	ST7
	CMPQ BX, $7
	JGE epidone
	ST6
	CMPQ BX, $6
	JGE epidone
	ST5
	CMPQ BX, $5
	JGE epidone
	ST4
	CMPQ BX, $4
	JGE epidone
	ST3
	CMPQ BX, $3
	JGE epidone
	ST2
	CMPQ BX, $2
	JGE epidone
	ST1
	CMPQ BX, $1
	JGE epidone
	ST0

epidone:
	ADVANCE
	INCQ BX
	CMPQ BX, $16
	JLT epiloop
	VZEROUPPER
	RET
