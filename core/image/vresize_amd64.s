//go:build amd64 && !purego

#include "textflag.h"

// func vresizeLinearSSE2(dst *byte, h0, h1 *int32, n int, b0, b1 int32)
// For i in [0, n) (n a multiple of 8):
//   dst[i] = sat_u8((mulhi16(b0, sat16(h0[i]>>4)) + mulhi16(b1, sat16(h1[i]>>4)) + 2) >> 2)
// — OpenCV 4.6 VResizeLinearVec_32s8u (SSE2 v_mul_hi + v_rshr_pack_u<2>).
TEXT ·vresizeLinearSSE2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ h0+8(FP), SI
	MOVQ h1+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL b0+32(FP), AX
	MOVL b1+36(FP), BX
	MOVQ AX, X6
	PSHUFLW $0, X6, X6
	PSHUFD $0, X6, X6
	MOVQ BX, X5
	PSHUFLW $0, X5, X5
	PSHUFD $0, X5, X5
	MOVL $0x00020002, R8
	MOVQ R8, X7
	PSHUFD $0, X7, X7

loop:
	CMPQ CX, $8
	JLT done
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	PSRAL $4, X0
	PSRAL $4, X1
	PACKSSLW X1, X0
	MOVOU 0(DX), X2
	MOVOU 16(DX), X3
	PSRAL $4, X2
	PSRAL $4, X3
	PACKSSLW X3, X2
	PMULHW X6, X0
	PMULHW X5, X2
	PADDW X2, X0
	PADDW X7, X0
	PSRAW $2, X0
	PACKUSWB X0, X0
	MOVQ X0, 0(DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $8, DI
	SUBQ $8, CX
	JMP loop

done:
	RET

// func hresizeRGBSSE2(dst *byte, src *byte, xoff *int32, w *int16, n, npairs int, prec uint64, init int32)
// For each output pixel i in [0, n): acc[c] = init + Σ_p Σ_{t∈{0,1}} src[xoff[i] + 3(2p+t) + c]·w[i][p][t]
// for c = 0..2 (lane 3 is ignored), dst[3i+c] = sat_u8(sat_i16(acc[c] >> prec)).
// w holds, per output and tap pair, 8 int16 {w0,w1,w0,w1,w0,w1,w0,w1}.
// Each tap pair reads 4 bytes at two pixel offsets (one byte past the
// pixel), so the caller guarantees xoff[i]+6·npairs+1 ≤ len(src).
TEXT ·hresizeRGBSSE2(SB), NOSPLIT, $0-60
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ xoff+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ prec+48(FP), AX
	MOVQ AX, X14
	MOVL init+56(FP), AX
	MOVQ AX, X13
	PSHUFD $0, X13, X13
	PXOR X15, X15

outer:
	TESTQ CX, CX
	JZ end
	MOVLQSX (R8), R10
	LEAQ (SI)(R10*1), R11
	MOVOU X13, X4
	MOVQ npairs+40(FP), DX

pair:
	MOVL (R11), X0
	MOVL 3(R11), X1
	PUNPCKLBW X1, X0
	PUNPCKLBW X15, X0
	MOVOU (R9), X2
	PMADDWL X2, X0
	PADDL X0, X4
	ADDQ $6, R11
	ADDQ $16, R9
	DECQ DX
	JNZ pair

	PSRAL X14, X4
	PACKSSLW X4, X4
	PACKUSWB X4, X4
	MOVQ X4, AX
	MOVW AX, (DI)
	SHRL $16, AX
	MOVB AX, 2(DI)
	ADDQ $3, DI
	ADDQ $4, R8
	DECQ CX
	JMP outer

end:
	RET

// func hlinearRGBSSE2(dst *int32, src *byte, xoff *int32, w *int16, n int)
// Area-mode linear horizontal pass (HResizeLinear<uchar,int,short,2048>)
// for RGB: for i in [0, n), c in 0..2:
//   dst[3i+c] = src[xoff[i]+c]·a0[i] + src[xoff[i]+3+c]·a1[i]
// with w holding {a0,a1}×4 per output. Each output stores 16 bytes (one
// int32 past its three), so dst needs one spare int32 after 3n; the loads
// read src[xoff[i] .. xoff[i]+7).
TEXT ·hlinearRGBSSE2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ xoff+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ n+32(FP), CX
	PXOR X15, X15

hl:
	TESTQ CX, CX
	JZ hlend
	MOVLQSX (R8), R10
	MOVL (SI)(R10*1), X0
	MOVL 3(SI)(R10*1), X1
	PUNPCKLBW X1, X0
	PUNPCKLBW X15, X0
	MOVOU (R9), X2
	PMADDWL X2, X0
	MOVOU X0, (DI)
	ADDQ $12, DI
	ADDQ $4, R8
	ADDQ $16, R9
	DECQ CX
	JMP hl

hlend:
	RET

// func hresizeRGB3SSSE3(dst *byte, src *byte, xoff *int32, w *int16, n int, prec uint64, init int32)
// hresizeRGBSSE2 for exactly 3 tap pairs (5–6 taps, the 455→448
// smart_resize step): the 18 source bytes of an output come from a 16-byte
// load at xoff and an 8-byte load at xoff+12, and each tap pair is formed by
// one pshufb into words {r0,r1,g0,g1,b0,b1,0,0} instead of two 4-byte loads
// and two unpacks. Same integer sums (addition order does not matter). The
// caller guarantees xoff[i]+20 ≤ len(src).
TEXT ·hresizeRGB3SSSE3(SB), NOSPLIT, $0-52
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ xoff+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ prec+40(FP), AX
	MOVQ AX, X14
	MOVL init+48(FP), AX
	MOVQ AX, X13
	PSHUFD $0, X13, X13
	MOVQ $0x8004800180038000, AX
	MOVQ AX, X10
	MOVQ $0x8080808080058002, AX
	MOVQ AX, X9
	PUNPCKLQDQ X9, X10 // pair at bytes 0..5
	MOVQ $0x800A800780098006, AX
	MOVQ AX, X11
	MOVQ $0x80808080800B8008, AX
	MOVQ AX, X9
	PUNPCKLQDQ X9, X11 // pair at bytes 6..11

h3:
	TESTQ CX, CX
	JZ h3end
	MOVLQSX (R8), R10
	MOVOU (SI)(R10*1), X0
	MOVQ 12(SI)(R10*1), X1
	MOVOU (R9), X4
	MOVOU 16(R9), X5
	MOVOU 32(R9), X6
	MOVO X0, X2
	PSHUFB X10, X2
	PMADDWL X4, X2
	PSHUFB X11, X0
	PMADDWL X5, X0
	PSHUFB X10, X1
	PMADDWL X6, X1
	PADDL X2, X0
	PADDL X13, X1
	PADDL X1, X0
	PSRAL X14, X0
	PACKSSLW X0, X0
	PACKUSWB X0, X0
	MOVQ X0, AX
	MOVW AX, (DI)
	SHRL $16, AX
	MOVB AX, 2(DI)
	ADDQ $3, DI
	ADDQ $4, R8
	ADDQ $48, R9
	DECQ CX
	JMP h3

h3end:
	RET

// func hlinearRGBSSSE3(dst *int32, src *byte, xoff *int32, w *int16, n int)
// hlinearRGBSSE2 with the two source pixels taken by one 8-byte load and
// one pshufb into words {r0,r1,g0,g1,b0,b1,0,0} (same reads, same sums).
TEXT ·hlinearRGBSSSE3(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ xoff+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ $0x8004800180038000, AX
	MOVQ AX, X10
	MOVQ $0x8080808080058002, AX
	MOVQ AX, X9
	PUNPCKLQDQ X9, X10

hl3:
	TESTQ CX, CX
	JZ hl3end
	MOVLQSX (R8), R10
	MOVQ (SI)(R10*1), X0
	PSHUFB X10, X0
	MOVOU (R9), X2
	PMADDWL X2, X0
	MOVOU X0, (DI)
	ADDQ $12, DI
	ADDQ $4, R8
	ADDQ $16, R9
	DECQ CX
	JMP hl3

hl3end:
	RET
