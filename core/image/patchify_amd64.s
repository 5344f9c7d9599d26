//go:build amd64 && !purego

#include "textflag.h"

// GROUP(g) converts the samples of pixels 4g..4g+3 (bytes 12g, 12g+3, …
// of the channel-offset row at R10) through the LUT at R11 and stores the
// four float32s at 16g(R12) and 1024+16g(R12).
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
	MOVUPS X0, d(R12) \
	MOVUPS X0, 1024+d(R12)

// func patchify16x2SSE(out *float32, pix *byte, stride int, lut *NormLUT)
// patchify16x2 in SSE: the 1536 float32s of one pixel_values row
// (channel, temporal copy, py, px) from LUT loads.
TEXT ·patchify16x2SSE(SB), NOSPLIT, $0-32
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
	RET

// CHAN(idx, m, s, d) picks one channel of the 16 pixels in Z0 with VPERMB
// (index vector idx), widens and converts it, normalises it ((x − m) / s,
// IEEE single precision: NormLUT's formula) and stores the 16 float32s at
// d(R12) and 1024+d(R12) (the two temporal copies).
#define CHAN(idx, m, s, d) \
	VPERMB Z0, idx, Z1 \
	VPMOVZXBD X1, Z2 \
	VCVTDQ2PS Z2, Z2 \
	VSUBPS m, Z2, Z2 \
	VDIVPS s, Z2, Z2 \
	VMOVUPS Z2, d(R12) \
	VMOVUPS Z2, 1024+d(R12)

// func patchify16x2AVX512(out *float32, pix *byte, stride int, idx *[3][64]byte, sub, div *[3]float32)
// One pixel_values row like patchify16x2, computing the normalisation
// instead of reading the LUT (bit-identical), with AVX-512 VBMI for the RGB
// deinterleave and 64-byte stores. The pixel loads are masked to 48 bytes,
// so nothing past a patch row's last pixel is read.
TEXT ·patchify16x2AVX512(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), R12
	MOVQ pix+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ idx+24(FP), R8
	MOVQ sub+32(FP), R9
	MOVQ div+40(FP), R10
	VMOVDQU32 0(R8), Z20
	VMOVDQU32 64(R8), Z21
	VMOVDQU32 128(R8), Z22
	VBROADCASTSS 0(R9), Z23
	VBROADCASTSS 4(R9), Z24
	VBROADCASTSS 8(R9), Z25
	VBROADCASTSS 0(R10), Z26
	VBROADCASTSS 4(R10), Z27
	VBROADCASTSS 8(R10), Z28
	MOVQ $0xffffffffffff, AX
	KMOVQ AX, K1
	MOVQ $16, R14

row16:
	VMOVDQU8.Z (SI), K1, Z0
	CHAN(Z20, Z23, Z26, 0)
	CHAN(Z21, Z24, Z27, 2048)
	CHAN(Z22, Z25, Z28, 4096)
	ADDQ DX, SI
	ADDQ $64, R12
	DECQ R14
	JNZ row16
	VZEROUPPER
	RET

// FCHAN(mask, sh, s, m, r, d) normalises eight pixels of one channel for
// patchify16x2AVX2: VPSHUFB with the mask at mask(R8) picks the channel's
// bytes of eight pixels of sh straight into zero-extended dwords, which are
// converted and normalised, and the eight float32s are stored at d(R12)
// and 1024+d(R12) (the two temporal copies). The quotient (x − s) / m is
// q = (x − s)·r refined by one FMA step (e = (x − s) − q·m, q += e·r);
// NewNormLUT selects this form only after it reproduced every entry of the
// LUT bit for bit on this CPU (normFMAExact). DCHAN divides (VDIVPS), as
// the AVX-512 kernel does.
#define FCHAN(mask, sh, s, m, r, d, st) \
	VPSHUFB mask(R8), sh, Y1 \
	VCVTDQ2PS Y1, Y1 \
	VSUBPS s, Y1, Y1 \
	VMULPS r, Y1, Y2 \
	VFNMADD231PS m, Y2, Y1 \
	VFMADD231PS r, Y1, Y2 \
	st Y2, d(R12) \
	st Y2, 1024+d(R12)

#define DCHAN(mask, sh, s, m, r, d, st) \
	VPSHUFB mask(R8), sh, Y1 \
	VCVTDQ2PS Y1, Y1 \
	VSUBPS s, Y1, Y1 \
	VDIVPS m, Y1, Y2 \
	st Y2, d(R12) \
	st Y2, 1024+d(R12)

// LOADROW loads the 48 bytes of one patch row at SI as Y3 = bytes 0–15 |
// 12–27 (pixels 0–3 | 4–7 at the same offsets in both lanes) and Y4 =
// bytes 24–39 | 32–47 (pixels 8–11 | 12–15, the last four 4 bytes into
// their lane): no byte past the row's 48 is read.
#define LOADROW \
	VMOVDQU (SI), X3 \
	VINSERTI128 $1, 12(SI), Y3, Y3 \
	VMOVDQU 24(SI), X4 \
	VINSERTI128 $1, 32(SI), Y4, Y4

// FROW(st) and DROW(st) normalise one patch row (16 pixels, three
// channels, both temporal copies) with FCHAN or DCHAN, storing with st,
// and advance SI and R12 to the next row.
#define FROW(st) \
	LOADROW \
	FCHAN(0, Y3, Y7, Y10, Y13, 0, st) \
	FCHAN(96, Y4, Y7, Y10, Y13, 32, st) \
	FCHAN(32, Y3, Y8, Y11, Y14, 2048, st) \
	FCHAN(128, Y4, Y8, Y11, Y14, 2080, st) \
	FCHAN(64, Y3, Y9, Y12, Y15, 4096, st) \
	FCHAN(160, Y4, Y9, Y12, Y15, 4128, st) \
	ADDQ DX, SI \
	ADDQ $64, R12

#define DROW(st) \
	LOADROW \
	DCHAN(0, Y3, Y7, Y10, Y13, 0, st) \
	DCHAN(96, Y4, Y7, Y10, Y13, 32, st) \
	DCHAN(32, Y3, Y8, Y11, Y14, 2048, st) \
	DCHAN(128, Y4, Y8, Y11, Y14, 2080, st) \
	DCHAN(64, Y3, Y9, Y12, Y15, 4096, st) \
	DCHAN(160, Y4, Y9, Y12, Y15, 4128, st) \
	ADDQ DX, SI \
	ADDQ $64, R12

// func patchify16x2AVX2(out *float32, pix *byte, stride int, masks *[6][32]byte, sub, div, rcp *[3]float32, fma bool)
// One pixel_values row like patchify16x2, computing the normalisation
// (bit-identical to the LUT: see FCHAN) with AVX2: per patch row two
// 32-byte loads, six VPSHUFB deinterleaves into dwords (masks: channel c
// pixels 0–7 at 32c, pixels 8–15 at 96+32c), 32-byte stores: streaming
// (VMOVNTPS, then SFENCE so that they are ordered before whatever follows
// the call) when out is 32-byte aligned, cached otherwise.
TEXT ·patchify16x2AVX2(SB), NOSPLIT, $0-57
	MOVQ out+0(FP), R12
	MOVQ pix+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ masks+24(FP), R8
	MOVQ sub+32(FP), R9
	MOVQ div+40(FP), R10
	MOVQ rcp+48(FP), R11
	VBROADCASTSS 0(R9), Y7
	VBROADCASTSS 4(R9), Y8
	VBROADCASTSS 8(R9), Y9
	VBROADCASTSS 0(R10), Y10
	VBROADCASTSS 4(R10), Y11
	VBROADCASTSS 8(R10), Y12
	VBROADCASTSS 0(R11), Y13
	VBROADCASTSS 4(R11), Y14
	VBROADCASTSS 8(R11), Y15
	MOVQ $16, R14
	MOVBLZX fma+56(FP), AX
	TESTQ $31, R12
	JNZ cached
	TESTL AX, AX
	JZ drownt
	JMP frownt

cached:
	TESTL AX, AX
	JZ drow

frow:
	FROW(VMOVUPS)
	DECQ R14
	JNZ frow
	VZEROUPPER
	RET

frownt:
	FROW(VMOVNTPS)
	DECQ R14
	JNZ frownt
	SFENCE
	VZEROUPPER
	RET

drow:
	DROW(VMOVUPS)
	DECQ R14
	JNZ drow
	VZEROUPPER
	RET

drownt:
	DROW(VMOVNTPS)
	DECQ R14
	JNZ drownt
	SFENCE
	VZEROUPPER
	RET
