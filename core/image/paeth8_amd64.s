//go:build amd64 && !purego

#include "textflag.h"

// func paeth3x8AVX512(dst, src, prev *byte, n, dstride, sstride int)
//
// Reverses the PNG Paeth filter of eight consecutive 3-byte-per-pixel rows
// out of place: src row k (filtered, at src + k·sstride) → dst row k (at
// dst + k·dstride), prev = the unfiltered row above dst row 0. The rows
// form a wavefront in one ZMM register: step t does pixel t−k of row k in
// qword k as four 16-bit words (R, G, B, junk). With D the previous step's
// result: a = D, b = {prev[t], D.q0 … D.q6} (one VALIGNQ), c = the previous
// b. With t1 = b−c, t2 = a−c: pa = |t1|, pb = |t2|, pc = |t1+t2|; "not a"
// = sign(min(pb, pc) − pa), "c rather than b" = sign(pc − pb) (VPSRAW 15
// makes the signs word masks; the values fit int16), and two VPTERNLOGD
// bit-selects pick among the candidate sums x+a, x+b, x+c (VPADDB on
// zero-extended words, i.e. mod 256), computed before the masks are
// known. Ties favour a, then b, as the PNG predictor does. The serial
// chain per step is VALIGNQ (5 cycles on Zen 5) → sub → add → abs → min →
// sub → sra → ternlog (2 cycles each): about 19 cycles for eight pixels.
// (Compares into k-masks with VPBLENDMW measured no faster.)
//
// Steps 0–7 (prologue) start row t at pixel 0 with a = c = 0 in lane t and
// store only the lanes already started; steps 8 … n−2 store all lanes;
// steps n−1 … n+6 (epilogue) store only the lanes not yet finished. Every
// lane is written with a 3-byte masked store (VMOVDQU8 with k4–k7), so no
// byte outside dst rows [0, 3n) is ever written and no byte is written
// twice. Loads: 4 bytes per lane per step from src (lanes before their
// start read the tail of the row above, lanes past their end read the
// head of the row below, never before src: the caller guarantees src is
// readable up to src + 7·sstride + 3n + 1, sstride ≥ 3n) and 4 bytes from
// prev (readable up to prev + 3n + 1). n ≥ 9, dstride ≥ 3n.
//
// Register use: R8/R9 src + 3t (+3·S'), R10 S' = sstride−3, R11 3·S';
// DI/R12 dst + 3t (+3·E), R13 E = dstride−3, R14 3·E; SI prev + 3t.

#define STEP \
	VMOVD (R8), X2 \
	VPINSRD $1, (R8)(R10*1), X2, X2 \
	VPINSRD $2, (R8)(R10*2), X2, X2 \
	VPINSRD $3, (R9), X2, X2 \
	VMOVD (R8)(R10*4), X5 \
	VPINSRD $1, (R9)(R10*2), X5, X5 \
	VPINSRD $2, (R8)(R11*2), X5, X5 \
	VPINSRD $3, (R9)(R10*4), X5, X5 \
	VINSERTI128 $1, X5, Y2, Y2 \
	VPMOVZXBW Y2, Z2 \
	VMOVD (SI), X3 \
	VPMOVZXBW X3, X3 \
	VPBROADCASTQ X3, Z3 \
	VALIGNQ $7, Z3, Z0, Z4 \
	VPSUBW Z1, Z4, Z5 \
	VPSUBW Z1, Z0, Z6 \
	VPADDW Z5, Z6, Z7 \
	VPADDB Z2, Z0, Z8 \
	VPADDB Z2, Z4, Z9 \
	VPADDB Z2, Z1, Z10 \
	VPABSW Z5, Z5 \
	VPABSW Z6, Z6 \
	VPABSW Z7, Z7 \
	VPMINUW Z7, Z6, Z13 \
	VPSUBW Z6, Z7, Z7 \
	VPSUBW Z5, Z13, Z13 \
	VPSRAW $15, Z7, Z7 \
	VPSRAW $15, Z13, Z0 \
	VPTERNLOGD $0xCA, Z9, Z10, Z7 \
	VPTERNLOGD $0xCA, Z8, Z7, Z0 \
	VMOVDQA64 Z4, Z1 \
	VPMOVWB Z0, Y11 \
	VEXTRACTI128 $1, Y11, X12

#define ST0 VMOVDQU8 X11, K4, (DI)
#define ST1 VMOVDQU8 X11, K5, -4(DI)(R13*1)
#define ST2 VMOVDQU8 X11, K6, -8(DI)(R13*2)
#define ST3 VMOVDQU8 X11, K7, -12(R12)
#define ST4 VMOVDQU8 X12, K4, (DI)(R13*4)
#define ST5 VMOVDQU8 X12, K5, -4(R12)(R13*2)
#define ST6 VMOVDQU8 X12, K6, -8(DI)(R14*2)
#define ST7 VMOVDQU8 X12, K7, -12(R12)(R13*4)

#define ADVANCE \
	ADDQ $3, R8 \
	ADDQ $3, R9 \
	ADDQ $3, DI \
	ADDQ $3, R12

TEXT ·paeth3x8AVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), R8
	MOVQ prev+16(FP), SI
	MOVQ n+24(FP), CX
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

	// Prologue: steps t = 0..7 (BX = t). Lane t starts at pixel 0 with
	// a = c = 0; lanes k ≤ t are stored.
	XORQ BX, BX
	MOVL $1, DX

pro:
	MOVL DX, AX
	NOTL AX
	KMOVW AX, K1
	SHLL $1, DX
	VMOVDQU64.Z Z0, K1, Z0
	VMOVDQU64.Z Z1, K1, Z1
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

prodone:
	ADVANCE
	ADDQ $3, SI
	INCQ BX
	CMPQ BX, $8
	JLT pro

	// Main loop: steps t = 8 .. n−2, every lane active.
	LEAQ -9(CX), DX

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
	ADVANCE
	ADDQ $3, SI
	DECQ DX
	JMP main

	// Epilogue: steps t = n−1 .. n+6 (BX = t−n+1 lanes finished); lane 0's
	// prev pointer stays at pixel n−1.
epi:
	XORQ BX, BX

epiloop:
	STEP
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
	CMPQ BX, $8
	JLT epiloop
	VZEROUPPER
	RET
