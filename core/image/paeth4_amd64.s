//go:build amd64 && !purego

#include "textflag.h"

// func paeth3x4AVX2(cur0, cur1, cur2, cur3, prev *byte, n int)
// Four consecutive Paeth-filtered 3-byte-per-pixel rows (cur0..cur3, prev =
// the row above cur0) as a wavefront in one YMM register: iteration i
// (3 ≤ i < n) does pixel i−k of row k in qword k. a = the previous result D,
// b = {prev[i], D.q0, D.q1, D.q2} (vpermq + vpblendd), c = the previous b.
// The caller has unfiltered the triangle before (row 0 pixels 0–2, row 1
// pixels 0–1, row 2 pixel 0) and finishes the one after (row 1 pixel n−1,
// row 2 pixels n−2.., row 3 pixels n−3..). n ≥ 4. Every load stays inside
// its row; the filtered pixel of row 0 at i = n−1 is read at 3i−1 and shifted.
TEXT ·paeth3x4AVX2(SB), NOSPLIT, $0-48
	MOVQ cur0+0(FP), DI
	MOVQ cur1+8(FP), R8
	MOVQ cur2+16(FP), R9
	MOVQ cur3+24(FP), R10
	MOVQ prev+32(FP), SI
	MOVQ n+40(FP), CX
	MOVL $0x00ff00ff, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VPXOR X0, X0, X0
	// D = {out0[2], out1[1], out2[0], 0}
	VMOVD 6(DI), X1
	VPINSRD $1, 3(R8), X1, X1
	VPINSRD $2, 0(R9), X1, X1
	VPMOVZXBW X1, Y1
	// previous b = {prev[2], out0[1], out1[0], 0}
	VMOVD 6(SI), X2
	VPINSRD $1, 3(DI), X2, X2
	VPINSRD $2, 0(R8), X2, X2
	VPMOVZXBW X2, Y2
	MOVQ $9, BX // 3i for i = 3
	SUBQ $3, CX

loop4:
	CMPQ CX, $1
	JLT done4
	JEQ last4
	VMOVD (DI)(BX*1), X4
	JMP body4

last4:
	VMOVD -1(DI)(BX*1), X4
	VPSRLD $8, X4, X4

body4:
	VPINSRD $1, -3(R8)(BX*1), X4, X4
	VPINSRD $2, -6(R9)(BX*1), X4, X4
	VPINSRD $3, -9(R10)(BX*1), X4, X4
	VPMOVZXBW X4, Y4 // x
	VMOVD -1(SI)(BX*1), X3
	VPSRLD $8, X3, X3
	VPMOVZXBW X3, Y3
	VPERMQ $0x90, Y1, Y6
	VPBLENDD $0x03, Y3, Y6, Y6 // b
	VPSUBW Y2, Y6, Y7         // b−c
	VPSUBW Y2, Y1, Y8         // a−c
	VPADDW Y7, Y8, Y9         // a+b−2c
	VPABSW Y7, Y7             // pa
	VPABSW Y8, Y8             // pb
	VPABSW Y9, Y9             // pc
	VPMINSW Y8, Y7, Y10
	VPMINSW Y9, Y10, Y10
	VPCMPEQW Y10, Y8, Y11     // pb smallest
	VPCMPEQW Y10, Y7, Y12     // pa smallest
	VPBLENDVB Y11, Y6, Y2, Y13
	VPBLENDVB Y12, Y1, Y13, Y13
	VPADDW Y4, Y13, Y13
	VPAND Y15, Y13, Y1        // D
	VMOVDQU Y6, Y2            // c for the next pixel
	VPACKUSWB Y1, Y1, Y14
	VMOVQ X14, AX
	VEXTRACTI128 $1, Y14, X13
	VMOVQ X13, DX
	MOVW AX, (DI)(BX*1)
	SHRQ $16, AX
	MOVB AX, 2(DI)(BX*1)
	SHRQ $16, AX
	MOVW AX, -3(R8)(BX*1)
	SHRQ $16, AX
	MOVB AX, -1(R8)(BX*1)
	MOVW DX, -6(R9)(BX*1)
	SHRQ $16, DX
	MOVB DX, -4(R9)(BX*1)
	SHRQ $16, DX
	MOVW DX, -9(R10)(BX*1)
	SHRQ $16, DX
	MOVB DX, -7(R10)(BX*1)
	ADDQ $3, BX
	DECQ CX
	JMP loop4

done4:
	VZEROUPPER
	RET
