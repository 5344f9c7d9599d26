//go:build amd64 && !purego

#include "textflag.h"

// Group kernels for horizontal passes; the table layout is described in
// hgroup.go (groupTab). AVX2 only.

// func hgroupI16AVX2(dst *int16, src *byte, off *int32, shuf *byte, w *int16, nblk int)
// One tap pair, blocks of 4 groups (16 outputs): for each block,
// dst[16b+i] = sat_i16((pmaddwd(pshufb(window), w)) >> 4) — the area-mode
// linear horizontal pass (HResizeLinear, 2048-scaled weights) with the >> 4
// of OpenCV's vertical pass folded in. Writes 16·nblk int16.
TEXT ·hgroupI16AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off+16(FP), R8
	MOVQ shuf+24(FP), R9
	MOVQ w+32(FP), R10
	MOVQ nblk+40(FP), CX
	TESTQ CX, CX
	JZ i16done

i16loop:
	MOVLQSX 0(R8), AX
	MOVLQSX 4(R8), BX
	MOVLQSX 8(R8), R11
	MOVLQSX 12(R8), R12
	VMOVDQU (SI)(AX*1), X0
	VINSERTI128 $1, (SI)(BX*1), Y0, Y0
	VMOVDQU (SI)(R11*1), X1
	VINSERTI128 $1, (SI)(R12*1), Y1, Y1
	VPSHUFB 0(R9), Y0, Y0
	VPSHUFB 32(R9), Y1, Y1
	VPMADDWD 0(R10), Y0, Y0
	VPMADDWD 32(R10), Y1, Y1
	VPSRAD $4, Y0, Y0
	VPSRAD $4, Y1, Y1
	VPACKSSDW Y1, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $16, R8
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $32, DI
	DECQ CX
	JNZ i16loop

i16done:
	VZEROUPPER
	RET

// func hgroupU8AVX2(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, shuf *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)
// np tap pairs, blocks of 8 groups (32 outputs), for rows rows: for each
// row and block b, dst[bdst[b]+i] = sat_u8(sat_i16((init + Σ_p
// pmaddwd(pshufb(window_p), w_p)) >> prec)) — torch's antialiased
// horizontal pass (clamp to 0..255 after the arithmetic shift).
TEXT ·hgroupU8AVX2(SB), NOSPLIT, $0-108
	MOVQ dst+0(FP), DI
	MOVQ src+16(FP), SI
	MOVQ prec+96(FP), AX
	VMOVQ AX, X13
	MOVL init+104(FP), AX
	VMOVQ AX, X12
	VPBROADCASTD X12, Y12
	MOVQ rows+32(FP), R15
	TESTQ R15, R15
	JZ u8done

u8row:
	MOVQ off+40(FP), R8
	MOVQ shuf+48(FP), R9
	MOVQ w+56(FP), R10
	MOVQ bdst+64(FP), R11
	MOVQ nblk+72(FP), CX

u8blk:
	VMOVDQU 0(R9), Y8
	VMOVDQU 32(R9), Y9
	VMOVDQU 64(R9), Y10
	VMOVDQU 96(R9), Y11
	VMOVDQA Y12, Y0
	VMOVDQA Y12, Y1
	VMOVDQA Y12, Y2
	VMOVDQA Y12, Y3
	MOVQ SI, BX
	MOVQ np+80(FP), DX

u8pair:
	MOVLQSX 0(R8), AX
	MOVLQSX 4(R8), R12
	VMOVDQU (BX)(AX*1), X4
	VINSERTI128 $1, (BX)(R12*1), Y4, Y4
	MOVLQSX 8(R8), AX
	MOVLQSX 12(R8), R12
	VMOVDQU (BX)(AX*1), X5
	VINSERTI128 $1, (BX)(R12*1), Y5, Y5
	MOVLQSX 16(R8), AX
	MOVLQSX 20(R8), R12
	VMOVDQU (BX)(AX*1), X6
	VINSERTI128 $1, (BX)(R12*1), Y6, Y6
	MOVLQSX 24(R8), AX
	MOVLQSX 28(R8), R12
	VMOVDQU (BX)(AX*1), X7
	VINSERTI128 $1, (BX)(R12*1), Y7, Y7
	VPSHUFB Y8, Y4, Y4
	VPSHUFB Y9, Y5, Y5
	VPSHUFB Y10, Y6, Y6
	VPSHUFB Y11, Y7, Y7
	VPMADDWD 0(R10), Y4, Y4
	VPMADDWD 32(R10), Y5, Y5
	VPMADDWD 64(R10), Y6, Y6
	VPMADDWD 96(R10), Y7, Y7
	VPADDD Y4, Y0, Y0
	VPADDD Y5, Y1, Y1
	VPADDD Y6, Y2, Y2
	VPADDD Y7, Y3, Y3
	ADDQ pstride+88(FP), BX
	ADDQ $128, R10
	DECQ DX
	JNZ u8pair

	VPSRAD X13, Y0, Y0
	VPSRAD X13, Y1, Y1
	VPSRAD X13, Y2, Y2
	VPSRAD X13, Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	MOVLQSX (R11), AX
	VMOVDQU Y0, (DI)(AX*1)
	ADDQ $32, R8
	ADDQ $128, R9
	ADDQ $4, R11
	DECQ CX
	JNZ u8blk

	ADDQ dstride+8(FP), DI
	ADDQ sstride+24(FP), SI
	DECQ R15
	JNZ u8row

u8done:
	VZEROUPPER
	RET

// func vlinearI16AVX2(dst *byte, h0, h1 *int16, n int, b0, b1 int32)
// OpenCV's VResizeLinear<uchar,int,short,...> on rows already shifted
// right by 4 (see hgroupI16AVX2): for i in [0, n), n ≥ 32,
//   dst[i] = sat_u8((mulhi16(b0, h0[i]) + mulhi16(b1, h1[i]) + 2) >> 2).
// When n is not a multiple of 32 the last block is recomputed ending at n.
TEXT ·vlinearI16AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ h0+8(FP), SI
	MOVQ h1+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL b0+32(FP), AX
	VMOVQ AX, X6
	VPBROADCASTW X6, Y6
	MOVL b1+36(FP), AX
	VMOVQ AX, X5
	VPBROADCASTW X5, Y5
	MOVL $0x00020002, AX
	VMOVQ AX, X7
	VPBROADCASTD X7, Y7
	XORQ R8, R8
	MOVQ CX, R9
	SUBQ $32, R9 // last block start

vlloop:
	CMPQ R8, R9
	JLE vlblock
	// Tail: one block ending at n unless the previous one did.
	LEAQ 32(R9), AX
	CMPQ R8, AX
	JGE vldone
	MOVQ R9, R8

vlblock:
	VMOVDQU (SI)(R8*2), Y0
	VMOVDQU 32(SI)(R8*2), Y1
	VMOVDQU (DX)(R8*2), Y2
	VMOVDQU 32(DX)(R8*2), Y3
	VPMULHW Y6, Y0, Y0
	VPMULHW Y6, Y1, Y1
	VPMULHW Y5, Y2, Y2
	VPMULHW Y5, Y3, Y3
	VPADDW Y2, Y0, Y0
	VPADDW Y3, Y1, Y1
	VPADDW Y7, Y0, Y0
	VPADDW Y7, Y1, Y1
	VPSRAW $2, Y0, Y0
	VPSRAW $2, Y1, Y1
	VPACKUSWB Y1, Y0, Y0
	VPERMQ $0xD8, Y0, Y0
	VMOVDQU Y0, (DI)(R8*1)
	ADDQ $32, R8
	JMP vlloop

vldone:
	VZEROUPPER
	RET

// func hgroupI16BcastAVX2(dst *int16, src *byte, off *int32, shuf *byte, w *int16, nblk int)
// hgroupI16AVX2 for paired blocks (groupTab.runs): the two entries of each
// ymm share one 16-byte window (off of the even entry), loaded once into
// both lanes with VBROADCASTI128.
TEXT ·hgroupI16BcastAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off+16(FP), R8
	MOVQ shuf+24(FP), R9
	MOVQ w+32(FP), R10
	MOVQ nblk+40(FP), CX
	TESTQ CX, CX
	JZ bdone

bloop:
	MOVLQSX 0(R8), AX
	MOVLQSX 8(R8), BX
	VBROADCASTI128 (SI)(AX*1), Y0
	VBROADCASTI128 (SI)(BX*1), Y1
	VPSHUFB 0(R9), Y0, Y0
	VPSHUFB 32(R9), Y1, Y1
	VPMADDWD 0(R10), Y0, Y0
	VPMADDWD 32(R10), Y1, Y1
	VPSRAD $4, Y0, Y0
	VPSRAD $4, Y1, Y1
	VPACKSSDW Y1, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $16, R8
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $32, DI
	DECQ CX
	JNZ bloop

bdone:
	VZEROUPPER
	RET

// func hgroupU8JoinedAVX2(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, shuf *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)
// hgroupU8AVX2 for paired blocks (groupTab.runs): the window of each ymm's
// odd entry starts 16 bytes after its even entry's, so one 32-byte load at
// the even entry's offset fills both lanes (four loads per tap pair
// instead of eight and four VINSERTI128).
TEXT ·hgroupU8JoinedAVX2(SB), NOSPLIT, $0-108
	MOVQ dst+0(FP), DI
	MOVQ src+16(FP), SI
	MOVQ prec+96(FP), AX
	VMOVQ AX, X13
	MOVL init+104(FP), AX
	VMOVQ AX, X12
	VPBROADCASTD X12, Y12
	MOVQ rows+32(FP), R15
	TESTQ R15, R15
	JZ jdone

jrow:
	MOVQ off+40(FP), R8
	MOVQ shuf+48(FP), R9
	MOVQ w+56(FP), R10
	MOVQ bdst+64(FP), R11
	MOVQ nblk+72(FP), CX

jblk:
	VMOVDQU 0(R9), Y8
	VMOVDQU 32(R9), Y9
	VMOVDQU 64(R9), Y10
	VMOVDQU 96(R9), Y11
	VMOVDQA Y12, Y0
	VMOVDQA Y12, Y1
	VMOVDQA Y12, Y2
	VMOVDQA Y12, Y3
	MOVLQSX 0(R8), AX
	MOVLQSX 8(R8), R12
	MOVLQSX 16(R8), R13
	MOVLQSX 24(R8), R14
	ADDQ SI, AX
	ADDQ SI, R12
	ADDQ SI, R13
	ADDQ SI, R14
	XORQ BX, BX
	MOVQ np+80(FP), DX

jpair:
	VMOVDQU (AX)(BX*1), Y4
	VMOVDQU (R12)(BX*1), Y5
	VMOVDQU (R13)(BX*1), Y6
	VMOVDQU (R14)(BX*1), Y7
	VPSHUFB Y8, Y4, Y4
	VPSHUFB Y9, Y5, Y5
	VPSHUFB Y10, Y6, Y6
	VPSHUFB Y11, Y7, Y7
	VPMADDWD 0(R10), Y4, Y4
	VPMADDWD 32(R10), Y5, Y5
	VPMADDWD 64(R10), Y6, Y6
	VPMADDWD 96(R10), Y7, Y7
	VPADDD Y4, Y0, Y0
	VPADDD Y5, Y1, Y1
	VPADDD Y6, Y2, Y2
	VPADDD Y7, Y3, Y3
	ADDQ pstride+88(FP), BX
	ADDQ $128, R10
	DECQ DX
	JNZ jpair

	VPSRAD X13, Y0, Y0
	VPSRAD X13, Y1, Y1
	VPSRAD X13, Y2, Y2
	VPSRAD X13, Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	MOVLQSX (R11), AX
	VMOVDQU Y0, (DI)(AX*1)
	ADDQ $32, R8
	ADDQ $128, R9
	ADDQ $4, R11
	DECQ CX
	JNZ jblk

	ADDQ dstride+8(FP), DI
	ADDQ sstride+24(FP), SI
	DECQ R15
	JNZ jrow

jdone:
	VZEROUPPER
	RET
