//go:build amd64 && !purego

#include "textflag.h"

// GROUP(g) converts the samples of pixels 4g..4g+3 (bytes 12g, 12g+3, …
// of the channel-offset row at R10) through the LUT at R11 and stores the
// four float32s at 16g(R12) and 1024+16g(R12) with non-temporal stores.
#define GROUP(o0, o1, o2, o3, d) \
	MOVBLZX o0(R10), AX \
	MOVBLZX o1(R10), BX \
	MOVBLZX o2(R10), CX \
	MOVBLZX o3(R10), R13 \
	MOVSS (R11)(AX*4), X0 \
	MOVSS (R11)(BX*4), X1 \
	MOVSS (R11)(CX*4), X2 \
	MOVSS (R11)(R13*4), X3 \
	UNPCKLPS X1, X0 \
	UNPCKLPS X3, X2 \
	MOVLHPS X2, X0 \
	MOVNTPS X0, d(R12) \
	MOVNTPS X0, 1024+d(R12)

// func patchify16x2NT(out *float32, pix *byte, stride int, lut *NormLUT)
// patchify16x2 with streaming stores: the 1536 float32s of one
// pixel_values row (channel, temporal copy, py, px) go straight to memory
// instead of being read into the cache first (pixel_values is 11 MB per
// request, far larger than the caches, and written once). out must be
// 16-byte aligned.
TEXT ·patchify16x2NT(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ pix+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ lut+24(FP), R8
	XORQ R9, R9 // channel

chloop:
	MOVQ R9, R11
	SHLQ $10, R11
	ADDQ R8, R11 // &lut[ch]
	MOVQ R9, R12
	SHLQ $11, R12
	ADDQ DI, R12 // out + 512·ch float32s
	LEAQ (SI)(R9*1), R10 // pix + ch
	MOVQ $16, R14

pyloop:
	GROUP(0, 3, 6, 9, 0)
	GROUP(12, 15, 18, 21, 16)
	GROUP(24, 27, 30, 33, 32)
	GROUP(36, 39, 42, 45, 48)
	ADDQ DX, R10
	ADDQ $64, R12
	DECQ R14
	JNZ pyloop

	INCQ R9
	CMPQ R9, $3
	JLT chloop
	SFENCE
	RET
