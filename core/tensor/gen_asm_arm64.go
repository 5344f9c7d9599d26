//go:build ignore

// gen_asm_arm64 writes gemm_arm64.s: the NEON (ASIMD) GEMM micro-kernels
// for arm64, the bf16 → fp32 widening and an FMA peak loop. Regenerate with
//
//	cd core/tensor && go run gen_asm_arm64.go && GOARCH=arm64 go vet .
//
// The Go arm64 assembler has no FMLA-by-element and no vector FADD, so
// those are emitted as WORDs with the instruction in a comment (check them
// with GOARCH=arm64 go test -c && go tool objdump).
package main

import (
	"bytes"
	"fmt"
	"os"
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, "\t"+format+"\n", args...) }
func label(l string)               { fmt.Fprintf(&out, "%s:\n", l) }

// fmlaElem emits FMLA Vd.4S, Vn.4S, Vm.S[idx] (vd += vn·vm[idx]).
func fmlaElem(d, n, m, idx int) {
	w := uint32(0x4f801000) | uint32(idx&1)<<21 | uint32(m&31)<<16 | uint32(idx>>1)<<11 | uint32(n)<<5 | uint32(d)
	p("WORD $0x%08x // FMLA V%d.4S, V%d.4S, V%d.S[%d]", w, d, n, m, idx)
}

// fadd emits FADD Vd.4S, Vn.4S, Vm.4S.
func fadd(d, n, m int) {
	w := uint32(0x4e20d400) | uint32(m)<<16 | uint32(n)<<5 | uint32(d)
	p("WORD $0x%08x // FADD V%d.4S, V%d.4S, V%d.4S", w, d, n, m)
}

// The micro-kernel is MR×NR = 12×8: per k step one packed A column of 12
// floats (three vectors, V0–V2) and one packed B row of 8 (two vectors,
// V3–V4) feed 24 accumulators V8–V31 (row r, half h in V(8+2r+h)) by
// FMLA-by-element, 24 FMLAs for five 16-byte loads. NR = 8 divides every
// GR00T width (head_dim 64/128, 1152, 1536, 2048, 4304, 6144), so weight
// panels are not padded. bf16 B rows (16 bytes) are widened with ZIP1/ZIP2
// against a zero register (V7): each 32-bit lane gets the bf16 bits in its
// high half, exactly the fp32 value.
const (
	mr   = 12
	nr   = 8
	acc0 = 8
)

func acc(r, h int) int { return acc0 + 2*r + h }

// kernel emits
//
//	func kern12x8NEON(a, b, c *float32, ldc, kc, mode int, bias *float32)
//	func kern12x8BF16NEON(a *float32, b *uint16, c *float32, ldc, kc, mode int, bias *float32)
//
// a: packed A micro-panel [kc][12]; b: packed B micro-panel [kc][8];
// c: output tile, row stride ldc floats. mode 0 stores the products, 1 adds
// them to c, 2 adds bias[0:8] to them.
func kernel(bf16 bool) {
	fn, bType, eb := "kern12x8NEON", "*float32", 4
	if bf16 {
		fn, bType, eb = "kern12x8BF16NEON", "*uint16", 2
	}
	fmt.Fprintf(&out, "\n// func %s(a *float32, b %s, c *float32, ldc, kc, mode int, bias *float32)\n", fn, bType)
	fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-56\n", fn)
	p("MOVD a+0(FP), R0")
	p("MOVD b+8(FP), R1")
	p("MOVD c+16(FP), R2")
	p("MOVD ldc+24(FP), R3")
	p("LSL $2, R3, R3")
	p("MOVD kc+32(FP), R4")
	for r := 0; r < mr; r++ {
		for h := 0; h < 2; h++ {
			v := acc(r, h)
			p("VEOR V%d.B16, V%d.B16, V%d.B16", v, v, v)
		}
	}
	if bf16 {
		p("VEOR V7.B16, V7.B16, V7.B16")
	}
	step := func() {
		p("VLD1.P %d(R0), [V0.S4, V1.S4, V2.S4]", mr*4)
		if bf16 {
			p("VLD1.P 16(R1), [V5.H8]")
			p("VZIP1 V5.H8, V7.H8, V3.H8")
			p("VZIP2 V5.H8, V7.H8, V4.H8")
		} else {
			p("VLD1.P 32(R1), [V3.S4, V4.S4]")
		}
		for r := 0; r < mr; r++ {
			for h := 0; h < 2; h++ {
				fmlaElem(acc(r, h), 3+h, r/4, r%4)
			}
		}
	}
	const unroll = 4
	p("CMP $%d, R4", unroll)
	p("BLT tail")
	label("loop4")
	p("PRFM %d(R1), PLDL1KEEP", unroll*nr*eb*4)
	for u := 0; u < unroll; u++ {
		step()
	}
	p("SUB $%d, R4, R4", unroll)
	p("CMP $%d, R4", unroll)
	p("BGE loop4")
	label("tail")
	p("CBZ R4, done")
	label("loop1")
	step()
	p("SUBS $1, R4, R4")
	p("BNE loop1")
	label("done")
	p("MOVD mode+40(FP), R5")
	p("CMP $1, R5")
	p("BEQ accum")
	p("CMP $2, R5")
	p("BEQ addbias")
	store := func() {
		for r := 0; r < mr; r++ {
			p("VST1 [V%d.S4, V%d.S4], (R2)", acc(r, 0), acc(r, 1))
			if r < mr-1 {
				p("ADD R3, R2, R2")
			}
		}
		p("RET")
	}
	store()
	label("accum")
	for r := 0; r < mr; r++ {
		p("VLD1 (R2), [V0.S4, V1.S4]")
		fadd(acc(r, 0), acc(r, 0), 0)
		fadd(acc(r, 1), acc(r, 1), 1)
		p("VST1 [V%d.S4, V%d.S4], (R2)", acc(r, 0), acc(r, 1))
		if r < mr-1 {
			p("ADD R3, R2, R2")
		}
	}
	p("RET")
	label("addbias")
	p("MOVD bias+48(FP), R6")
	p("VLD1 (R6), [V0.S4, V1.S4]")
	for r := 0; r < mr; r++ {
		fadd(acc(r, 0), acc(r, 0), 0)
		fadd(acc(r, 1), acc(r, 1), 1)
	}
	store()
}

// widen emits func widenBF16NEON(dst *float32, src *uint16, n int) for n a
// multiple of 32: dst[i] = float32 with the bits src[i]<<16.
func widen() {
	fmt.Fprintf(&out, "\n// func widenBF16NEON(dst *float32, src *uint16, n int)\n")
	fmt.Fprintf(&out, "TEXT ·widenBF16NEON(SB), NOSPLIT, $0-24\n")
	p("MOVD dst+0(FP), R0")
	p("MOVD src+8(FP), R1")
	p("MOVD n+16(FP), R2")
	p("LSR $5, R2, R2")
	p("CBZ R2, done")
	p("VEOR V31.B16, V31.B16, V31.B16")
	label("loop")
	p("VLD1.P 64(R1), [V0.H8, V1.H8, V2.H8, V3.H8]")
	for u := 0; u < 4; u++ {
		p("VZIP1 V%d.H8, V31.H8, V%d.H8", u, 4+2*u)
		p("VZIP2 V%d.H8, V31.H8, V%d.H8", u, 5+2*u)
	}
	p("VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)")
	p("VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R0)")
	p("SUBS $1, R2, R2")
	p("BNE loop")
	label("done")
	p("RET")
}

// peak emits func fmaPeakNEON(iters int): 24 independent 4-lane FMLA
// chains, iters times each (24·8·iters flops), to measure the FMA
// throughput.
func peak() {
	const chains = 24
	fmt.Fprintf(&out, "\n// func fmaPeakNEON(iters int)\n")
	fmt.Fprintf(&out, "TEXT ·fmaPeakNEON(SB), NOSPLIT, $0-8\n")
	p("MOVD iters+0(FP), R0")
	for i := 0; i < chains+2; i++ {
		p("VEOR V%d.B16, V%d.B16, V%d.B16", i, i, i)
	}
	label("loop")
	for i := 0; i < chains; i++ {
		p("VFMLA V%d.S4, V%d.S4, V%d.S4", chains, chains+1, i)
	}
	p("SUBS $1, R0, R0")
	p("BNE loop")
	p("RET")
}

func main() {
	out.WriteString("// Code generated by gen_asm_arm64.go; DO NOT EDIT.\n\n//go:build arm64 && !purego\n\n#include \"textflag.h\"\n")
	kernel(false)
	kernel(true)
	widen()
	peak()
	if err := os.WriteFile("gemm_arm64.s", out.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
