//go:build ignore

// gen_asm writes gemm_amd64.s, the SIMD GEMM micro-kernels. Regenerate with
//
//	cd core/tensor && go run gen_asm.go && go vet .
package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, "\t"+format+"\n", args...) }
func label(l string)               { fmt.Fprintf(&out, "%s:\n", l) }

// isa describes one vector ISA for the MR×(NV·lanes) outer-product kernel.
type isa struct {
	name   string // function name suffix
	reg    string // "Z" or "Y"
	lanes  int    // float32 per vector
	mr, nv int    // rows, vectors per row
	zero   string // zeroing instruction
	bf16   bool   // B panel holds bf16 (uint16) values, widened on load
}

// kernel emits
//
//	func kern<MR>x<NR><name>(a, b, c *float32, ldc, kc, mode int, bias *float32)
//
// a: packed A micro-panel [kc][MR]; b: packed B micro-panel [kc][NR];
// c: output tile, row stride ldc floats. mode 0 stores the products, 1 adds
// them to c, 2 adds bias[0:NR] to them.
func kernel(s isa) {
	nr := s.nv * s.lanes
	vb := s.lanes * 4 // bytes per vector
	bReg := func(v int) string { return fmt.Sprintf("%s%d", s.reg, v) }
	bcReg := func(r int) string { return fmt.Sprintf("%s%d", s.reg, s.nv+r%2) }
	acc0 := s.nv + 2
	acc := func(r, v int) string { return fmt.Sprintf("%s%d", s.reg, acc0+r*s.nv+v) }
	fn := fmt.Sprintf("kern%dx%d%s", s.mr, nr, s.name)
	bType := "*float32"
	eb := 4 // bytes per B element
	if s.bf16 {
		fn = fmt.Sprintf("kern%dx%dBF16%s", s.mr, nr, s.name)
		bType = "*uint16"
		eb = 2
	}
	fmt.Fprintf(&out, "\n// func %s(a *float32, b %s, c *float32, ldc, kc, mode int, bias *float32)\n", fn, bType)
	fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-56\n", fn)
	p("MOVQ a+0(FP), AX")
	p("MOVQ b+8(FP), BX")
	p("MOVQ c+16(FP), DI")
	p("MOVQ ldc+24(FP), SI")
	p("SHLQ $2, SI")
	p("MOVQ kc+32(FP), CX")
	for r := 0; r < s.mr; r++ {
		for v := 0; v < s.nv; v++ {
			p("%s %s, %s, %s", s.zero, acc(r, v), acc(r, v), acc(r, v))
		}
	}
	step := func(u int) {
		for v := 0; v < s.nv; v++ {
			if s.bf16 {
				p("VPMOVZXWD %d(BX), %s", u*nr*2+v*vb/2, bReg(v))
				p("VPSLLD $16, %s, %s", bReg(v), bReg(v))
			} else {
				p("VMOVUPS %d(BX), %s", u*nr*4+v*vb, bReg(v))
			}
		}
		for r := 0; r < s.mr; r++ {
			p("VBROADCASTSS %d(AX), %s", (u*s.mr+r)*4, bcReg(r))
			for v := 0; v < s.nv; v++ {
				p("VFMADD231PS %s, %s, %s", bReg(v), bcReg(r), acc(r, v))
			}
		}
	}
	const unroll = 4
	p("CMPQ CX, $%d", unroll)
	p("JB tail")
	label("loop4")
	p("PREFETCHT0 %d(BX)", unroll*nr*eb*4)
	p("PREFETCHT0 %d(BX)", unroll*nr*eb*4+64*((nr*eb/64)/2))
	for u := 0; u < unroll; u++ {
		step(u)
	}
	p("ADDQ $%d, BX", unroll*nr*eb)
	p("ADDQ $%d, AX", unroll*s.mr*4)
	p("SUBQ $%d, CX", unroll)
	p("CMPQ CX, $%d", unroll)
	p("JAE loop4")
	label("tail")
	p("TESTQ CX, CX")
	p("JZ done")
	label("loop1")
	step(0)
	p("ADDQ $%d, BX", nr*eb)
	p("ADDQ $%d, AX", s.mr*4)
	p("DECQ CX")
	p("JNZ loop1")
	label("done")
	p("MOVQ mode+40(FP), DX")
	p("CMPQ DX, $1")
	p("JEQ accum")
	p("CMPQ DX, $2")
	p("JEQ addbias")
	store := func() {
		for r := 0; r < s.mr; r++ {
			for v := 0; v < s.nv; v++ {
				p("VMOVUPS %s, %d(DI)", acc(r, v), v*vb)
			}
			if r < s.mr-1 {
				p("ADDQ SI, DI")
			}
		}
		p("VZEROUPPER")
		p("RET")
	}
	store()
	label("accum")
	for r := 0; r < s.mr; r++ {
		for v := 0; v < s.nv; v++ {
			p("VADDPS %d(DI), %s, %s", v*vb, acc(r, v), acc(r, v))
			p("VMOVUPS %s, %d(DI)", acc(r, v), v*vb)
		}
		if r < s.mr-1 {
			p("ADDQ SI, DI")
		}
	}
	p("VZEROUPPER")
	p("RET")
	label("addbias")
	p("MOVQ bias+48(FP), R8")
	for v := 0; v < s.nv; v++ {
		p("VMOVUPS %d(R8), %s", v*vb, bReg(v))
	}
	for r := 0; r < s.mr; r++ {
		for v := 0; v < s.nv; v++ {
			p("VADDPS %s, %s, %s", bReg(v), acc(r, v), acc(r, v))
		}
	}
	store()
}

// peak emits func fmaPeak<name>(iters int): chains independent FMA
// dependency chains, iters times each, to measure the FMA throughput.
func peak(name, reg string, chains int) {
	fmt.Fprintf(&out, "\n// func fmaPeak%s(iters int)\n", name)
	fmt.Fprintf(&out, "TEXT ·fmaPeak%s(SB), NOSPLIT, $0-8\n", name)
	p("MOVQ iters+0(FP), CX")
	zero := "VPXOR"
	if reg == "Z" {
		zero = "VPXORD"
	}
	for i := 0; i < chains+2; i++ {
		p("%s %s%d, %s%d, %s%d", zero, reg, i, reg, i, reg, i)
	}
	label("loop")
	for i := 0; i < chains; i++ {
		p("VFMADD231PS %s%d, %s%d, %s%d", reg, chains, reg, chains+1, reg, i)
	}
	p("DECQ CX")
	p("JNZ loop")
	p("VZEROUPPER")
	p("RET")
}

// widen emits func widenBF16<name>(dst *float32, src *uint16, n int) for
// n a multiple of 4 vectors: dst[i] = float32 with the bits src[i]<<16.
func widen(name, reg string, lanes int) {
	fmt.Fprintf(&out, "\n// func widenBF16%s(dst *float32, src *uint16, n int)\n", name)
	fmt.Fprintf(&out, "TEXT ·widenBF16%s(SB), NOSPLIT, $0-24\n", name)
	p("MOVQ dst+0(FP), DI")
	p("MOVQ src+8(FP), SI")
	p("MOVQ n+16(FP), CX")
	p("SHRQ $%d, CX", map[int]int{16: 6, 8: 5}[lanes])
	p("JZ done")
	label("loop")
	for u := 0; u < 4; u++ {
		p("VPMOVZXWD %d(SI), %s%d", u*lanes*2, reg, u)
	}
	for u := 0; u < 4; u++ {
		p("VPSLLD $16, %s%d, %s%d", reg, u, reg, u)
	}
	for u := 0; u < 4; u++ {
		p("VMOVUPS %s%d, %d(DI)", reg, u, u*lanes*4)
	}
	p("ADDQ $%d, SI", 4*lanes*2)
	p("ADDQ $%d, DI", 4*lanes*4)
	p("DECQ CX")
	p("JNZ loop")
	label("done")
	p("VZEROUPPER")
	p("RET")
}

// act emits func actAVX512(x *float32, n, kind int): in place, n a multiple
// of 16; kind 1 = GELU-tanh x/(1+exp(-2·c·(x+0.044715x³))), kind 2 = SiLU
// x/(1+exp(-x)). exp is the Cephes expf scheme: n = round(t·log2e),
// r = t − n·ln2 (two-part ln2), a degree-5 polynomial for e^r − 1 − r, and
// VSCALEFPS for the 2^n factor (which saturates to 0 or +Inf); t is clamped
// to [−200, 200] so that n stays finite.
func act() {
	consts := []struct {
		name string
		v    float64
	}{
		{"hi", 200},
		{"lo", -200},
		{"log2e", 1.44269504088896341},
		{"c1", 0.693359375},
		{"c2", -2.12194440e-4},
		{"p0", 1.9875691500e-4},
		{"p1", 1.3981999507e-3},
		{"p2", 8.3334519073e-3},
		{"p3", 4.1665795894e-2},
		{"p4", 1.6666665459e-1},
		{"p5", 5.0000001201e-1},
		{"one", 1},
		{"gk", 0.044715},
		{"gm2c", -2 * 0.7978845608028654}, // -2·sqrt(2/π)
	}
	reg := map[string]string{}
	for i, c := range consts {
		fmt.Fprintf(&out, "DATA actConst<>+%d(SB)/4, $0x%08x // %s = %g\n", i*4, math.Float32bits(float32(c.v)), c.name, c.v)
		reg[c.name] = fmt.Sprintf("Z%d", 16+i)
	}
	fmt.Fprintf(&out, "GLOBL actConst<>(SB), RODATA|NOPTR, $%d\n", len(consts)*4)
	fmt.Fprintf(&out, "\n// func actAVX512(x *float32, n, kind int)\n")
	fmt.Fprintf(&out, "TEXT ·actAVX512(SB), NOSPLIT, $0-24\n")
	p("MOVQ x+0(FP), DI")
	p("MOVQ n+8(FP), CX")
	p("MOVQ kind+16(FP), DX")
	p("SHRQ $4, CX")
	p("JZ done")
	for i, c := range consts {
		p("VBROADCASTSS actConst<>+%d(SB), %s // %s", i*4, reg[c.name], c.name)
	}
	p("VPXORD Z31, Z31, Z31")
	label("loop")
	p("VMOVUPS (DI), Z0")
	p("CMPQ DX, $1")
	p("JNE silu")
	// t = -2c·(x + 0.044715·x³)
	p("VMULPS Z0, Z0, Z1")
	p("VMULPS Z0, Z1, Z1")
	p("VFMADD213PS Z0, %s, Z1", reg["gk"])
	p("VMULPS %s, Z1, Z1", reg["gm2c"])
	p("JMP exp")
	label("silu")
	p("VSUBPS Z0, Z31, Z1")
	label("exp")
	expZ1(reg)
	p("VADDPS %s, Z3, Z3", reg["one"])
	p("VDIVPS Z3, Z0, Z0")
	p("VMOVUPS Z0, (DI)")
	p("ADDQ $64, DI")
	p("DECQ CX")
	p("JNZ loop")
	label("done")
	p("VZEROUPPER")
	p("RET")
	softmaxHelpers(reg, len(consts))

	// func siluMulAVX512(x, y *float32, n int): x[i] = silu(x[i])·y[i],
	// n a multiple of 16 (the SwiGLU gate of a Qwen3 MLP).
	fmt.Fprintf(&out, "\n// func siluMulAVX512(x, y *float32, n int)\n")
	fmt.Fprintf(&out, "TEXT ·siluMulAVX512(SB), NOSPLIT, $0-24\n")
	p("MOVQ x+0(FP), DI")
	p("MOVQ y+8(FP), SI")
	p("MOVQ n+16(FP), CX")
	p("SHRQ $4, CX")
	p("JZ done")
	for i := range consts {
		p("VBROADCASTSS actConst<>+%d(SB), Z%d", i*4, 16+i)
	}
	p("VPXORD Z31, Z31, Z31")
	label("loop")
	p("VMOVUPS (DI), Z0")
	p("VSUBPS Z0, Z31, Z1")
	expZ1(reg)
	p("VADDPS %s, Z3, Z3", reg["one"])
	p("VDIVPS Z3, Z0, Z0")
	p("VMULPS (SI), Z0, Z0")
	p("VMOVUPS Z0, (DI)")
	p("ADDQ $64, DI")
	p("ADDQ $64, SI")
	p("DECQ CX")
	p("JNZ loop")
	label("done")
	p("VZEROUPPER")
	p("RET")
}

// expZ1 emits Z3 = exp(Z1), clobbering Z1, Z2, Z4; reg names the constant
// registers loaded by loadConsts.
func expZ1(reg map[string]string) {
	p("VMINPS %s, Z1, Z1", reg["hi"])
	p("VMAXPS %s, Z1, Z1", reg["lo"])
	p("VMULPS %s, Z1, Z2", reg["log2e"])
	p("VRNDSCALEPS $0, Z2, Z2")
	p("VFNMADD231PS %s, Z2, Z1", reg["c1"])
	p("VFNMADD231PS %s, Z2, Z1", reg["c2"])
	p("VMOVAPS %s, Z3", reg["p0"])
	for _, c := range []string{"p1", "p2", "p3", "p4", "p5"} {
		p("VFMADD213PS %s, Z1, Z3", reg[c])
	}
	p("VMULPS Z1, Z1, Z4")
	p("VFMADD213PS Z1, Z4, Z3")
	p("VADDPS %s, Z3, Z3", reg["one"])
	p("VSCALEFPS Z2, Z3, Z3")
}

// softmaxHelpers emits
//
//	func rowMaxAVX512(x *float32, n int) float32          // max of x[0:n], n%16 == 0, n > 0
//	func expShiftSumAVX512(x *float32, n int, shift float32) float32
//
// the second sets x[i] = exp(x[i] − shift) and returns Σ x[i] (fp32, 16
// lanes), n%16 == 0.
func softmaxHelpers(reg map[string]string, nconst int) {
	fmt.Fprintf(&out, "\n// func rowMaxAVX512(x *float32, n int) float32\n")
	fmt.Fprintf(&out, "TEXT ·rowMaxAVX512(SB), NOSPLIT, $0-20\n")
	p("MOVQ x+0(FP), DI")
	p("MOVQ n+8(FP), CX")
	p("SHRQ $4, CX")
	p("VMOVUPS (DI), Z0")
	label("loop")
	p("VMAXPS (DI), Z0, Z0")
	p("ADDQ $64, DI")
	p("DECQ CX")
	p("JNZ loop")
	p("VEXTRACTF32X8 $1, Z0, Y1")
	p("VMAXPS Y1, Y0, Y0")
	p("VEXTRACTF128 $1, Y0, X1")
	p("VMAXPS X1, X0, X0")
	p("VPERMILPS $0x4e, X0, X1")
	p("VMAXPS X1, X0, X0")
	p("VPERMILPS $0xb1, X0, X1")
	p("VMAXPS X1, X0, X0")
	p("VMOVSS X0, ret+16(FP)")
	p("VZEROUPPER")
	p("RET")

	fmt.Fprintf(&out, "\n// func expShiftSumAVX512(x *float32, n int, shift float32) float32\n")
	fmt.Fprintf(&out, "TEXT ·expShiftSumAVX512(SB), NOSPLIT, $0-28\n")
	p("MOVQ x+0(FP), DI")
	p("MOVQ n+8(FP), CX")
	p("VBROADCASTSS shift+16(FP), Z5")
	for i := 0; i < nconst; i++ {
		p("VBROADCASTSS actConst<>+%d(SB), Z%d", i*4, 16+i)
	}
	p("VPXORD Z6, Z6, Z6")
	p("SHRQ $4, CX")
	p("JZ done")
	label("loop")
	p("VMOVUPS (DI), Z1")
	p("VSUBPS Z5, Z1, Z1")
	expZ1(reg)
	p("VMOVUPS Z3, (DI)")
	p("VADDPS Z3, Z6, Z6")
	p("ADDQ $64, DI")
	p("DECQ CX")
	p("JNZ loop")
	label("done")
	p("VEXTRACTF32X8 $1, Z6, Y1")
	p("VADDPS Y1, Y6, Y6")
	p("VEXTRACTF128 $1, Y6, X1")
	p("VADDPS X1, X6, X6")
	p("VPERMILPS $0x4e, X6, X1")
	p("VADDPS X1, X6, X6")
	p("VPERMILPS $0xb1, X6, X1")
	p("VADDPS X1, X6, X6")
	p("VMOVSS X6, ret+24(FP)")
	p("VZEROUPPER")
	p("RET")
}

// clock emits func clockLoop(iters int): 16 dependent 1-cycle ADDQ AX, AX per
// iteration, so iters·16 cycles measure the core clock.
func clock() {
	fmt.Fprintf(&out, "\n// func clockLoop(iters int)\n")
	fmt.Fprintf(&out, "TEXT ·clockLoop(SB), NOSPLIT, $0-8\n")
	p("MOVQ iters+0(FP), CX")
	p("MOVQ $1, AX")
	label("loop")
	for i := 0; i < 16; i++ {
		p("ADDQ AX, AX")
	}
	p("DECQ CX")
	p("JNZ loop")
	p("RET")
}

func main() {
	out.WriteString("// Code generated by gen_asm.go; DO NOT EDIT.\n\n//go:build amd64 && !purego\n\n#include \"textflag.h\"\n")
	kernel(isa{name: "AVX512", reg: "Z", lanes: 16, mr: 6, nv: 4, zero: "VPXORD"})
	kernel(isa{name: "AVX2", reg: "Y", lanes: 8, mr: 6, nv: 2, zero: "VPXOR"})
	kernel(isa{name: "AVX512", reg: "Z", lanes: 16, mr: 6, nv: 4, zero: "VPXORD", bf16: true})
	kernel(isa{name: "AVX2", reg: "Y", lanes: 8, mr: 6, nv: 2, zero: "VPXOR", bf16: true})
	widen("AVX512", "Z", 16)
	widen("AVX2", "Y", 8)
	peak("AVX512", "Z", 24)
	peak("AVX2", "Y", 12)
	clock()
	act()
	if err := os.WriteFile("gemm_amd64.s", out.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
