//go:build amd64 && !purego

#include "textflag.h"

// func paeth3SSE2(cur, prev *byte, n int)
// Reverses the PNG Paeth filter on pixels [1, n) of a 3-byte-per-pixel
// scanline in place (n ≥ 2; x, the filtered pixel, is in DX before
// PAETH_PIXEL; pixel 0 must already be unfiltered). One pixel
// per iteration in 16-bit lanes: pa = |b−c|, pb = |a−c|, pc = |a+b−2c|,
// predictor = a if pa is the minimum, else b if pb is, else c (the PNG
// tie order), out = (x + predictor) mod 256. Pixel i is read as the 4 bytes
// at 3i (3i−1 shifted right by 8 for the last one), so no load leaves the row.
#define PAETH_PIXEL \
MOVL (SI)(BX*1), AX \
SHRL $8, AX \
MOVQ AX, X3 \
PUNPCKLBW X0, X3 \
MOVQ DX, X4 \
PUNPCKLBW X0, X4 \
MOVO X3, X5 \
PSUBW X2, X5 \
MOVO X1, X6 \
PSUBW X2, X6 \
MOVO X5, X7 \
PADDW X6, X7 \
MOVO X0, X9 \
PSUBW X5, X9 \
PMAXSW X9, X5 \
MOVO X0, X10 \
PSUBW X6, X10 \
PMAXSW X10, X6 \
MOVO X0, X11 \
PSUBW X7, X11 \
PMAXSW X11, X7 \
MOVO X5, X12 \
PMINSW X6, X12 \
PMINSW X7, X12 \
MOVO X12, X13 \
PCMPEQW X6, X13 \
PCMPEQW X5, X12 \
MOVO X3, X14 \
PAND X13, X14 \
PANDN X2, X13 \
POR X14, X13 \
MOVO X1, X14 \
PAND X12, X14 \
PANDN X13, X12 \
POR X14, X12 \
PADDW X4, X12 \
PAND X8, X12 \
MOVO X12, X1 \
MOVO X3, X2 \
PACKUSWB X12, X12 \
MOVQ X12, AX \
MOVW AX, 1(DI)(BX*1) \
SHRL $16, AX \
MOVB AX, 3(DI)(BX*1)

TEXT ·paeth3SSE2(SB), NOSPLIT, $0-24
	MOVQ cur+0(FP), DI
	MOVQ prev+8(FP), SI
	MOVQ n+16(FP), CX
	PXOR X0, X0
	MOVL $0x00ff00ff, AX
	MOVQ AX, X8
	PSHUFD $0, X8, X8
	MOVL 0(DI), AX
	ANDL $0xffffff, AX
	MOVQ AX, X1
	PUNPCKLBW X0, X1 // a: left pixel (output)
	MOVL 0(SI), AX
	ANDL $0xffffff, AX
	MOVQ AX, X2
	PUNPCKLBW X0, X2 // c: upper-left pixel
	MOVQ $2, BX      // 3i−1 for i = 1
	DECQ CX

	// Pixels 1..n−2: x is read at 3i (its 4th byte is the next, still
	// filtered, pixel), so the load never overlaps the previous stores
	// (a 3i−1 load would stall on store forwarding every pixel).
loop:
	CMPQ CX, $1
	JLE last
	MOVL 1(DI)(BX*1), DX
	PAETH_PIXEL
	ADDQ $3, BX
	DECQ CX
	JMP loop

last:
	TESTQ CX, CX
	JLE done
	MOVL (DI)(BX*1), DX
	SHRL $8, DX
	PAETH_PIXEL

done:
	RET

// func paeth3x2SSE2(cur0, cur1, prev *byte, n int)
// Reverses the Paeth filter on two consecutive 3-byte-per-pixel scanlines
// at once (rows y = cur0 and y+1 = cur1, both Paeth-filtered, prev = row
// y−1), as a wavefront: iteration i (1 ≤ i < n) does pixel i of row y in
// lanes 0–3 and pixel i−1 of row y+1 in lanes 4–7, whose inputs are all
// known by then: a = the previous output D (both halves), b = {prev[i],
// D.low}, c = the previous b. The two serial chains share one instruction
// stream, so the latency bound per pixel halves. Pixel 0 of cur0 must be
// unfiltered already; pixel n−1 of cur1 is left for the caller. n ≥ 2.
// Loads: prev at 3i−1 (shifted), cur0 at 3i (3i−1 shifted for i = n−1),
// cur1 at 3(i−1): none leaves its row or overlaps the previous stores.
TEXT ·paeth3x2SSE2(SB), NOSPLIT, $0-32
	MOVQ cur0+0(FP), DI
	MOVQ cur1+8(FP), R8
	MOVQ prev+16(FP), SI
	MOVQ n+24(FP), CX
	PXOR X0, X0
	MOVL $0x00ff00ff, AX
	MOVQ AX, X8
	PSHUFD $0, X8, X8
	MOVL 0(DI), AX
	ANDL $0xffffff, AX
	MOVQ AX, X1
	PUNPCKLBW X0, X1 // D = {out_y[0], 0}
	MOVL 0(SI), AX
	ANDL $0xffffff, AX
	MOVQ AX, X2
	PUNPCKLBW X0, X2 // previous b = {prev[0], 0}
	MOVQ $3, BX      // 3i for i = 1
	DECQ CX

loop2:
	CMPQ CX, $1
	JLE last2
	MOVL (DI)(BX*1), AX
	JMP body2

last2:
	TESTQ CX, CX
	JLE done2
	MOVL -1(DI)(BX*1), AX
	SHRL $8, AX

body2:
	MOVL -3(R8)(BX*1), DX
	SHLQ $32, DX
	ORQ DX, AX
	MOVQ AX, X4
	PUNPCKLBW X0, X4 // x = {raw_y[i], raw_y+1[i−1]}
	MOVL -1(SI)(BX*1), AX
	SHRL $8, AX
	MOVQ AX, X3
	PUNPCKLBW X0, X3
	PUNPCKLQDQ X1, X3 // b = {prev[i], out_y[i−1]}
	MOVO X3, X5
	PSUBW X2, X5
	MOVO X1, X6
	PSUBW X2, X6
	MOVO X5, X7
	PADDW X6, X7
	MOVO X0, X9
	PSUBW X5, X9
	PMAXSW X9, X5
	MOVO X0, X10
	PSUBW X6, X10
	PMAXSW X10, X6
	MOVO X0, X11
	PSUBW X7, X11
	PMAXSW X11, X7
	MOVO X5, X12
	PMINSW X6, X12
	PMINSW X7, X12
	MOVO X12, X13
	PCMPEQW X6, X13
	PCMPEQW X5, X12
	MOVO X3, X14
	PAND X13, X14
	PANDN X2, X13
	POR X14, X13
	MOVO X1, X14
	PAND X12, X14
	PANDN X13, X12
	POR X14, X12
	PADDW X4, X12
	PAND X8, X12
	MOVO X12, X1 // D
	MOVO X3, X2  // c for the next pixel
	PACKUSWB X12, X12
	MOVQ X12, AX
	MOVW AX, (DI)(BX*1)
	SHRQ $16, AX
	MOVB AX, 2(DI)(BX*1)
	SHRQ $16, AX
	MOVW AX, -3(R8)(BX*1)
	SHRQ $16, AX
	MOVB AX, -1(R8)(BX*1)
	ADDQ $3, BX
	DECQ CX
	JMP loop2

done2:
	RET
