//go:build ignore

// gen_asm writes gemm_amd64.s: the SIMD GEMM micro-kernels, and the
// elementwise kernels (activations, softmax exp) for AVX-512F and AVX2+FMA,
// and the float64 statistics of LayerNorm and RMSNorm.
// Regenerate with
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
	rowsA  bool   // A is MR rows of a row-major matrix (stride lda), not a packed panel
}

// kernel emits
//
//	func kern<MR>x<NR><name>(a, b, c *float32, ldc, kc, mode int, bias *float32)
//
// a: packed A micro-panel [kc][MR]; b: packed B micro-panel [kc][NR];
// c: output tile, row stride ldc floats. mode 0 stores the products, 1 adds
// them to c, 2 adds bias[0:NR] to them. With rowsA it emits
//
//	func kern<MR>x<NR>Rows<name>(a *float32, lda int, b, c *float32, ldc, kc int)
//
// instead: A is read in place, row r at a[r*lda:], with the same loads in
// the same order as from a packed panel (the same bits), and the products
// are stored (mode 0). MR must be 6: the rows are addressed from two bases
// (a, a+lda) with index scales 1, 2 and 4.
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
	aStep := s.mr * 4 // bytes of A per k
	aAddr := func(u, r int) string { return fmt.Sprintf("%d(AX)", (u*s.mr+r)*4) }
	if s.rowsA {
		if s.mr != 6 || s.bf16 {
			panic("rowsA needs MR 6 and fp32 B")
		}
		fn = fmt.Sprintf("kern%dx%dRows%s", s.mr, nr, s.name)
		aStep = 4
		aAddr = func(u, r int) string {
			base := [...]string{"(AX)", "(R9)", "(AX)(R10*2)", "(R9)(R10*2)", "(AX)(R10*4)", "(R9)(R10*4)"}[r]
			return fmt.Sprintf("%d%s", u*4, base)
		}
		fmt.Fprintf(&out, "\n// func %s(a *float32, lda int, b, c *float32, ldc, kc int)\n", fn)
		fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-48\n", fn)
		p("MOVQ a+0(FP), AX")
		p("MOVQ lda+8(FP), R10")
		p("SHLQ $2, R10")
		p("LEAQ (AX)(R10*1), R9")
		p("MOVQ b+16(FP), BX")
		p("MOVQ c+24(FP), DI")
		p("MOVQ ldc+32(FP), SI")
		p("SHLQ $2, SI")
		p("MOVQ kc+40(FP), CX")
	} else {
		fmt.Fprintf(&out, "\n// func %s(a *float32, b %s, c *float32, ldc, kc, mode int, bias *float32)\n", fn, bType)
		fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-56\n", fn)
		p("MOVQ a+0(FP), AX")
		p("MOVQ b+8(FP), BX")
		p("MOVQ c+16(FP), DI")
		p("MOVQ ldc+24(FP), SI")
		p("SHLQ $2, SI")
		p("MOVQ kc+32(FP), CX")
	}
	advanceA := func(k int) {
		p("ADDQ $%d, AX", k*aStep)
		if s.rowsA {
			p("ADDQ $%d, R9", k*aStep)
		}
	}
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
			p("VBROADCASTSS %s, %s", aAddr(u, r), bcReg(r))
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
	advanceA(unroll)
	p("SUBQ $%d, CX", unroll)
	p("CMPQ CX, $%d", unroll)
	p("JAE loop4")
	label("tail")
	p("TESTQ CX, CX")
	p("JZ done")
	label("loop1")
	step(0)
	p("ADDQ $%d, BX", nr*eb)
	advanceA(1)
	p("DECQ CX")
	p("JNZ loop1")
	label("done")
	if !s.rowsA {
		p("MOVQ mode+40(FP), DX")
		p("CMPQ DX, $1")
		p("JEQ accum")
		p("CMPQ DX, $2")
		p("JEQ addbias")
	}
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
	if s.rowsA {
		store()
		return
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

// The elementwise kernels (activations, softmax helpers) are emitted once
// per vector ISA from the same operation sequence, so that the AVX2 and
// AVX-512 versions round identically and agree bit for bit: every lane goes
// through the same IEEE operations (VROUNDPS and VRNDSCALEPS $0 both round
// to nearest even; VSCALEFPS and the two-step 2^n1·2^n2 of AVX2 both round
// p·2^n once, see expv), and the softmax sum keeps AVX-512's 16 partial sums
// on AVX2 as two ymm accumulators reduced in the same order.

// vconst is one entry of the vector constant table vconst<>, each value
// replicated across 64 bytes so that AVX-512 and AVX2 code can use it as a
// full-width memory operand.
type vconst struct {
	name string
	bits uint32
	doc  string
}

func f32c(name string, v float64) vconst {
	return vconst{name, math.Float32bits(float32(v)), fmt.Sprintf("%g", float32(v))}
}

func i32c(name string, v uint32) vconst {
	return vconst{name, v, fmt.Sprintf("0x%08x", v)}
}

// vconsts are the constants of the elementwise kernels. exp is the Cephes
// expf scheme: n = round(t·log2e), r = t − n·c1 − n·c2 (c1 + c2 = ln 2,
// c1 exact in 9 bits), e^r = 1 + r + r²·P(r), with P (p1…p5, highest
// first) of degree 4, not Cephes's 5: a minimax fit of (e^r − 1 − r)/r²
// weighted by r²/e^r on |r| ≤ 1.02·ln2/2 (testdata/vecmath/fit_exp.py), 0.1 ulp
// of approximation error with float32 coefficients, one FMA fewer (the
// kernels are bound by FMA throughput on Zen 3). The erfc
// of GELU-erf is Numerical Recipes' erfcc: erfc(z) = t·exp(−z² + E(t)),
// t = 1/(1 + z/2), E a degree-9 polynomial (fractional error < 1.2e-7).
var vconsts = []vconst{
	f32c("lo", -200),
	f32c("nm125", -125),
	f32c("log2e", 1.44269504088896341),
	f32c("c1", 0.693359375),
	f32c("c2", -2.12194440e-4),
	f32c("p1", 1.3811641838e-03),
	f32c("p2", 8.3701331168e-03),
	f32c("p3", 4.1668526828e-02),
	f32c("p4", 1.6666509211e-01),
	f32c("p5", 4.9999994040e-01),
	f32c("one", 1),
	f32c("gk", 0.044715),
	f32c("gm2c", -2*0.7978845608028654), // −2·√(2/π)
	i32c("abs", 0x7fffffff),
	i32c("sign", 0x80000000),
	f32c("nm160", -160),
	i32c("bias", 127),
	f32c("e16", 16),
	f32c("em16", -16),
	f32c("ek", 0.5/math.Sqrt2), // z/2 = |x|/(2√2)
	f32c("half", 0.5),
	f32c("c24", 24),
	f32c("c2p24", 0x1p24),
	f32c("c2m24", 0x1p-24),
	f32c("mhalf", -0.5),
	f32c("e0", -1.26551223),
	f32c("e1", 1.00002368),
	f32c("e2", 0.37409196),
	f32c("e3", 0.09678418),
	f32c("e4", -0.18628806),
	f32c("e5", 0.27886807),
	f32c("e6", -1.13520398),
	f32c("e7", 1.48851587),
	f32c("e8", -0.82215223),
	f32c("e9", 0.17087277),
	// Φ(x) − 1/2 = x·R(x²) for |x| < 1: the Taylor series of erf(x/√2)/2,
	// R(u) = Σ sₙuⁿ, sₙ = (−1)ⁿ/(√(2π)·2ⁿ·n!·(2n+1)), truncated after s₇
	// (the first omitted term is < 6e-9 of R).
	f32c("s0", 1/math.Sqrt(2*math.Pi)),
	f32c("s1", -1/math.Sqrt(2*math.Pi)/6),
	f32c("s2", 1/math.Sqrt(2*math.Pi)/40),
	f32c("s3", -1/math.Sqrt(2*math.Pi)/336),
	f32c("s4", 1/math.Sqrt(2*math.Pi)/3456),
	f32c("s5", -1/math.Sqrt(2*math.Pi)/42240),
	f32c("s6", 1/math.Sqrt(2*math.Pi)/599040),
	f32c("s7", -1/math.Sqrt(2*math.Pi)/9676800),
}

// vconstTable emits vconst<>.
func vconstTable() {
	for i, c := range vconsts {
		fmt.Fprintf(&out, "\n// %s = %s\n", c.name, c.doc)
		for q := 0; q < 8; q++ {
			fmt.Fprintf(&out, "DATA vconst<>+%d(SB)/8, $0x%08x%08x\n", i*64+q*8, c.bits, c.bits)
		}
	}
	fmt.Fprintf(&out, "GLOBL vconst<>(SB), RODATA|NOPTR, $%d\n", len(vconsts)*64)
}

// vec is one vector ISA of the elementwise kernels. Temporaries are
// registers 0–8; constants named in a function's preload list live in the
// registers from 9 (AVX2: up to Y15) or 16 (AVX-512: up to Z31) in order,
// the others are read from vconst<> as memory operands.
type vec struct {
	name  string // "AVX512" or "AVX2"
	reg   string // "Z" or "Y"
	lanes int
	creg  map[string]string
	// normal makes expv assume every result is normal (AVX2 rows whose
	// arguments are all ≥ −86): no clamp, no underflow check.
	normal bool
}

var (
	vAVX512 = &vec{name: "AVX512", reg: "Z", lanes: 16}
	vAVX2   = &vec{name: "AVX2", reg: "Y", lanes: 8}
)

// r names temporary register i.
func (v *vec) r(i int) string { return fmt.Sprintf("%s%d", v.reg, i) }

// c returns the operand for constant name: its register if preloaded, else
// the memory operand.
func (v *vec) c(name string) string {
	if r, ok := v.creg[name]; ok {
		return r
	}
	for i, c := range vconsts {
		if c.name == name {
			return fmt.Sprintf("vconst<>+%d(SB)", i*64)
		}
	}
	panic("unknown constant " + name)
}

// cr returns constant name as a register (for the operand positions that
// cannot be memory, and for NaN propagation through VMINPS/VMAXPS, whose
// second source — the Go assembler's first operand — is what they return
// when either input is NaN).
func (v *vec) cr(name string) string {
	r, ok := v.creg[name]
	if !ok {
		panic(v.name + ": constant " + name + " must be preloaded")
	}
	return r
}

// preload loads constants into the constant registers.
func (v *vec) preload(names ...string) {
	first, last := 16, 31
	if v.reg == "Y" {
		first, last = 9, 15
	}
	v.creg = map[string]string{}
	for i, n := range names {
		if first+i > last {
			break
		}
		reg := fmt.Sprintf("%s%d", v.reg, first+i)
		p("VMOVUPS %s, %s // %s", v.c(n), reg, n)
		v.creg[n] = reg
	}
}

// zero returns the zeroing idiom for register r.
func (v *vec) zero(r string) string {
	if v.reg == "Z" {
		return fmt.Sprintf("VPXORD %s, %s, %s", r, r, r)
	}
	return fmt.Sprintf("VPXOR %s, %s, %s", r, r, r)
}

// expv emits R3 = exp(R1 + lo) (lo a register, or "" for exp(R1)),
// clobbering R1, R2, R4, for R1 + lo ≤ 0 or NaN (every caller's argument:
// x − max, −|s|, −x²/2 + E). Without lo, R1 is first clamped to ≥ −200
// (so −Inf gives 0) with NaN passed through. With adj (a scratch register,
// clobbered on AVX2), the result is scaled by 2²⁴ in the lanes where R0 is
// negative (K1 on AVX-512, set by the caller), so that a tiny exp stays a
// normal float there and the caller rounds into the subnormal range once,
// at the end.
//
// With lo, n is rounded from R1 + lo and r = (R1 − n·c1) − n·c2 + lo: the
// first step is exact for |R1| ≥ 1, so a large R1 (−x²/2 in GELU-erf) adds
// no rounding error beyond that of lo.
//
// The 2^n factor: VSCALEFPS on AVX-512. On AVX2, when every lane has
// n ≥ −125 (the result is normal), n<<23 is added to p's exponent bits,
// which is exact; otherwise n is clamped to ≥ −160 (p·2^n is 0 below
// either way, p ∈ [0.7, 1.42]) and applied as 2^n1·2^n2 with n1 = n>>1,
// n2 = n − n1, two normal powers of two: p·2^n1 is exact, so the second
// product rounds p·2^n once, as VSCALEFPS does, gradual underflow
// included. Both give VSCALEFPS's bits.
func (v *vec) expv(lo, adj string) {
	r := v.r
	if lo == "" {
		if !v.normal {
			p("VMAXPS %s, %s, %s", r(1), v.cr("lo"), r(1))
		}
		p("VMULPS %s, %s, %s", v.c("log2e"), r(1), r(2))
	} else {
		p("VADDPS %s, %s, %s", lo, r(1), r(2))
		p("VMULPS %s, %s, %s", v.c("log2e"), r(2), r(2))
	}
	if v.reg == "Z" {
		p("VRNDSCALEPS $0, %s, %s", r(2), r(2))
	} else {
		p("VROUNDPS $0, %s, %s", r(2), r(2))
	}
	p("VFNMADD231PS %s, %s, %s", v.c("c1"), r(2), r(1))
	p("VFNMADD231PS %s, %s, %s", v.c("c2"), r(2), r(1))
	if lo != "" {
		p("VADDPS %s, %s, %s", lo, r(1), r(1))
	}
	p("VMOVUPS %s, %s", v.c("p1"), r(3))
	for _, c := range []string{"p2", "p3", "p4", "p5"} {
		p("VFMADD213PS %s, %s, %s", v.c(c), r(1), r(3))
	}
	p("VMULPS %s, %s, %s", r(1), r(1), r(4))
	p("VFMADD213PS %s, %s, %s", r(1), r(4), r(3))
	p("VADDPS %s, %s, %s", v.c("one"), r(3), r(3))
	if adj != "" {
		if v.reg == "Z" {
			p("VADDPS %s, %s, K1, %s", v.c("c24"), r(2), r(2))
		} else {
			p("VPSRAD $31, %s, %s", r(0), adj)
			p("VANDPS %s, %s, %s", v.c("c24"), adj, adj)
			p("VADDPS %s, %s, %s", adj, r(2), r(2))
		}
	}
	if v.reg == "Z" {
		p("VSCALEFPS %s, %s, %s", r(2), r(3), r(3))
		return
	}
	if v.normal {
		p("VCVTPS2DQ %s, %s", r(2), r(2))
		p("VPSLLD $23, %s, %s", r(2), r(2))
		p("VPADDD %s, %s, %s", r(2), r(3), r(3))
		return
	}
	slow, done := newLabel("expslow"), newLabel("expdone")
	p("VCMPPS $1, %s, %s, %s", v.c("nm125"), r(2), r(4))
	p("VPTEST %s, %s", r(4), r(4))
	p("JNZ %s", slow)
	p("VCVTPS2DQ %s, %s", r(2), r(2))
	p("VPSLLD $23, %s, %s", r(2), r(2))
	p("VPADDD %s, %s, %s", r(2), r(3), r(3))
	p("JMP %s", done)
	label(slow)
	p("VMAXPS %s, %s, %s", v.c("nm160"), r(2), r(2))
	p("VCVTPS2DQ %s, %s", r(2), r(2))
	p("VPSRAD $1, %s, %s", r(2), r(4))
	p("VPSUBD %s, %s, %s", r(4), r(2), r(2))
	p("VPADDD %s, %s, %s", v.c("bias"), r(4), r(4))
	p("VPADDD %s, %s, %s", v.c("bias"), r(2), r(2))
	p("VPSLLD $23, %s, %s", r(4), r(4))
	p("VPSLLD $23, %s, %s", r(2), r(2))
	p("VMULPS %s, %s, %s", r(4), r(3), r(3))
	p("VMULPS %s, %s, %s", r(2), r(3), r(3))
	label(done)
}

var labels int

// newLabel returns a label unique in the file.
func newLabel(prefix string) string {
	labels++
	return fmt.Sprintf("%s%d", prefix, labels)
}

// signedSigmoid emits, from R0 = x and R1 = −|s| (s of x's sign), R0 =
// x·sigmoid(s): with E = exp(−|s|)·(s < 0 ? 2²⁴ : 1), x/(1 + E) for s ≥ 0
// and x·E/(2²⁴ + E) for s < 0 — the same bits as x·e/(1 + e) wherever
// e = exp(−|s|) is normal, and rounded once into the subnormal range where
// it is not; exp never overflows. Clobbers R1–R5.
func (v *vec) signedSigmoid() {
	r := v.r
	if v.reg == "Z" {
		p("VPTESTMD %s, %s, K1", v.c("sign"), r(0))
	}
	v.expv("", r(5))
	if v.reg == "Z" {
		p("VMOVAPS %s, %s", v.cr("one"), r(4))
		p("VMOVUPS %s, K1, %s", v.c("c2p24"), r(4))
		p("VADDPS %s, %s, %s", r(3), r(4), r(4))
		p("VMULPS %s, %s, K1, %s", r(3), r(0), r(0))
	} else {
		p("VMULPS %s, %s, %s", r(3), r(0), r(5))
		p("VBLENDVPS %s, %s, %s, %s", r(0), v.c("c2p24"), v.cr("one"), r(4))
		p("VADDPS %s, %s, %s", r(3), r(4), r(4))
		p("VBLENDVPS %s, %s, %s, %s", r(0), r(5), r(0), r(0))
	}
	p("VDIVPS %s, %s, %s", r(4), r(0), r(0))
}

// geluTanhArg emits R1 = −|s| = −2√(2/π)·(|x| + 0.044715·|x|³) from R0 = x
// (the same magnitudes as from x itself: every step is odd in x).
func (v *vec) geluTanhArg() {
	r := v.r
	p("VANDPS %s, %s, %s", v.c("abs"), r(0), r(1))
	p("VMULPS %s, %s, %s", r(1), r(1), r(2))
	p("VMULPS %s, %s, %s", r(1), r(2), r(2))
	p("VFMADD231PS %s, %s, %s", v.c("gk"), r(2), r(1))
	p("VMULPS %s, %s, %s", v.c("gm2c"), r(1), r(1))
}

// siluArg emits R1 = −|x| from R0 = x.
func (v *vec) siluArg() {
	p("VORPS %s, %s, %s", v.c("sign"), v.r(0), v.r(1))
}

// geluErf emits R0 = x·Φ(x) from R0 = x, clobbering R1–R8. For |x| < 1,
// x·Φ(x) = fma(x, x·R(x²), x/2) (the s constants). Elsewhere
// x·(x < 0 ? h : 1 − h), h = erfc(|x|/√2)/2. With xc = x clamped to [−16, 16] (NaN
// passed through; beyond, h underflows to 0): t = 1/(1 + |xc|/(2√2)),
// −xc²/2 = −q/2 − ql/2 exactly (q = xc², ql = fma(xc, xc, −q)), and
// h = (t/2)·exp(−q/2 + (E(t) − ql/2)) via expv's two-part argument, so the
// relative error of h stays a few ulp in the whole negative tail. For
// x < 0, h is computed scaled by 2²⁴ (expv's adj) and x·h scaled back
// last, so a subnormal result is rounded once.
func (v *vec) geluErf() {
	r := v.r
	// The series into R8.
	p("VMULPS %s, %s, %s", r(0), r(0), r(1))
	p("VMOVUPS %s, %s", v.c("s7"), r(8))
	for _, c := range []string{"s6", "s5", "s4", "s3", "s2", "s1", "s0"} {
		p("VFMADD213PS %s, %s, %s", v.c(c), r(1), r(8))
	}
	p("VMULPS %s, %s, %s", r(0), r(8), r(8))
	p("VMULPS %s, %s, %s", v.c("half"), r(0), r(2))
	p("VFMADD213PS %s, %s, %s", r(2), r(0), r(8))
	if v.reg == "Z" {
		p("VANDPS %s, %s, %s", v.c("abs"), r(0), r(1))
		p("VCMPPS $1, %s, %s, K2", v.cr("one"), r(1))
		p("VPTESTMD %s, %s, K1", v.c("sign"), r(0))
	}
	p("VMINPS %s, %s, %s", r(0), v.cr("e16"), r(1))
	p("VMAXPS %s, %s, %s", r(1), v.cr("em16"), r(1))
	p("VMULPS %s, %s, %s", r(1), r(1), r(6))
	p("VMOVAPS %s, %s", r(6), r(7))
	p("VFMSUB231PS %s, %s, %s", r(1), r(1), r(7))
	p("VANDPS %s, %s, %s", v.c("abs"), r(1), r(1))
	p("VMOVAPS %s, %s", v.cr("one"), r(5))
	p("VFMADD231PS %s, %s, %s", v.c("ek"), r(1), r(5))
	p("VDIVPS %s, %s, %s", r(5), v.cr("one"), r(5))
	p("VMULPS %s, %s, %s", v.c("mhalf"), r(6), r(1))
	p("VMOVUPS %s, %s", v.c("e9"), r(6))
	for _, c := range []string{"e8", "e7", "e6", "e5", "e4", "e3", "e2", "e1", "e0"} {
		p("VFMADD213PS %s, %s, %s", v.c(c), r(5), r(6))
	}
	p("VFMADD231PS %s, %s, %s", v.c("mhalf"), r(7), r(6))
	v.expv(r(6), r(7))
	p("VMULPS %s, %s, %s", v.c("half"), r(5), r(5))
	p("VMULPS %s, %s, %s", r(5), r(3), r(3))
	p("VSUBPS %s, %s, %s", r(3), v.cr("one"), r(4))
	if v.reg == "Z" {
		p("VMOVAPS %s, K1, %s", r(3), r(4))
		p("VMULPS %s, %s, %s", r(4), r(0), r(0))
		p("VMULPS %s, %s, K1, %s", v.c("c2m24"), r(0), r(0))
		p("VMOVAPS %s, K2, %s", r(8), r(0))
	} else {
		p("VANDPS %s, %s, %s", v.c("abs"), r(0), r(1))
		p("VCMPPS $1, %s, %s, %s", v.cr("one"), r(1), r(1))
		p("VBLENDVPS %s, %s, %s, %s", r(0), r(3), r(4), r(4))
		p("VBLENDVPS %s, %s, %s, %s", r(0), v.c("c2m24"), v.cr("one"), r(5))
		p("VMULPS %s, %s, %s", r(4), r(0), r(0))
		p("VMULPS %s, %s, %s", r(5), r(0), r(0))
		p("VBLENDVPS %s, %s, %s, %s", r(1), r(8), r(0), r(0))
	}
}

// Preload lists, most used first.
var (
	preSigmoid = []string{"lo", "one", "log2e", "c1", "c2", "p1", "p2", "p3", "p4", "p5", "gk", "gm2c", "sign", "abs"}
	preErf     = []string{"one", "e16", "em16", "log2e", "c1", "c2", "p1", "p2", "p3", "p4", "p5", "e8", "e7", "e6", "e5", "e4"}
)

// act emits func act<ISA>(x *float32, n, kind int): in place, n a multiple
// of 16; kind 1 = GELU-tanh, 2 = SiLU, 3 = GELU-erf (see signedSigmoid and
// geluErf).
func act(v *vec) {
	fn := "act" + v.name
	step := v.lanes * 4
	fmt.Fprintf(&out, "\n// func %s(x *float32, n, kind int)\n", fn)
	fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-24\n", fn)
	p("MOVQ x+0(FP), DI")
	p("MOVQ n+8(FP), CX")
	p("MOVQ kind+16(FP), DX")
	p("SHRQ $%d, CX", map[int]int{16: 4, 8: 3}[v.lanes])
	p("JZ done")
	p("CMPQ DX, $3")
	p("JEQ erf")
	v.preload(preSigmoid...)
	p("CMPQ DX, $2")
	p("JEQ silu")
	loop := func(l string, body func()) {
		label(l)
		p("VMOVUPS (DI), %s", v.r(0))
		body()
		p("VMOVUPS %s, (DI)", v.r(0))
		p("ADDQ $%d, DI", step)
		p("DECQ CX")
		p("JNZ %s", l)
		p("JMP done")
	}
	loop("gelu", func() { v.geluTanhArg(); v.signedSigmoid() })
	loop("silu", func() { v.siluArg(); v.signedSigmoid() })
	label("erf")
	v.preload(preErf...)
	loop("erfloop", v.geluErf)
	label("done")
	p("VZEROUPPER")
	p("RET")

	// func siluMul<ISA>(x, y *float32, n int): x[i] = silu(x[i])·y[i], n a
	// multiple of 16 (the SwiGLU gate of a Qwen3 MLP).
	fn = "siluMul" + v.name
	fmt.Fprintf(&out, "\n// func %s(x, y *float32, n int)\n", fn)
	fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-24\n", fn)
	p("MOVQ x+0(FP), DI")
	p("MOVQ y+8(FP), SI")
	p("MOVQ n+16(FP), CX")
	p("SHRQ $%d, CX", map[int]int{16: 4, 8: 3}[v.lanes])
	p("JZ done")
	v.preload(preSigmoid...)
	label("loop")
	p("VMOVUPS (DI), %s", v.r(0))
	v.siluArg()
	v.signedSigmoid()
	p("VMULPS (SI), %s, %s", v.r(0), v.r(0))
	p("VMOVUPS %s, (DI)", v.r(0))
	p("ADDQ $%d, DI", step)
	p("ADDQ $%d, SI", step)
	p("DECQ CX")
	p("JNZ loop")
	label("done")
	p("VZEROUPPER")
	p("RET")
}

// reduceLanes reduces the 16 lanes of (a, b) — one zmm a, or ymm a and b
// — with op into lane 0 of the xmm of a, clobbering register 1.
func reduceLanes(v *vec, op string, a, b int) {
	if v.reg == "Z" {
		p("VEXTRACTF64X4 $1, Z%d, Y1", a)
		p("%s Y1, Y%d, Y%d", op, a, a)
	} else {
		p("%s Y%d, Y%d, Y%d", op, b, a, a)
	}
	p("VEXTRACTF128 $1, Y%d, X1", a)
	p("%s X1, X%d, X%d", op, a, a)
	p("VPERMILPS $0x4e, X%d, X1", a)
	p("%s X1, X%d, X%d", op, a, a)
	p("VPERMILPS $0xb1, X%d, X1", a)
	p("%s X1, X%d, X%d", op, a, a)
}

// softmaxHelpers emits
//
//	func rowMax<ISA>(x *float32, n int) float32          // max of x[0:n], n%16 == 0, n > 0
//	func expShiftSum<ISA>(x *float32, n int, shift float32) float32
//
// the second sets x[i] = exp(x[i] − shift) and returns Σ x[i] as 16 fp32
// partial sums (lane i sums x[16j + i]) reduced pairwise, n%16 == 0: AVX2
// keeps the 16 partial sums in two ymm accumulators and reduces them in
// AVX-512's order, so both return the same bits. AVX2 has two more:
//
//	func rowMaxMinAVX2(x *float32, n int) (mx, mn float32)
//	func expShiftSumNormalAVX2(x *float32, n int, shift float32) float32
//
// the first also returns the minimum, the second is expShiftSum for rows
// whose x − shift are all ≥ −86, where every exp is a normal float: no
// clamp and no per-vector underflow check (the same bits).
func softmaxHelpers(v *vec) {
	reduce16 := func(op string, a, b int) { reduceLanes(v, op, a, b) }
	fn := "rowMax" + v.name
	fmt.Fprintf(&out, "\n// func %s(x *float32, n int) float32\n", fn)
	fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-20\n", fn)
	p("MOVQ x+0(FP), DI")
	p("MOVQ n+8(FP), CX")
	p("SHRQ $4, CX")
	if v.reg == "Z" {
		p("VMOVUPS (DI), Z0")
		label("loop")
		p("VMAXPS (DI), Z0, Z0")
		p("ADDQ $64, DI")
	} else {
		p("VMOVUPS (DI), Y0")
		p("VMOVUPS 32(DI), Y2")
		label("loop")
		p("VMAXPS (DI), Y0, Y0")
		p("VMAXPS 32(DI), Y2, Y2")
		p("ADDQ $64, DI")
	}
	p("DECQ CX")
	p("JNZ loop")
	reduce16("VMAXPS", 0, 2)
	p("VMOVSS X0, ret+16(FP)")
	p("VZEROUPPER")
	p("RET")

	if v.reg == "Y" {
		// rowMaxMinAVX2: the max as rowMaxAVX2 (same bits) and the min.
		fn := "rowMaxMin" + v.name
		fmt.Fprintf(&out, "\n// func %s(x *float32, n int) (mx, mn float32)\n", fn)
		fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-24\n", fn)
		p("MOVQ x+0(FP), DI")
		p("MOVQ n+8(FP), CX")
		p("SHRQ $4, CX")
		p("VMOVUPS (DI), Y0")
		p("VMOVUPS 32(DI), Y2")
		p("VMOVAPS Y0, Y3")
		p("VMOVAPS Y2, Y4")
		label("loop")
		p("VMOVUPS (DI), Y5")
		p("VMOVUPS 32(DI), Y6")
		p("VMAXPS Y5, Y0, Y0")
		p("VMAXPS Y6, Y2, Y2")
		p("VMINPS Y5, Y3, Y3")
		p("VMINPS Y6, Y4, Y4")
		p("ADDQ $64, DI")
		p("DECQ CX")
		p("JNZ loop")
		reduce16("VMAXPS", 0, 2)
		reduce16("VMINPS", 3, 4)
		p("VMOVSS X0, mx+16(FP)")
		p("VMOVSS X3, mn+20(FP)")
		p("VZEROUPPER")
		p("RET")
	}
	expShiftSum(v, "expShiftSum"+v.name)
	if v.reg == "Y" {
		// expShiftSumNormalAVX2: for rows with x − shift ≥ −86 throughout.
		v.normal = true
		expShiftSum(v, "expShiftSumNormal"+v.name)
		v.normal = false
	}
}

// expShiftSum emits one expShiftSum function (see softmaxHelpers).
func expShiftSum(v *vec, fn string) {
	r := v.r
	reduce16 := func(op string, a, b int) { reduceLanes(v, op, a, b) }
	fmt.Fprintf(&out, "\n// func %s(x *float32, n int, shift float32) float32\n", fn)
	fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-28\n", fn)
	p("MOVQ x+0(FP), DI")
	p("MOVQ n+8(FP), CX")
	p("VBROADCASTSS shift+16(FP), %s", r(5))
	v.preload(preSigmoid...)
	p(v.zero(r(6)))
	p(v.zero(r(7)))
	p("SHRQ $4, CX")
	p("JZ done")
	label("loop")
	// AVX2: the first ymm of each 16 floats adds into Y6 (AVX-512's lanes
	// 0–7), the second into Y7 (lanes 8–15).
	for h := 0; h < 16/v.lanes; h++ {
		p("VMOVUPS %d(DI), %s", h*32, r(1))
		p("VSUBPS %s, %s, %s", r(5), r(1), r(1))
		v.expv("", "")
		p("VMOVUPS %s, %d(DI)", r(3), h*32)
		p("VADDPS %s, %s, %s", r(3), r(6+h), r(6+h))
	}
	p("ADDQ $64, DI")
	p("DECQ CX")
	p("JNZ loop")
	label("done")
	reduce16("VADDPS", 6, 7)
	p("VMOVSS X6, ret+24(FP)")
	p("VZEROUPPER")
	p("RET")
}

// normStats emits the float64 statistics of LayerNorm and RMSNorm (AVX2,
// used on every SIMD level: they are bound by the float → double widening,
// and one implementation keeps AVX2 and AVX-512 results identical):
//
//	func sumF64AVX2(x *float32, n int) float64                 // Σ x[i]
//	func sqDevF64AVX2(x *float32, n int, mean float64) float64 // Σ (x[i] − mean)²
//
// n a multiple of 16, in float64 with 16 partial sums (four ymm of four
// doubles, lane l summing x[16j + l]) reduced pairwise; the square is
// fused (one rounding per term).
func normStats() {
	reduce := func() {
		p("VADDPD Y1, Y0, Y0")
		p("VADDPD Y3, Y2, Y2")
		p("VADDPD Y2, Y0, Y0")
		p("VEXTRACTF128 $1, Y0, X1")
		p("VADDPD X1, X0, X0")
		p("VUNPCKHPD X0, X0, X1")
		p("VADDSD X1, X0, X0")
	}
	fmt.Fprintf(&out, "\n// func sumF64AVX2(x *float32, n int) float64\n")
	fmt.Fprintf(&out, "TEXT ·sumF64AVX2(SB), NOSPLIT, $0-24\n")
	p("MOVQ x+0(FP), SI")
	p("MOVQ n+8(FP), CX")
	for i := 0; i < 4; i++ {
		p("VXORPD Y%d, Y%d, Y%d", i, i, i)
	}
	p("SHRQ $4, CX")
	p("JZ done")
	label("loop")
	for i := 0; i < 4; i++ {
		p("VCVTPS2PD %d(SI), Y%d", i*16, 4+i)
	}
	for i := 0; i < 4; i++ {
		p("VADDPD Y%d, Y%d, Y%d", 4+i, i, i)
	}
	p("ADDQ $64, SI")
	p("DECQ CX")
	p("JNZ loop")
	label("done")
	reduce()
	p("VMOVSD X0, ret+16(FP)")
	p("VZEROUPPER")
	p("RET")

	fmt.Fprintf(&out, "\n// func sqDevF64AVX2(x *float32, n int, mean float64) float64\n")
	fmt.Fprintf(&out, "TEXT ·sqDevF64AVX2(SB), NOSPLIT, $0-32\n")
	p("MOVQ x+0(FP), SI")
	p("MOVQ n+8(FP), CX")
	p("VBROADCASTSD mean+16(FP), Y8")
	for i := 0; i < 4; i++ {
		p("VXORPD Y%d, Y%d, Y%d", i, i, i)
	}
	p("SHRQ $4, CX")
	p("JZ done")
	label("loop")
	for i := 0; i < 4; i++ {
		p("VCVTPS2PD %d(SI), Y%d", i*16, 4+i)
	}
	for i := 0; i < 4; i++ {
		p("VSUBPD Y8, Y%d, Y%d", 4+i, 4+i)
	}
	for i := 0; i < 4; i++ {
		p("VFMADD231PD Y%d, Y%d, Y%d", 4+i, 4+i, i)
	}
	p("ADDQ $64, SI")
	p("DECQ CX")
	p("JNZ loop")
	label("done")
	reduce()
	p("VMOVSD X0, ret+24(FP)")
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
	kernel(isa{name: "AVX512", reg: "Z", lanes: 16, mr: 6, nv: 4, zero: "VPXORD", rowsA: true})
	kernel(isa{name: "AVX2", reg: "Y", lanes: 8, mr: 6, nv: 2, zero: "VPXOR", rowsA: true})
	widen("AVX512", "Z", 16)
	widen("AVX2", "Y", 8)
	peak("AVX512", "Z", 24)
	peak("AVX2", "Y", 12)
	clock()
	vconstTable()
	for _, v := range []*vec{vAVX512, vAVX2} {
		act(v)
		softmaxHelpers(v)
	}
	normStats()
	if err := os.WriteFile("gemm_amd64.s", out.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
