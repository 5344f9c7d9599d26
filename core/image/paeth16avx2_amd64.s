//go:build amd64 && !purego

#include "textflag.h"

// func paeth3x16AVX2(dst, src, prev *byte, n, dstride, sstride int, zmask *[16][128]byte)
//
// paeth3x8AVX2 (paeth8avx2_amd64.s) for sixteen rows: four YMM quarters
// D0–D3 (rows 4q..4q+3), lane 0 of quarter q taking its b from lane 3 of
// quarter q−1 (prev for q = 0). Each step does the quarters from 3 down to
// 0, so every b is formed from results of the previous step that are still
// in their registers; the previous b of each quarter (its next c) lives in
// a 32-byte stack slot. The serial chain per step is the eight-row
// kernel's (one VPERMQ, one VPBLENDD and the Paeth choice) for twice the
// rows. Stores, loads, bounds and the prologue and epilogue as in
// paeth3x8AVX2 with 15 for 7: only bytes [0, 3n) of each dst row are
// written, src must be readable up to src + 15·sstride + 3n + 1 and prev
// up to prev + 3n + 1; n ≥ 17. zmask row t clears lane t (qword t mod 4 of
// quarter t/4) in the prologue.
//
// Registers as in paeth3x8AVX2; CX and R15 are the src row pointers of
// rows 8 and 11 during the loads and the dst ones during the stores.

// QPAETH(D, c, B) replaces D by the unfiltered pixels of one quarter from
// a = D, b = B, c = the slot c(SP) and the filtered bytes Y6; the slot
// receives B. Y7–Y13 are scratch.
#define QPAETH(D, c, B) \
	VPSUBW c(SP), B, Y7 \
	VPSUBW c(SP), D, Y8 \
	VPADDW Y7, Y8, Y9 \
	VPADDB Y6, D, Y10 \
	VPADDB Y6, B, Y11 \
	VPADDB c(SP), Y6, Y12 \
	VPABSW Y7, Y7 \
	VPABSW Y8, Y8 \
	VPABSW Y9, Y9 \
	VPMINUW Y9, Y8, Y13 \
	VPSUBW Y8, Y9, Y9 \
	VPSUBW Y7, Y13, Y13 \
	VPSRAW $15, Y9, Y9 \
	VPSRAW $15, Y13, Y13 \
	VPBLENDVB Y9, Y12, Y11, Y11 \
	VPBLENDVB Y13, Y11, Y10, D \
	VMOVDQU B, c(SP)

// QLOAD(a0, a1, a2, a3) loads the filtered bytes of one quarter's four
// rows into Y6 as words.
#define QLOAD(a0, a1, a2, a3) \
	VMOVD a0, X6 \
	VPINSRD $1, a1, X6, X6 \
	VPINSRD $2, a2, X6, X6 \
	VPINSRD $3, a3, X6, X6 \
	VPMOVZXBW X6, Y6

// STEP16 computes one wavefront step and leaves the sixteen result
// pixels as dwords in X14, X13, X15, X12 (rows 0 1 4 5, 2 3 6 7, 8 9 12
// 13, 10 11 14 15), CX/R15 pointing at dst rows 8 and 11.
#define STEP16 \
	LEAQ (R8)(R10*8), CX \
	LEAQ (R9)(R10*8), R15 \
	VPERMQ $0x93, Y3, Y4 \
	VPERMQ $0x93, Y2, Y5 \
	VPBLENDD $0x03, Y5, Y4, Y4 \
	QLOAD((CX)(R10*4), (R15)(R10*2), (CX)(R11*2), (R15)(R10*4)) \
	QPAETH(Y3, 96, Y4) \
	VPERMQ $0x93, Y1, Y4 \
	VPBLENDD $0x03, Y4, Y5, Y5 \
	QLOAD((CX), (CX)(R10*1), (CX)(R10*2), (R15)) \
	QPAETH(Y2, 64, Y5) \
	VPERMQ $0x93, Y0, Y5 \
	VPBLENDD $0x03, Y5, Y4, Y4 \
	QLOAD((R8)(R10*4), (R9)(R10*2), (R8)(R11*2), (R9)(R10*4)) \
	QPAETH(Y1, 32, Y4) \
	VMOVD (SI), X4 \
	VPMOVZXBW X4, X4 \
	VPBLENDD $0x03, Y4, Y5, Y5 \
	QLOAD((R8), (R8)(R10*1), (R8)(R10*2), (R9)) \
	QPAETH(Y0, 0, Y5) \
	VPACKUSWB Y1, Y0, Y14 \
	VEXTRACTI128 $1, Y14, X13 \
	VPACKUSWB Y3, Y2, Y15 \
	VEXTRACTI128 $1, Y15, X12 \
	LEAQ (DI)(R13*8), CX \
	LEAQ (R12)(R13*8), R15

#define ADVANCE16 \
	ADDQ $3, R8 \
	ADDQ $3, R9 \
	ADDQ $3, DI \
	ADDQ $3, R12

TEXT ·paeth3x16AVX2(SB), NOSPLIT, $128-56
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
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VMOVDQU Y0, 0(SP)
	VMOVDQU Y0, 32(SP)
	VMOVDQU Y0, 64(SP)
	VMOVDQU Y0, 96(SP)
	SUBQ $17, DX // main-loop steps: 16 … n−2

	// Prologue: steps t = 0..15 (BX = t); lane t starts with a = c = 0
	// (row t of zmask); lanes k ≤ t stored.
	XORQ BX, BX

pro16:
	MOVQ BX, AX
	SHLQ $7, AX
	ADDQ zmask+48(FP), AX
	VPAND 0(AX), Y0, Y0
	VPAND 32(AX), Y1, Y1
	VPAND 64(AX), Y2, Y2
	VPAND 96(AX), Y3, Y3
	VMOVDQU 0(SP), Y4
	VPAND 0(AX), Y4, Y4
	VMOVDQU Y4, 0(SP)
	VMOVDQU 32(SP), Y4
	VPAND 32(AX), Y4, Y4
	VMOVDQU Y4, 32(SP)
	VMOVDQU 64(SP), Y4
	VPAND 64(AX), Y4, Y4
	VMOVDQU Y4, 64(SP)
	VMOVDQU 96(SP), Y4
	VPAND 96(AX), Y4, Y4
	VMOVDQU Y4, 96(SP)
	STEP16
	VMOVD X14, (DI)
	CMPQ BX, $1
	JLT prodone16
	VPEXTRD $1, X14, (DI)(R13*1)
	CMPQ BX, $2
	JLT prodone16
	VMOVD X13, (DI)(R13*2)
	CMPQ BX, $3
	JLT prodone16
	VPEXTRD $1, X13, (R12)
	CMPQ BX, $4
	JLT prodone16
	VPEXTRD $2, X14, (DI)(R13*4)
	CMPQ BX, $5
	JLT prodone16
	VPEXTRD $3, X14, (R12)(R13*2)
	CMPQ BX, $6
	JLT prodone16
	VPEXTRD $2, X13, (DI)(R14*2)
	CMPQ BX, $7
	JLT prodone16
	VPEXTRD $3, X13, (R12)(R13*4)
	CMPQ BX, $8
	JLT prodone16
	VMOVD X15, (CX)
	CMPQ BX, $9
	JLT prodone16
	VPEXTRD $1, X15, (CX)(R13*1)
	CMPQ BX, $10
	JLT prodone16
	VMOVD X12, (CX)(R13*2)
	CMPQ BX, $11
	JLT prodone16
	VPEXTRD $1, X12, (R15)
	CMPQ BX, $12
	JLT prodone16
	VPEXTRD $2, X15, (CX)(R13*4)
	CMPQ BX, $13
	JLT prodone16
	VPEXTRD $3, X15, (R15)(R13*2)
	CMPQ BX, $14
	JLT prodone16
	VPEXTRD $2, X12, (CX)(R14*2)
	CMPQ BX, $15
	JLT prodone16
	VPEXTRD $3, X12, (R15)(R13*4)

prodone16:
	ADVANCE16
	ADDQ $3, SI
	INCQ BX
	CMPQ BX, $16
	JLT pro16

	// Main loop: steps t = 16 .. n−2, every lane active, none at its end.
main16:
	TESTQ DX, DX
	JLE epi16
	STEP16
	VMOVD X14, (DI)
	VPEXTRD $1, X14, (DI)(R13*1)
	VMOVD X13, (DI)(R13*2)
	VPEXTRD $1, X13, (R12)
	VPEXTRD $2, X14, (DI)(R13*4)
	VPEXTRD $3, X14, (R12)(R13*2)
	VPEXTRD $2, X13, (DI)(R14*2)
	VPEXTRD $3, X13, (R12)(R13*4)
	VMOVD X15, (CX)
	VPEXTRD $1, X15, (CX)(R13*1)
	VMOVD X12, (CX)(R13*2)
	VPEXTRD $1, X12, (R15)
	VPEXTRD $2, X15, (CX)(R13*4)
	VPEXTRD $3, X15, (R15)(R13*2)
	VPEXTRD $2, X12, (CX)(R14*2)
	VPEXTRD $3, X12, (R15)(R13*4)
	ADVANCE16
	ADDQ $3, SI
	DECQ DX
	JMP main16

	// Epilogue: steps t = n−1 .. n+14 (BX = t−n+1 lanes finished before
	// this step); lane BX stores its last pixel, lanes above it a dword;
	// lane 0's prev pointer stays at pixel n−1.
epi16:
	XORQ BX, BX

epiloop16:
	STEP16
	CMPQ BX, $15
	JEQ last16_15
	VPEXTRD $3, X12, (R15)(R13*4)
	CMPQ BX, $14
	JEQ last16_14
	VPEXTRD $2, X12, (CX)(R14*2)
	CMPQ BX, $13
	JEQ last16_13
	VPEXTRD $3, X15, (R15)(R13*2)
	CMPQ BX, $12
	JEQ last16_12
	VPEXTRD $2, X15, (CX)(R13*4)
	CMPQ BX, $11
	JEQ last16_11
	VPEXTRD $1, X12, (R15)
	CMPQ BX, $10
	JEQ last16_10
	VMOVD X12, (CX)(R13*2)
	CMPQ BX, $9
	JEQ last16_9
	VPEXTRD $1, X15, (CX)(R13*1)
	CMPQ BX, $8
	JEQ last16_8
	VMOVD X15, (CX)
	CMPQ BX, $7
	JEQ last16_7
	VPEXTRD $3, X13, (R12)(R13*4)
	CMPQ BX, $6
	JEQ last16_6
	VPEXTRD $2, X13, (DI)(R14*2)
	CMPQ BX, $5
	JEQ last16_5
	VPEXTRD $3, X14, (R12)(R13*2)
	CMPQ BX, $4
	JEQ last16_4
	VPEXTRD $2, X14, (DI)(R13*4)
	CMPQ BX, $3
	JEQ last16_3
	VPEXTRD $1, X13, (R12)
	CMPQ BX, $2
	JEQ last16_2
	VMOVD X13, (DI)(R13*2)
	CMPQ BX, $1
	JEQ last16_1
	VPEXTRD $1, X14, (DI)(R13*1)
	VPEXTRD $0, X14, AX
	MOVW AX, (DI)
	SHRL $16, AX
	MOVB AX, 2(DI)
	JMP epidone16

last16_15:
	VPEXTRD $3, X12, AX
	MOVW AX, (R15)(R13*4)
	SHRL $16, AX
	MOVB AX, 2(R15)(R13*4)
	JMP epidone16

last16_14:
	VPEXTRD $2, X12, AX
	MOVW AX, (CX)(R14*2)
	SHRL $16, AX
	MOVB AX, 2(CX)(R14*2)
	JMP epidone16

last16_13:
	VPEXTRD $3, X15, AX
	MOVW AX, (R15)(R13*2)
	SHRL $16, AX
	MOVB AX, 2(R15)(R13*2)
	JMP epidone16

last16_12:
	VPEXTRD $2, X15, AX
	MOVW AX, (CX)(R13*4)
	SHRL $16, AX
	MOVB AX, 2(CX)(R13*4)
	JMP epidone16

last16_11:
	VPEXTRD $1, X12, AX
	MOVW AX, (R15)
	SHRL $16, AX
	MOVB AX, 2(R15)
	JMP epidone16

last16_10:
	VPEXTRD $0, X12, AX
	MOVW AX, (CX)(R13*2)
	SHRL $16, AX
	MOVB AX, 2(CX)(R13*2)
	JMP epidone16

last16_9:
	VPEXTRD $1, X15, AX
	MOVW AX, (CX)(R13*1)
	SHRL $16, AX
	MOVB AX, 2(CX)(R13*1)
	JMP epidone16

last16_8:
	VPEXTRD $0, X15, AX
	MOVW AX, (CX)
	SHRL $16, AX
	MOVB AX, 2(CX)
	JMP epidone16

last16_7:
	VPEXTRD $3, X13, AX
	MOVW AX, (R12)(R13*4)
	SHRL $16, AX
	MOVB AX, 2(R12)(R13*4)
	JMP epidone16

last16_6:
	VPEXTRD $2, X13, AX
	MOVW AX, (DI)(R14*2)
	SHRL $16, AX
	MOVB AX, 2(DI)(R14*2)
	JMP epidone16

last16_5:
	VPEXTRD $3, X14, AX
	MOVW AX, (R12)(R13*2)
	SHRL $16, AX
	MOVB AX, 2(R12)(R13*2)
	JMP epidone16

last16_4:
	VPEXTRD $2, X14, AX
	MOVW AX, (DI)(R13*4)
	SHRL $16, AX
	MOVB AX, 2(DI)(R13*4)
	JMP epidone16

last16_3:
	VPEXTRD $1, X13, AX
	MOVW AX, (R12)
	SHRL $16, AX
	MOVB AX, 2(R12)
	JMP epidone16

last16_2:
	VPEXTRD $0, X13, AX
	MOVW AX, (DI)(R13*2)
	SHRL $16, AX
	MOVB AX, 2(DI)(R13*2)
	JMP epidone16

last16_1:
	VPEXTRD $1, X14, AX
	MOVW AX, (DI)(R13*1)
	SHRL $16, AX
	MOVB AX, 2(DI)(R13*1)
	JMP epidone16

epidone16:
	ADVANCE16
	INCQ BX
	CMPQ BX, $16
	JLT epiloop16
	VZEROUPPER
	RET
