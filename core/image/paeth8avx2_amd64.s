//go:build amd64 && !purego

#include "textflag.h"

// func paeth3x8AVX2(dst, src, prev *byte, n, dstride, sstride int, zmask *[8][64]byte)
//
// Reverses the PNG Paeth filter of eight consecutive 3-byte-per-pixel rows
// out of place: src row k (filtered, at src + k·sstride) → dst row k (at
// dst + k·dstride), prev = the unfiltered row above dst row 0. The rows
// form a wavefront in two YMM registers (rows 0–3 "lo" in Y0 with the
// previous b in Y1, rows 4–7 "hi" in Y2/Y3): step t does pixel t−k of row
// k in qword k as four 16-bit words (R, G, B, junk). With D the previous
// step's result: a = D, b_lo = {prev[t], D_lo.q0, D_lo.q1, D_lo.q2} and
// b_hi = {D_lo.q3, D_hi.q0, D_hi.q1, D_hi.q2} (VPERMQ rotations and
// VPBLENDD), c = the previous b. With t1 = b−c, t2 = a−c: pa = |t1|, pb =
// |t2|, pc = |t1+t2|; "not a" = sign(min(pb, pc) − pa), "c rather than b"
// = sign(pc − pb) (VPSRAW 15 makes the signs word masks; the values fit
// int16), and two VPBLENDVB pick among the candidate sums x+a, x+b, x+c
// (VPADDB on zero-extended words, i.e. mod 256), computed before the masks
// are known. Ties favour a, then b, as the PNG predictor does. A step is a
// serial chain (rotate/blend → sub → add → abs → min → sub → sra → blend),
// so only more rows per step pays (paeth3x16AVX2).
//
// Steps 0–7 (prologue) start row t at pixel 0 with a = c = 0 (VPAND with
// row t of zmask, which clears that lane's qword) and store only the lanes
// already started; steps 8 … n−2 store all lanes; steps n−1 … n+6
// (epilogue) store only the lanes not yet finished. Stores without byte
// masks: each active lane stores its pixel as one dword (VMOVD/VPEXTRD),
// whose fourth byte lands on the lane's next pixel and is overwritten by
// the next step; the step that finishes a lane (pixel n−1) stores 2 + 1
// bytes instead. So only bytes [0, 3n) of each dst row are written. Loads:
// 4 bytes per lane per step from src (lanes before their start read the
// tail of the row above, lanes past their end read the head of the row
// below, never before src: the caller guarantees src is readable up to src
// + 7·sstride + 3n + 1, sstride ≥ 3n) and 4 bytes from prev (readable up
// to prev + 3n + 1). n ≥ 9, dstride ≥ 3n.
//
// Register use: R8/R9 src + 3t (+3·S'), R10 S' = sstride−3, R11 3·S';
// DI/R12 dst + 3t (+3·E), R13 E = dstride−3, R14 3·E; SI prev + 3t;
// R15 zmask.

// PAETH2(D, C, X, B) replaces D by the unfiltered pixels from a = D,
// b = B, c = C and the filtered bytes X (all zero-extended words), and C
// by B. Y9–Y15 are scratch.
#define PAETH2(D, C, X, B) \
	VPSUBW C, B, Y9 \
	VPSUBW C, D, Y10 \
	VPADDW Y9, Y10, Y11 \
	VPADDB X, D, Y12 \
	VPADDB X, B, Y13 \
	VPADDB X, C, Y14 \
	VPABSW Y9, Y9 \
	VPABSW Y10, Y10 \
	VPABSW Y11, Y11 \
	VPMINUW Y11, Y10, Y15 \
	VPSUBW Y10, Y11, Y11 \
	VPSUBW Y9, Y15, Y15 \
	VPSRAW $15, Y11, Y11 \
	VPSRAW $15, Y15, Y15 \
	VPBLENDVB Y11, Y14, Y13, Y13 \
	VPBLENDVB Y15, Y13, Y12, D \
	VMOVDQA B, C

// STEP2 computes one wavefront step and leaves the eight result pixels as
// dwords in X6 (rows 0, 1, 4, 5) and X9 (rows 2, 3, 6, 7).
#define STEP2 \
	VMOVD (R8), X7 \
	VPINSRD $1, (R8)(R10*1), X7, X7 \
	VPINSRD $2, (R8)(R10*2), X7, X7 \
	VPINSRD $3, (R9), X7, X7 \
	VMOVD (R8)(R10*4), X8 \
	VPINSRD $1, (R9)(R10*2), X8, X8 \
	VPINSRD $2, (R8)(R11*2), X8, X8 \
	VPINSRD $3, (R9)(R10*4), X8, X8 \
	VPMOVZXBW X7, Y7 \
	VPMOVZXBW X8, Y8 \
	VPERMQ $0x93, Y0, Y4 \
	VPERMQ $0x93, Y2, Y5 \
	VPBLENDD $0x03, Y4, Y5, Y5 \
	VMOVD (SI), X6 \
	VPMOVZXBW X6, X6 \
	VPBLENDD $0x03, Y6, Y4, Y4 \
	PAETH2(Y0, Y1, Y7, Y4) \
	PAETH2(Y2, Y3, Y8, Y5) \
	VPACKUSWB Y2, Y0, Y6 \
	VEXTRACTI128 $1, Y6, X9

#define S0 VMOVD X6, (DI)
#define S1 VPEXTRD $1, X6, (DI)(R13*1)
#define S2 VMOVD X9, (DI)(R13*2)
#define S3 VPEXTRD $1, X9, (R12)
#define S4 VPEXTRD $2, X6, (DI)(R13*4)
#define S5 VPEXTRD $3, X6, (R12)(R13*2)
#define S6 VPEXTRD $2, X9, (DI)(R14*2)
#define S7 VPEXTRD $3, X9, (R12)(R13*4)

// LAST(x, i, addr) stores the three bytes of dword i of x at addr (the
// last pixel of a row: its fourth byte would leave the row).
#define LAST(x, i, a0, a1) \
	VPEXTRD $i, x, AX \
	MOVW AX, a0 \
	SHRL $16, AX \
	MOVB AX, a1

#define L0 LAST(X6, 0, (DI), 2(DI))
#define L1 LAST(X6, 1, (DI)(R13*1), 2(DI)(R13*1))
#define L2 LAST(X9, 0, (DI)(R13*2), 2(DI)(R13*2))
#define L3 LAST(X9, 1, (R12), 2(R12))
#define L4 LAST(X6, 2, (DI)(R13*4), 2(DI)(R13*4))
#define L5 LAST(X6, 3, (R12)(R13*2), 2(R12)(R13*2))
#define L6 LAST(X9, 2, (DI)(R14*2), 2(DI)(R14*2))
#define L7 LAST(X9, 3, (R12)(R13*4), 2(R12)(R13*4))

#define ADVANCE2 \
	ADDQ $3, R8 \
	ADDQ $3, R9 \
	ADDQ $3, DI \
	ADDQ $3, R12

TEXT ·paeth3x8AVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), R8
	MOVQ prev+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ dstride+32(FP), R13
	MOVQ sstride+40(FP), R10
	MOVQ zmask+48(FP), R15
	SUBQ $3, R13
	SUBQ $3, R10
	LEAQ (R10)(R10*2), R11
	LEAQ (R8)(R11*1), R9
	LEAQ (R13)(R13*2), R14
	LEAQ (DI)(R14*1), R12
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

	// Prologue: steps t = 0..7 (BX = t). Lane t starts at pixel 0 with
	// a = c = 0; lanes k ≤ t are stored.
	XORQ BX, BX
	MOVQ R15, DX

pro2:
	VPAND (DX), Y0, Y0
	VPAND (DX), Y1, Y1
	VPAND 32(DX), Y2, Y2
	VPAND 32(DX), Y3, Y3
	ADDQ $64, DX
	STEP2
	S0
	CMPQ BX, $1
	JLT prodone2
	S1
	CMPQ BX, $2
	JLT prodone2
	S2
	CMPQ BX, $3
	JLT prodone2
	S3
	CMPQ BX, $4
	JLT prodone2
	S4
	CMPQ BX, $5
	JLT prodone2
	S5
	CMPQ BX, $6
	JLT prodone2
	S6
	CMPQ BX, $7
	JLT prodone2
	S7

prodone2:
	ADVANCE2
	ADDQ $3, SI
	INCQ BX
	CMPQ BX, $8
	JLT pro2

	// Main loop: steps t = 8 .. n−2, every lane active, none at its end.
	LEAQ -9(CX), DX

main2:
	TESTQ DX, DX
	JLE epi2
	STEP2
	S0
	S1
	S2
	S3
	S4
	S5
	S6
	S7
	ADVANCE2
	ADDQ $3, SI
	DECQ DX
	JMP main2

	// Epilogue: steps t = n−1 .. n+6 (BX = t−n+1 lanes finished before
	// this step); lane BX stores its last pixel, lanes above it a dword;
	// lane 0's prev pointer stays at pixel n−1.
epi2:
	XORQ BX, BX

epiloop2:
	STEP2
	CMPQ BX, $7
	JEQ last7
	S7
	CMPQ BX, $6
	JEQ last6
	S6
	CMPQ BX, $5
	JEQ last5
	S5
	CMPQ BX, $4
	JEQ last4
	S4
	CMPQ BX, $3
	JEQ last3
	S3
	CMPQ BX, $2
	JEQ last2
	S2
	CMPQ BX, $1
	JEQ last1
	S1
	L0
	JMP epidone2

last7:
	L7
	JMP epidone2

last6:
	L6
	JMP epidone2

last5:
	L5
	JMP epidone2

last4:
	L4
	JMP epidone2

last3:
	L3
	JMP epidone2

last2:
	L2
	JMP epidone2

last1:
	L1

epidone2:
	ADVANCE2
	INCQ BX
	CMPQ BX, $8
	JLT epiloop2
	VZEROUPPER
	RET
