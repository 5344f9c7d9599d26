//go:build amd64 && !purego

#include "textflag.h"
#include "go_asm.h"

// Register use:
//   R8  bit buffer        R9  valid bits
//   SI  &src[in]          R10 last refill position
//   DI  &dst[out]         R11 last symbol start   R12 &dst[0]
//   BX  literal/length table                      DX  distance table
//   AX, CX, R13, R14 scratch (R13 = match length, R14 = match distance)
//
// Table entries (see inflate.go): bits 0-4 bits to consume (code + extra
// bits), 8-11 code length or sub-table width, 13 invalid, 14 sub-table,
// 15 end of block, 16-30 value, 31 literal.

// func inflateFastBMI2(s *fastState) int
TEXT ·inflateFastBMI2(SB), NOSPLIT, $0-16
	MOVQ s+0(FP), AX
	MOVQ fastState_bitbuf(AX), R8
	MOVQ fastState_nbits(AX), R9
	MOVQ fastState_in(AX), SI
	MOVQ fastState_inEnd(AX), R10
	MOVQ fastState_out(AX), DI
	MOVQ fastState_outEnd(AX), R11
	MOVQ fastState_dst(AX), R12
	MOVQ fastState_lt(AX), BX
	MOVQ fastState_dt(AX), DX

loop:
	CMPQ DI, R11
	JHI  limit
	CMPQ R9, $48
	JCC  decode
	CMPQ SI, R10
	JHI  limit
	// Refill: load 8 bytes, keep the whole bytes that fit.
	MOVQ (SI), AX
	SHLXQ R9, AX, AX
	ORQ  AX, R8
	MOVQ $63, AX
	SUBQ R9, AX
	SHRQ $3, AX
	ADDQ AX, SI
	ORQ  $56, R9

decode:
	MOVQ R8, AX
	ANDQ $0x7ff, AX
	MOVL (BX)(AX*4), AX
	TESTL AX, AX
	JPL  notLiteral

literal:
	SHRXQ AX, R8, R8
	MOVBLZX AX, CX
	SUBQ CX, R9
	SHRL $16, AX
	MOVB AX, (DI)
	INCQ DI
	// Look up the next symbol with the ≥ 33 bits left; a second literal
	// is written straight away (out ≤ outEnd+1 here, inside the slack).
	MOVQ R8, AX
	ANDQ $0x7ff, AX
	MOVL (BX)(AX*4), AX
	TESTL AX, AX
	JPL  haveEntry
	SHRXQ AX, R8, R8
	MOVBLZX AX, CX
	SUBQ CX, R9
	SHRL $16, AX
	MOVB AX, (DI)
	INCQ DI
	JMP  loop

haveEntry:
	// AX holds the (non-literal) entry for the low bits of R8; a refill
	// only adds bits above them, so it stays valid.
	CMPQ DI, R11
	JHI  limit
	CMPQ R9, $48
	JCC  notLiteral
	CMPQ SI, R10
	JHI  limit
	MOVQ (SI), CX
	SHLXQ R9, CX, CX
	ORQ  CX, R8
	MOVL R9, CX
	XORL $63, CX
	SHRL $3, CX
	ADDQ CX, SI
	ORQ  $56, R9
	JMP  notLiteral

notLiteral:
	TESTL $0x4000, AX
	JEQ  notSub
	// Sub-table: drop the 11 primary bits, index by the next bits.
	SHRQ $11, R8
	SUBQ $11, R9
	MOVL AX, CX
	SHRL $8, CX
	ANDL $15, CX
	BZHIQ CX, R8, R13
	SHRL $16, AX
	ANDL $0x7fff, AX
	ADDQ R13, AX
	MOVL (BX)(AX*4), AX
	TESTL AX, AX
	JMI  literal

notSub:
	TESTL $0xa000, AX
	JNE  special
	// Length: base + extra bits; code and extra bits are consumed at
	// once (low byte of the entry), the extra value is those bits shifted
	// right by the code length (bits 8-11).
	MOVL AX, CX
	SHRL $8, CX
	ANDL $15, CX
	BZHIQ AX, R8, R13
	SHRXQ AX, R8, R8
	MOVBLZX AX, R14
	SUBQ R14, R9
	SHRXQ CX, R13, R13
	SHRL $16, AX
	ANDL $0x7fff, AX
	ADDQ AX, R13

	// Distance.
	MOVQ R8, AX
	ANDQ $0xff, AX
	MOVL (DX)(AX*4), AX
	TESTL $0x4000, AX
	JEQ  distDirect
	SHRQ $8, R8
	SUBQ $8, R9
	MOVL AX, CX
	SHRL $8, CX
	ANDL $15, CX
	BZHIQ CX, R8, R14
	SHRL $16, AX
	ANDL $0x7fff, AX
	ADDQ R14, AX
	MOVL (DX)(AX*4), AX

distDirect:
	TESTL $0x2000, AX
	JNE  badDist
	MOVL AX, CX
	SHRL $8, CX
	ANDL $15, CX
	BZHIQ AX, R8, R14
	SHRXQ AX, R8, R8
	SHRXQ CX, R14, R14
	MOVBLZX AX, CX
	SUBQ CX, R9
	SHRL $16, AX
	ANDL $0x7fff, AX
	ADDQ AX, R14

	// dist ≤ out?
	MOVQ DI, AX
	SUBQ R12, AX
	CMPQ R14, AX
	JHI  tooFar
	MOVQ DI, AX
	SUBQ R14, AX          // AX = match source
	LEAQ (DI)(R13*1), CX  // CX = match end
	CMPQ R14, $16
	JCS  short
	// dist ≥ 16: 16-byte blocks, first 64 bytes unconditionally (most
	// matches are shorter; this saves a hard-to-predict branch).
	MOVOU (AX), X0
	MOVOU X0, (DI)
	MOVOU 16(AX), X1
	MOVOU X1, 16(DI)
	MOVOU 32(AX), X0
	MOVOU X0, 32(DI)
	MOVOU 48(AX), X1
	MOVOU X1, 48(DI)
	CMPQ R13, $64
	JLS  copied
	ADDQ $64, AX
	ADDQ $64, DI

copy16:
	MOVOU (AX), X0
	MOVOU X0, (DI)
	ADDQ $16, AX
	ADDQ $16, DI
	CMPQ DI, CX
	JCS  copy16

copied:
	MOVQ CX, DI
	JMP  loop

short:
	CMPQ R14, $8
	JCS  tiny

copy8:
	MOVQ (AX), R14
	MOVQ R14, (DI)
	ADDQ $8, AX
	ADDQ $8, DI
	CMPQ DI, CX
	JCS  copy8
	MOVQ CX, DI
	JMP  loop

tiny:
	CMPQ R14, $1
	JNE  bytewise
	// Run of one byte.
	MOVBQZX (AX), R14
	MOVQ $0x0101010101010101, R13
	IMULQ R13, R14
	MOVQ R14, X0
	PUNPCKLQDQ X0, X0

run:
	MOVOU X0, (DI)
	ADDQ $16, DI
	CMPQ DI, CX
	JCS  run
	MOVQ CX, DI
	JMP  loop

bytewise:
	// Distances 2..7: the first 8 bytes one by one (an overlapping copy
	// makes them periodic), then 8-byte words from step bytes back, step
	// being a multiple of the distance in [8, distance+8]:
	// step(d) = nibble d of 0xECA89800 (8, 9, 8, 10, 12, 14 for d = 2..7).
	MOVBLZX 0(AX), R13
	MOVB R13, 0(DI)
	MOVBLZX 1(AX), R13
	MOVB R13, 1(DI)
	MOVBLZX 2(AX), R13
	MOVB R13, 2(DI)
	MOVBLZX 3(AX), R13
	MOVB R13, 3(DI)
	MOVBLZX 4(AX), R13
	MOVB R13, 4(DI)
	MOVBLZX 5(AX), R13
	MOVB R13, 5(DI)
	MOVBLZX 6(AX), R13
	MOVB R13, 6(DI)
	MOVBLZX 7(AX), R13
	MOVB R13, 7(DI)
	MOVQ R14, R13
	SHLQ $2, R13
	MOVQ $0xECA89800, AX
	SHRXQ R13, AX, AX
	ANDQ $15, AX
	ADDQ $8, DI
	MOVQ DI, R13
	SUBQ AX, R13

period:
	CMPQ DI, CX
	JCC  periodDone
	MOVQ (R13), AX
	MOVQ AX, (DI)
	ADDQ $8, DI
	ADDQ $8, R13
	JMP  period

periodDone:
	MOVQ CX, DI
	JMP  loop

special:
	TESTL $0x8000, AX
	JEQ  badLit
	// End of block: consume it.
	SHRXQ AX, R8, R8
	MOVBLZX AX, CX
	SUBQ CX, R9
	MOVQ $const_fastEOB, AX
	JMP  done

badLit:
	MOVQ $const_fastBadLit, AX
	JMP  done

badDist:
	MOVQ $const_fastBadDist, AX
	JMP  done

tooFar:
	MOVQ $const_fastDistTooFar, AX
	JMP  done

limit:
	MOVQ $const_fastLimit, AX

done:
	MOVQ s+0(FP), CX
	MOVQ R8, fastState_bitbuf(CX)
	MOVQ R9, fastState_nbits(CX)
	MOVQ SI, fastState_in(CX)
	MOVQ DI, fastState_out(CX)
	MOVQ AX, ret+8(FP)
	RET
