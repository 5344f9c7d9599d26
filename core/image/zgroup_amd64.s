//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 (F, BW, VBMI) kernels of the horizontal group passes and the
// area-mode vertical pass; the table layout is zgroupTab's (hgroup.go).
// Same integer arithmetic as the AVX2 kernels in hgroup_amd64.s.

// func zgroupI16AVX512(dst *int16, src *byte, off *int32, idx *byte, w *int16, nblk int)
// One tap pair, blocks of two zmm (32 int16 outputs):
// dst[32b+i] = sat_i16(pmaddwd(vpermb(window), w) >> 4).
TEXT ·zgroupI16AVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off+16(FP), R8
	MOVQ idx+24(FP), R9
	MOVQ w+32(FP), R10
	MOVQ nblk+40(FP), CX
	TESTQ CX, CX
	JZ zi16done
	MOVQ $0x5555555555555555, AX
	KMOVQ AX, K1

zi16loop:
	MOVLQSX 0(R8), AX
	MOVLQSX 4(R8), BX
	VMOVDQU8 0(R9), Z20
	VMOVDQU8 64(R9), Z21
	VPERMB.Z (SI)(AX*1), Z20, K1, Z0
	VPERMB.Z (SI)(BX*1), Z21, K1, Z1
	VPMADDWD 0(R10), Z0, Z0
	VPMADDWD 64(R10), Z1, Z1
	VPSRAD $4, Z0, Z0
	VPSRAD $4, Z1, Z1
	VPACKSSDW Z1, Z0, Z0
	VMOVDQU16 Z0, (DI)
	ADDQ $8, R8
	ADDQ $128, R9
	ADDQ $128, R10
	ADDQ $64, DI
	DECQ CX
	JNZ zi16loop

zi16done:
	VZEROUPPER
	RET

// func zgroupI16SharedAVX512(dst *int16, src *byte, off *int32, idx *byte, w *int16, nblk int)
// zgroupI16AVX512 for a table whose two zmm per block share one window
// (zgroupTab.shared): one 64-byte load per block.
TEXT ·zgroupI16SharedAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off+16(FP), R8
	MOVQ idx+24(FP), R9
	MOVQ w+32(FP), R10
	MOVQ nblk+40(FP), CX
	TESTQ CX, CX
	JZ zs16done
	MOVQ $0x5555555555555555, AX
	KMOVQ AX, K1

zs16loop:
	MOVLQSX 0(R8), AX
	VMOVDQU8 (SI)(AX*1), Z2
	VMOVDQU8 0(R9), Z20
	VMOVDQU8 64(R9), Z21
	VPERMB.Z Z2, Z20, K1, Z0
	VPERMB.Z Z2, Z21, K1, Z1
	VPMADDWD 0(R10), Z0, Z0
	VPMADDWD 64(R10), Z1, Z1
	VPSRAD $4, Z0, Z0
	VPSRAD $4, Z1, Z1
	VPACKSSDW Z1, Z0, Z0
	VMOVDQU16 Z0, (DI)
	ADDQ $8, R8
	ADDQ $128, R9
	ADDQ $128, R10
	ADDQ $64, DI
	DECQ CX
	JNZ zs16loop

zs16done:
	VZEROUPPER
	RET

// func zgroupI16Shared2AVX512(dst0, dst1 *int16, src0, src1 *byte, off *int32, idx *byte, w *int16, nblk int)
// zgroupI16SharedAVX512 on two source rows at once (src0 → dst0, src1 →
// dst1): index and weight vectors are loaded once for both.
TEXT ·zgroupI16Shared2AVX512(SB), NOSPLIT, $0-64
	MOVQ dst0+0(FP), DI
	MOVQ dst1+8(FP), DX
	MOVQ src0+16(FP), SI
	MOVQ src1+24(FP), R11
	MOVQ off+32(FP), R8
	MOVQ idx+40(FP), R9
	MOVQ w+48(FP), R10
	MOVQ nblk+56(FP), CX
	TESTQ CX, CX
	JZ z2s16done
	MOVQ $0x5555555555555555, AX
	KMOVQ AX, K1

z2s16loop:
	MOVLQSX 0(R8), AX
	VMOVDQU8 (SI)(AX*1), Z2
	VMOVDQU8 (R11)(AX*1), Z3
	VMOVDQU8 0(R9), Z20
	VMOVDQU8 64(R9), Z21
	VMOVDQU16 0(R10), Z24
	VMOVDQU16 64(R10), Z25
	VPERMB.Z Z2, Z20, K1, Z0
	VPERMB.Z Z2, Z21, K1, Z1
	VPERMB.Z Z3, Z20, K1, Z4
	VPERMB.Z Z3, Z21, K1, Z5
	VPMADDWD Z24, Z0, Z0
	VPMADDWD Z25, Z1, Z1
	VPMADDWD Z24, Z4, Z4
	VPMADDWD Z25, Z5, Z5
	VPSRAD $4, Z0, Z0
	VPSRAD $4, Z1, Z1
	VPSRAD $4, Z4, Z4
	VPSRAD $4, Z5, Z5
	VPACKSSDW Z1, Z0, Z0
	VPACKSSDW Z5, Z4, Z4
	VMOVDQU16 Z0, (DI)
	VMOVDQU16 Z4, (DX)
	ADDQ $8, R8
	ADDQ $128, R9
	ADDQ $128, R10
	ADDQ $64, DI
	ADDQ $64, DX
	DECQ CX
	JNZ z2s16loop

z2s16done:
	VZEROUPPER
	RET

// func zgroupU8AVX512(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, idx *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)
// np tap pairs, blocks of four zmm (64 outputs), rows rows:
// dst[bdst[b]+i] = sat_u8(sat_i16((init + Σ_p pmaddwd(vpermb(window,
// idx+p·pstride), w_p)) >> prec)): one 64-byte window per zmm serves
// every pair (64-byte loads at varying offsets split cache lines; one per
// zmm is cheaper than one per pair).
TEXT ·zgroupU8AVX512(SB), NOSPLIT, $0-108
	MOVQ dst+0(FP), DI
	MOVQ src+16(FP), SI
	MOVQ prec+96(FP), AX
	VMOVQ AX, X13
	MOVL init+104(FP), AX
	VPBROADCASTD AX, Z12
	MOVQ pstride+88(FP), AX
	VPBROADCASTB AX, Z14
	MOVQ $0x5555555555555555, AX
	KMOVQ AX, K1
	MOVQ rows+32(FP), R15
	TESTQ R15, R15
	JZ zu8done

zu8row:
	MOVQ off+40(FP), R8
	MOVQ idx+48(FP), R9
	MOVQ w+56(FP), R10
	MOVQ bdst+64(FP), R11
	MOVQ nblk+72(FP), CX

zu8blk:
	MOVLQSX 0(R8), AX
	MOVLQSX 4(R8), BX
	MOVLQSX 8(R8), R12
	MOVLQSX 12(R8), R13
	VMOVDQU8 (SI)(AX*1), Z16
	VMOVDQU8 (SI)(BX*1), Z17
	VMOVDQU8 (SI)(R12*1), Z18
	VMOVDQU8 (SI)(R13*1), Z19
	VMOVDQU8 0(R9), Z20
	VMOVDQU8 64(R9), Z21
	VMOVDQU8 128(R9), Z22
	VMOVDQU8 192(R9), Z23
	VMOVDQA64 Z12, Z0
	VMOVDQA64 Z12, Z1
	VMOVDQA64 Z12, Z2
	VMOVDQA64 Z12, Z3
	MOVQ np+80(FP), DX

zu8pair:
	VPERMB.Z Z16, Z20, K1, Z4
	VPERMB.Z Z17, Z21, K1, Z5
	VPERMB.Z Z18, Z22, K1, Z6
	VPERMB.Z Z19, Z23, K1, Z7
	VPMADDWD 0(R10), Z4, Z4
	VPMADDWD 64(R10), Z5, Z5
	VPMADDWD 128(R10), Z6, Z6
	VPMADDWD 192(R10), Z7, Z7
	VPADDD Z4, Z0, Z0
	VPADDD Z5, Z1, Z1
	VPADDD Z6, Z2, Z2
	VPADDD Z7, Z3, Z3
	VPADDB Z14, Z20, Z20
	VPADDB Z14, Z21, Z21
	VPADDB Z14, Z22, Z22
	VPADDB Z14, Z23, Z23
	ADDQ $256, R10
	DECQ DX
	JNZ zu8pair

	VPSRAD X13, Z0, Z0
	VPSRAD X13, Z1, Z1
	VPSRAD X13, Z2, Z2
	VPSRAD X13, Z3, Z3
	VPACKSSDW Z1, Z0, Z0
	VPACKSSDW Z3, Z2, Z2
	VPACKUSWB Z2, Z0, Z0
	MOVLQSX (R11), AX
	VMOVDQU8 Z0, (DI)(AX*1)
	ADDQ $16, R8
	ADDQ $256, R9
	ADDQ $4, R11
	DECQ CX
	JNZ zu8blk

	ADDQ dstride+8(FP), DI
	ADDQ sstride+24(FP), SI
	DECQ R15
	JNZ zu8row

zu8done:
	VZEROUPPER
	RET

// Dword order that turns the packed bytes of four contiguous zmm (see
// zgroupU8SharedAVX512) into natural order: dword m ← 4·(m mod 4) + m/4.
DATA zu8perm<>+0(SB)/4, $0
DATA zu8perm<>+4(SB)/4, $4
DATA zu8perm<>+8(SB)/4, $8
DATA zu8perm<>+12(SB)/4, $12
DATA zu8perm<>+16(SB)/4, $1
DATA zu8perm<>+20(SB)/4, $5
DATA zu8perm<>+24(SB)/4, $9
DATA zu8perm<>+28(SB)/4, $13
DATA zu8perm<>+32(SB)/4, $2
DATA zu8perm<>+36(SB)/4, $6
DATA zu8perm<>+40(SB)/4, $10
DATA zu8perm<>+44(SB)/4, $14
DATA zu8perm<>+48(SB)/4, $3
DATA zu8perm<>+52(SB)/4, $7
DATA zu8perm<>+56(SB)/4, $11
DATA zu8perm<>+60(SB)/4, $15
GLOBL zu8perm<>(SB), RODATA|NOPTR, $64

// func zgroupU8SharedAVX512(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, idx *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)
// zgroupU8AVX512 for a shared table: zmm r holds the 16 contiguous
// outputs 16r..16r+15 of its block, zmm 0,1 read one window and zmm 2,3
// another (two 64-byte loads per 64 outputs instead of four); after the
// packs one vpermd restores natural order.
TEXT ·zgroupU8SharedAVX512(SB), NOSPLIT, $0-108
	MOVQ dst+0(FP), DI
	MOVQ src+16(FP), SI
	MOVQ prec+96(FP), AX
	VMOVQ AX, X13
	MOVL init+104(FP), AX
	VPBROADCASTD AX, Z12
	MOVQ pstride+88(FP), AX
	VPBROADCASTB AX, Z14
	VMOVDQU32 zu8perm<>(SB), Z15
	MOVQ $0x5555555555555555, AX
	KMOVQ AX, K1
	MOVQ rows+32(FP), R15
	TESTQ R15, R15
	JZ zs8done

zs8row:
	MOVQ off+40(FP), R8
	MOVQ idx+48(FP), R9
	MOVQ w+56(FP), R10
	MOVQ bdst+64(FP), R11
	MOVQ nblk+72(FP), CX

zs8blk:
	MOVLQSX 0(R8), AX
	MOVLQSX 8(R8), BX
	VMOVDQU8 (SI)(AX*1), Z16
	VMOVDQU8 (SI)(BX*1), Z18
	VMOVDQU8 0(R9), Z20
	VMOVDQU8 64(R9), Z21
	VMOVDQU8 128(R9), Z22
	VMOVDQU8 192(R9), Z23
	VMOVDQA64 Z12, Z0
	VMOVDQA64 Z12, Z1
	VMOVDQA64 Z12, Z2
	VMOVDQA64 Z12, Z3
	MOVQ np+80(FP), DX

zs8pair:
	VPERMB.Z Z16, Z20, K1, Z4
	VPERMB.Z Z16, Z21, K1, Z5
	VPERMB.Z Z18, Z22, K1, Z6
	VPERMB.Z Z18, Z23, K1, Z7
	VPMADDWD 0(R10), Z4, Z4
	VPMADDWD 64(R10), Z5, Z5
	VPMADDWD 128(R10), Z6, Z6
	VPMADDWD 192(R10), Z7, Z7
	VPADDD Z4, Z0, Z0
	VPADDD Z5, Z1, Z1
	VPADDD Z6, Z2, Z2
	VPADDD Z7, Z3, Z3
	VPADDB Z14, Z20, Z20
	VPADDB Z14, Z21, Z21
	VPADDB Z14, Z22, Z22
	VPADDB Z14, Z23, Z23
	ADDQ $256, R10
	DECQ DX
	JNZ zs8pair

	VPSRAD X13, Z0, Z0
	VPSRAD X13, Z1, Z1
	VPSRAD X13, Z2, Z2
	VPSRAD X13, Z3, Z3
	VPACKSSDW Z1, Z0, Z0
	VPACKSSDW Z3, Z2, Z2
	VPACKUSWB Z2, Z0, Z0
	VPERMD Z0, Z15, Z0
	MOVLQSX (R11), AX
	VMOVDQU8 Z0, (DI)(AX*1)
	ADDQ $16, R8
	ADDQ $256, R9
	ADDQ $4, R11
	DECQ CX
	JNZ zs8blk

	ADDQ dstride+8(FP), DI
	ADDQ sstride+24(FP), SI
	DECQ R15
	JNZ zs8row

zs8done:
	VZEROUPPER
	RET

// func zgroupU8Shared2AVX512(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, idx *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)
// zgroupU8SharedAVX512 on two rows at a time (rows must be even): every
// index and weight vector is loaded once per block for both rows.
TEXT ·zgroupU8Shared2AVX512(SB), NOSPLIT, $0-108
	MOVQ dst+0(FP), DI
	MOVQ src+16(FP), SI
	MOVQ dstride+8(FP), R13
	MOVQ sstride+24(FP), R14
	MOVQ prec+96(FP), AX
	VMOVQ AX, X13
	MOVL init+104(FP), AX
	VPBROADCASTD AX, Z12
	MOVQ pstride+88(FP), AX
	VPBROADCASTB AX, Z14
	VMOVDQU32 zu8perm<>(SB), Z15
	MOVQ $0x5555555555555555, AX
	KMOVQ AX, K1
	MOVQ rows+32(FP), R15
	SHRQ $1, R15
	JZ z2done

z2row:
	MOVQ off+40(FP), R8
	MOVQ idx+48(FP), R9
	MOVQ w+56(FP), R10
	MOVQ bdst+64(FP), R11
	MOVQ nblk+72(FP), CX

z2blk:
	MOVLQSX 0(R8), AX
	MOVLQSX 8(R8), BX
	ADDQ SI, AX
	ADDQ SI, BX
	VMOVDQU8 (AX), Z16
	VMOVDQU8 (BX), Z18
	VMOVDQU8 (AX)(R14*1), Z17
	VMOVDQU8 (BX)(R14*1), Z19
	VMOVDQU8 0(R9), Z20
	VMOVDQU8 64(R9), Z21
	VMOVDQU8 128(R9), Z22
	VMOVDQU8 192(R9), Z23
	VMOVDQA64 Z12, Z0
	VMOVDQA64 Z12, Z1
	VMOVDQA64 Z12, Z2
	VMOVDQA64 Z12, Z3
	VMOVDQA64 Z12, Z8
	VMOVDQA64 Z12, Z9
	VMOVDQA64 Z12, Z10
	VMOVDQA64 Z12, Z11
	MOVQ np+80(FP), DX

z2pair:
	VMOVDQU16 0(R10), Z24
	VMOVDQU16 64(R10), Z25
	VMOVDQU16 128(R10), Z26
	VMOVDQU16 192(R10), Z27
	VPERMB.Z Z16, Z20, K1, Z4
	VPERMB.Z Z16, Z21, K1, Z5
	VPERMB.Z Z18, Z22, K1, Z6
	VPERMB.Z Z18, Z23, K1, Z7
	VPMADDWD Z24, Z4, Z4
	VPMADDWD Z25, Z5, Z5
	VPMADDWD Z26, Z6, Z6
	VPMADDWD Z27, Z7, Z7
	VPADDD Z4, Z0, Z0
	VPADDD Z5, Z1, Z1
	VPADDD Z6, Z2, Z2
	VPADDD Z7, Z3, Z3
	VPERMB.Z Z17, Z20, K1, Z4
	VPERMB.Z Z17, Z21, K1, Z5
	VPERMB.Z Z19, Z22, K1, Z6
	VPERMB.Z Z19, Z23, K1, Z7
	VPMADDWD Z24, Z4, Z4
	VPMADDWD Z25, Z5, Z5
	VPMADDWD Z26, Z6, Z6
	VPMADDWD Z27, Z7, Z7
	VPADDD Z4, Z8, Z8
	VPADDD Z5, Z9, Z9
	VPADDD Z6, Z10, Z10
	VPADDD Z7, Z11, Z11
	VPADDB Z14, Z20, Z20
	VPADDB Z14, Z21, Z21
	VPADDB Z14, Z22, Z22
	VPADDB Z14, Z23, Z23
	ADDQ $256, R10
	DECQ DX
	JNZ z2pair

	VPSRAD X13, Z0, Z0
	VPSRAD X13, Z1, Z1
	VPSRAD X13, Z2, Z2
	VPSRAD X13, Z3, Z3
	VPACKSSDW Z1, Z0, Z0
	VPACKSSDW Z3, Z2, Z2
	VPACKUSWB Z2, Z0, Z0
	VPERMD Z0, Z15, Z0
	VPSRAD X13, Z8, Z8
	VPSRAD X13, Z9, Z9
	VPSRAD X13, Z10, Z10
	VPSRAD X13, Z11, Z11
	VPACKSSDW Z9, Z8, Z8
	VPACKSSDW Z11, Z10, Z10
	VPACKUSWB Z10, Z8, Z8
	VPERMD Z8, Z15, Z8
	MOVLQSX (R11), AX
	ADDQ DI, AX
	VMOVDQU8 Z0, (AX)
	VMOVDQU8 Z8, (AX)(R13*1)
	ADDQ $16, R8
	ADDQ $256, R9
	ADDQ $4, R11
	DECQ CX
	JNZ z2blk

	LEAQ (DI)(R13*2), DI
	LEAQ (SI)(R14*2), SI
	DECQ R15
	JNZ z2row

z2done:
	VZEROUPPER
	RET

// Qword order that undoes VPACKUSWB's per-lane interleave of two zmm.
DATA zvlperm<>+0(SB)/8, $0
DATA zvlperm<>+8(SB)/8, $2
DATA zvlperm<>+16(SB)/8, $4
DATA zvlperm<>+24(SB)/8, $6
DATA zvlperm<>+32(SB)/8, $1
DATA zvlperm<>+40(SB)/8, $3
DATA zvlperm<>+48(SB)/8, $5
DATA zvlperm<>+56(SB)/8, $7
GLOBL zvlperm<>(SB), RODATA|NOPTR, $64

// func vlinearI16AVX512(dst *byte, h0, h1 *int16, n int, b0, b1 int32)
// vlinearI16AVX2 with 64 outputs per step; n ≥ 64, the last block is
// recomputed ending at n.
TEXT ·vlinearI16AVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ h0+8(FP), SI
	MOVQ h1+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL b0+32(FP), AX
	VPBROADCASTW AX, Z6
	MOVL b1+36(FP), AX
	VPBROADCASTW AX, Z5
	MOVL $2, AX
	VPBROADCASTW AX, Z7
	VMOVDQU64 zvlperm<>(SB), Z8
	XORQ R8, R8
	MOVQ CX, R9
	SUBQ $64, R9

zvlloop:
	CMPQ R8, R9
	JLE zvlblock
	LEAQ 64(R9), AX
	CMPQ R8, AX
	JGE zvldone
	MOVQ R9, R8

zvlblock:
	VMOVDQU16 (SI)(R8*2), Z0
	VMOVDQU16 64(SI)(R8*2), Z1
	VMOVDQU16 (DX)(R8*2), Z2
	VMOVDQU16 64(DX)(R8*2), Z3
	VPMULHW Z6, Z0, Z0
	VPMULHW Z6, Z1, Z1
	VPMULHW Z5, Z2, Z2
	VPMULHW Z5, Z3, Z3
	VPADDW Z2, Z0, Z0
	VPADDW Z3, Z1, Z1
	VPADDW Z7, Z0, Z0
	VPADDW Z7, Z1, Z1
	VPSRAW $2, Z0, Z0
	VPSRAW $2, Z1, Z1
	VPACKUSWB Z1, Z0, Z0
	VPERMQ Z0, Z8, Z0
	VMOVDQU8 Z0, (DI)(R8*1)
	ADDQ $64, R8
	JMP zvlloop

zvldone:
	VZEROUPPER
	RET
