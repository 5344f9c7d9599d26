//go:build ignore

// gen_asm_arm64 writes gemm_arm64.s: the NEON (ASIMD) GEMM micro-kernels
// for arm64, the bf16 → fp32 widening, an FMA peak loop, and the
// elementwise kernels (activations, SiLUMul, softmax exp and row max, the
// float64 norm statistics) in the operation sequence of the AVX2 ones in
// gen_asm.go, so that they return the same bits. Regenerate with
//
//	cd core/tensor && go run gen_asm_arm64.go && GOARCH=arm64 go vet .
//
// It reads the elementwise constants from gemm_amd64.s's vconst<> table
// (written by gen_asm.go), so both architectures use the same values.
//
// The Go arm64 assembler has no vector floating-point arithmetic besides
// FMLA/FMLS, so FADD, FMUL, FMLA-by-element and the rest are emitted as
// WORDs with the instruction, in GNU operand order (destination first), in
// a comment; check them with
//
//	GOARCH=arm64 go test -c -o t.test . && go tool objdump -gnu -s NEON t.test
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
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
	// Prefetch B four iterations ahead, one PRFM per 64-byte line that an
	// iteration consumes (128 bytes fp32, 64 bf16).
	for off := 0; off < unroll*nr*eb; off += 64 {
		p("PRFM %d(R1), PLDL1KEEP", unroll*nr*eb*4+off)
	}
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
	readConsts("gemm_amd64.s")
	constTable()
	act()
	softmaxHelpers()
	normStats()
	if err := os.WriteFile("gemm_arm64.s", out.Bytes(), 0o644); err != nil {
		panic(err)
	}
}

// ---- The elementwise kernels -------------------------------------------

// vconst is one constant of gen_asm.go's vconst<> table.
type vconst struct {
	name string
	bits uint32
	doc  string
}

var consts []vconst

// readConsts reads the "// name = doc" + DATA vconst<>+64i lines of the
// amd64 file.
func readConsts(path string) {
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	head := regexp.MustCompile(`^// (\w+) = (.*)$`)
	data := regexp.MustCompile(`^DATA vconst<>\+(\d+)\(SB\)/8, \$0x([0-9a-f]{8})([0-9a-f]{8})$`)
	var name, doc string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := head.FindStringSubmatch(sc.Text()); m != nil {
			name, doc = m[1], m[2]
			continue
		}
		m := data.FindStringSubmatch(sc.Text())
		if m == nil || name == "" {
			name = ""
			continue
		}
		off, _ := strconv.Atoi(m[1])
		bits, _ := strconv.ParseUint(m[2], 16, 32)
		if off != len(consts)*64 || m[2] != m[3] {
			panic(fmt.Sprintf("%s: unexpected vconst layout at %s (offset %d)", path, name, off))
		}
		consts = append(consts, vconst{name, uint32(bits), doc})
		name = ""
	}
	if len(consts) == 0 {
		panic(path + ": no vconst<> table")
	}
}

// constTable emits vconstN<>: each constant replicated over 16 bytes.
func constTable() {
	for i, c := range consts {
		fmt.Fprintf(&out, "\n// %s = %s\n", c.name, c.doc)
		for q := 0; q < 2; q++ {
			fmt.Fprintf(&out, "DATA vconstN<>+%d(SB)/8, $0x%08x%08x\n", i*16+q*8, c.bits, c.bits)
		}
	}
	fmt.Fprintf(&out, "GLOBL vconstN<>(SB), RODATA|NOPTR, $%d\n", len(consts)*16)
}

func constOff(name string) int {
	for i, c := range consts {
		if c.name == name {
			return i * 16
		}
	}
	panic("unknown constant " + name)
}

// Register use of the elementwise kernels: temporaries V0–V10, preloaded
// constants V11–V30, V31 a scratch for a constant that is not preloaded
// (read from vconstN<>, whose address is in R10).
const (
	firstConst = 11
	lastConst  = 30
	scratch    = 31
)

var creg map[string]int

// preload points R10 at vconstN<> and loads the named constants.
func preload(names ...string) {
	p("MOVD $vconstN<>(SB), R10")
	creg = map[string]int{}
	for i, n := range names {
		r := firstConst + i
		if r > lastConst {
			panic("too many preloaded constants")
		}
		p("FMOVQ %d(R10), F%d // %s", constOff(n), r, n)
		creg[n] = r
	}
}

// c returns the register of constant name, loading it into V31 if it is
// not preloaded (so at most one non-preloaded constant per instruction).
func c(name string) int {
	if r, ok := creg[name]; ok {
		return r
	}
	p("FMOVQ %d(R10), F%d // %s", constOff(name), scratch, name)
	return scratch
}

// cload sets register d to constant name.
func cload(d int, name string) {
	if r, ok := creg[name]; ok {
		vmov(d, r)
		return
	}
	p("FMOVQ %d(R10), F%d // %s", constOff(name), d, name)
}

func vmov(d, n int) { p("VMOV V%d.B16, V%d.B16", n, d) }

func word(w uint32, asm string, args ...any) {
	p("WORD $0x%08x // %s", w, fmt.Sprintf(asm, args...))
}

// Three-register vector ops, GNU operand order (d, n, m); .4S unless noted.
var ops3 = map[string]uint32{
	"fadd": 0x4e20d400, "fsub": 0x4ea0d400, "fmul": 0x6e20dc00, "fdiv": 0x6e20fc00,
	"fmla": 0x4e20cc00, "fmls": 0x4ea0cc00, "fmax": 0x4e20f400, "fmin": 0x4ea0f400,
	"fcmgt":   0x6ea0e400,
	"fadd.2d": 0x4e60d400, "fsub.2d": 0x4ee0d400, "fmla.2d": 0x4e60cc00,
}

func op3(op string, d, n, m int) {
	base, ok := ops3[op]
	if !ok {
		panic(op)
	}
	arr := "4s"
	if len(op) > 3 && op[len(op)-3:] == ".2d" {
		op, arr = op[:len(op)-3], "2d"
	}
	word(base|uint32(m)<<16|uint32(n)<<5|uint32(d), "%s v%d.%s, v%d.%s, v%d.%s", op, d, arr, n, arr, m, arr)
}

// Two-register ops (d, n): encoding and GNU syntax.
var ops2 = map[string]struct {
	base uint32
	asm  string
}{
	"frintn":  {0x4e218800, "frintn v%d.4s, v%d.4s"},
	"fcvtzs":  {0x4ea1b800, "fcvtzs v%d.4s, v%d.4s"},
	"fneg":    {0x6ea0f800, "fneg v%d.4s, v%d.4s"},
	"cmlt":    {0x4ea0a800, "cmlt v%d.4s, v%d.4s, #0"}, // signed: all ones where the sign bit is set
	"fmaxv":   {0x6e30f800, "fmaxv s%d, v%d.4s"},
	"fminv":   {0x6eb0f800, "fminv s%d, v%d.4s"},
	"faddp.s": {0x7e30d800, "faddp s%d, v%d.2s"},
	"faddp.d": {0x7e70d800, "faddp d%d, v%d.2d"},
	"fcvtl":   {0x0e617800, "fcvtl v%d.2d, v%d.2s"},
	"fcvtl2":  {0x4e617800, "fcvtl2 v%d.2d, v%d.4s"},
}

func op2(op string, d, n int) {
	o, ok := ops2[op]
	if !ok {
		panic(op)
	}
	word(o.base|uint32(n)<<5|uint32(d), o.asm, d, n)
}

func sshr(d, n, s int) {
	word(0x4f000400|uint32(64-s)<<16|uint32(n)<<5|uint32(d), "sshr v%d.4s, v%d.4s, #%d", d, n, s)
}

// Native instructions (Go operand order is GNU's reversed).
func vand(d, n, m int)  { p("VAND V%d.B16, V%d.B16, V%d.B16", m, n, d) }
func vorr(d, n, m int)  { p("VORR V%d.B16, V%d.B16, V%d.B16", m, n, d) }
func vaddi(d, n, m int) { p("VADD V%d.S4, V%d.S4, V%d.S4", m, n, d) }
func vsubi(d, n, m int) { p("VSUB V%d.S4, V%d.S4, V%d.S4", m, n, d) }
func vshl(d, n, s int)  { p("VSHL $%d, V%d.S4, V%d.S4", s, n, d) }

// bit sets d = mask ? n : d.
func bit(d, n, mask int) { p("VBIT V%d.B16, V%d.B16, V%d.B16", mask, n, d) }

// sel sets d = mask ? a : b (d ≠ a, b).
func sel(d, mask, a, b int) {
	vmov(d, mask)
	p("VBSL V%d.B16, V%d.B16, V%d.B16", b, a, d)
}

// horner evaluates acc = acc·x + c for c in cs (each one FMA, as AVX2's
// VFMADD213PS c, x, acc), alternating between acc and tmp; it returns the
// register holding the result.
func horner(acc, tmp, x int, cs ...string) int {
	for _, name := range cs {
		cload(tmp, name)
		op3("fmla", tmp, acc, x)
		acc, tmp = tmp, acc
	}
	return acc
}

// normal makes expv assume every result is a normal float (softmax rows
// whose arguments are all ≥ −86): no clamp, one-step scale.
var normal bool

// expv is gen_asm.go's expv on NEON: V3 = exp(V1 + lo) (lo a register, or
// −1 for exp(V1), then V1 is first clamped to ≥ −200 with NaN passed
// through), clobbering V1, V2, V4. With adj ≥ 0 (a scratch register), the
// result is scaled by 2²⁴ in the lanes where mask (a register, all ones
// where V0 is negative) is set. The 2^n factor is always applied in two
// steps (2^n1·2^n2, n clamped to ≥ −160): AVX2's slow path, which gives the
// same bits as its one-step path wherever the result is normal; with normal
// set, it is the one-step integer add to the exponent.
func expv(lo, adj, mask int) {
	if lo < 0 {
		if !normal {
			op3("fmax", 1, 1, c("lo"))
		}
		op3("fmul", 2, 1, c("log2e"))
	} else {
		op3("fadd", 2, 1, lo)
		op3("fmul", 2, 2, c("log2e"))
	}
	op2("frintn", 2, 2)
	op3("fmls", 1, 2, c("c1"))
	op3("fmls", 1, 2, c("c2"))
	if lo >= 0 {
		op3("fadd", 1, 1, lo)
	}
	cload(3, "p1")
	pr := horner(3, 4, 1, "p2", "p3", "p4", "p5") // in V3
	sq := 3
	if pr == 3 {
		sq = 4
	}
	op3("fmul", sq, 1, 1)
	op3("fmla", 1, pr, sq) // r + P·r²
	op3("fadd", 3, 1, c("one"))
	if adj >= 0 {
		vand(adj, mask, c("c24"))
		op3("fadd", 2, 2, adj)
	}
	if normal {
		op2("fcvtzs", 2, 2)
		vshl(2, 2, 23)
		vaddi(3, 3, 2)
		return
	}
	op3("fmax", 2, 2, c("nm160"))
	op2("fcvtzs", 2, 2)
	sshr(4, 2, 1)
	vsubi(2, 2, 4)
	vaddi(4, 4, c("bias"))
	vaddi(2, 2, c("bias"))
	vshl(4, 4, 23)
	vshl(2, 2, 23)
	op3("fmul", 3, 3, 4)
	op3("fmul", 3, 3, 2)
}

// signedSigmoid: from V0 = x and V1 = −|s|, V0 = x·sigmoid(s) as
// gen_asm.go's signedSigmoid (x/(1 + E) for x ≥ 0, x·E/(2²⁴ + E) for
// x < 0, E = exp(−|s|)·(x < 0 ? 2²⁴ : 1)). Clobbers V1–V6.
func signedSigmoid() {
	op2("cmlt", 6, 0)
	expv(-1, 5, 6)
	op3("fmul", 5, 3, 0)
	sel(4, 6, c("c2p24"), creg["one"])
	op3("fadd", 4, 4, 3)
	bit(0, 5, 6)
	op3("fdiv", 0, 0, 4)
}

// geluTanhArg: V1 = −2√(2/π)·(|x| + 0.044715·|x|³) from V0 = x.
func geluTanhArg() {
	vand(1, 0, c("abs"))
	op3("fmul", 2, 1, 1)
	op3("fmul", 2, 2, 1)
	op3("fmla", 1, 2, c("gk"))
	op3("fmul", 1, 1, c("gm2c"))
}

// siluArg: V1 = −|x| from V0 = x.
func siluArg() { vorr(1, 0, c("sign")) }

// geluErf: V0 = x·Φ(x) from V0 = x as gen_asm.go's geluErf (the Taylor
// series for |x| < 1, else x·(x < 0 ? h : 1 − h) with h = erfc(|x|/√2)/2
// from Numerical Recipes' erfcc and −x²/2 split exactly). Clobbers V1–V9.
func geluErf() {
	op3("fmul", 1, 0, 0)
	cload(8, "s7")
	sr := horner(8, 7, 1, "s6", "s5", "s4", "s3", "s2", "s1", "s0") // in V7
	op3("fmul", sr, sr, 0)
	other := 15 - sr // V8 when the series is in V7
	op3("fmul", other, 0, c("half"))
	op3("fmla", other, sr, 0) // V8 = x/2 + x·R(x²)·x
	series := other
	op3("fmin", 1, 0, c("e16"))
	op3("fmax", 1, 1, c("em16"))
	op3("fmul", 6, 1, 1)
	op2("fneg", 7, 6)
	op3("fmla", 7, 1, 1) // ql = fma(xc, xc, −q)
	vand(1, 1, c("abs"))
	cload(5, "one")
	op3("fmla", 5, 1, c("ek"))
	op3("fdiv", 5, creg["one"], 5)
	op3("fmul", 1, 6, c("mhalf"))
	cload(4, "e9")
	e := horner(4, 6, 5, "e8", "e7", "e6", "e5", "e4", "e3", "e2", "e1", "e0")
	if e != 6 {
		panic("erfc polynomial not in V6")
	}
	op3("fmla", 6, 7, c("mhalf"))
	op2("cmlt", 9, 0)
	expv(6, 7, 9)
	op3("fmul", 5, 5, c("half"))
	op3("fmul", 3, 5, 3)
	op3("fsub", 4, creg["one"], 3)
	vand(1, 0, c("abs"))
	op3("fcmgt", 1, creg["one"], 1) // |x| < 1
	bit(4, 3, 9)
	sel(5, 9, c("c2m24"), creg["one"])
	op3("fmul", 0, 0, 4)
	op3("fmul", 0, 0, 5)
	bit(0, series, 1)
	if series != 8 {
		panic("series not in V8")
	}
}

var (
	preSigmoidN = []string{"lo", "one", "log2e", "c1", "c2", "p1", "p2", "p3", "p4", "p5",
		"gk", "gm2c", "sign", "abs", "c24", "c2p24", "nm160", "bias"}
	preErfN = []string{"one", "e16", "em16", "abs", "ek", "mhalf", "half", "log2e", "c1", "c2",
		"c24", "c2m24", "nm160", "bias", "p1", "p2", "p3", "p4", "p5"}
)

// act emits func actNEON(x *float32, n, kind int) (in place, n a multiple
// of 16; kind 1 = GELU-tanh, 2 = SiLU, 3 = GELU-erf) and func
// siluMulNEON(x, y *float32, n int) (x[i] = silu(x[i])·y[i]).
func act() {
	fmt.Fprintf(&out, "\n// func actNEON(x *float32, n, kind int)\n")
	fmt.Fprintf(&out, "TEXT ·actNEON(SB), NOSPLIT, $0-24\n")
	p("MOVD x+0(FP), R0")
	p("MOVD n+8(FP), R1")
	p("MOVD kind+16(FP), R2")
	p("LSR $2, R1, R1")
	p("CBZ R1, done")
	p("CMP $3, R2")
	p("BEQ erf")
	preload(preSigmoidN...)
	p("CMP $2, R2")
	p("BEQ silu")
	loop := func(l string, body func()) {
		label(l)
		p("VLD1 (R0), [V0.S4]")
		body()
		p("VST1.P [V0.S4], 16(R0)")
		p("SUBS $1, R1, R1")
		p("BNE %s", l)
		p("RET")
	}
	loop("gelu", func() { geluTanhArg(); signedSigmoid() })
	loop("silu", func() { siluArg(); signedSigmoid() })
	label("erf")
	preload(preErfN...)
	loop("erfloop", geluErf)
	label("done")
	p("RET")

	fmt.Fprintf(&out, "\n// func siluMulNEON(x, y *float32, n int)\n")
	fmt.Fprintf(&out, "TEXT ·siluMulNEON(SB), NOSPLIT, $0-24\n")
	p("MOVD x+0(FP), R0")
	p("MOVD y+8(FP), R3")
	p("MOVD n+16(FP), R1")
	p("LSR $2, R1, R1")
	p("CBZ R1, done")
	preload(preSigmoidN...)
	label("loop")
	p("VLD1 (R0), [V0.S4]")
	siluArg()
	signedSigmoid()
	p("VLD1.P 16(R3), [V1.S4]")
	op3("fmul", 0, 0, 1)
	p("VST1.P [V0.S4], 16(R0)")
	p("SUBS $1, R1, R1")
	p("BNE loop")
	label("done")
	p("RET")
}

// softmaxHelpers emits
//
//	func rowMaxNEON(x *float32, n int) float32                // n%8 == 0, n > 0
//	func rowMaxMinNEON(x *float32, n int) (mx, mn float32)
//	func expShiftSumNEON(x *float32, n int, shift float32) float32
//	func expShiftSumNormalNEON(x *float32, n int, shift float32) float32
//
// The max and min propagate NaN (FMAX/FMIN). expShiftSum sets
// x[i] = exp(x[i] − shift) and returns Σ x[i] in AVX-512's 16 lanes (four
// accumulators, lane l of V(6+q) summing x[16j+4q+l]) reduced in its order
// ((s_l + s_l+8) + (s_l+4 + s_l+12), then lanes 0+2 and 1+3, then 0+1), the
// same bits as the AVX2 and AVX-512 kernels; the Normal one is for rows
// whose x − shift are all ≥ −86 (no clamp, one-step scale). n may end in a
// half block of 8 (arm64's GEMM panels are 8 wide, so attention rows are
// multiples of 8): it adds into lanes 0–7 only, which gives the bits of the
// row padded to a multiple of 16 with −Inf (exp = +0, and s + 0 = s).
func softmaxHelpers() {
	for _, mm := range []bool{false, true} {
		fn := "rowMaxNEON"
		if mm {
			fn = "rowMaxMinNEON"
			fmt.Fprintf(&out, "\n// func %s(x *float32, n int) (mx, mn float32)\n", fn)
			fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-24\n", fn)
		} else {
			fmt.Fprintf(&out, "\n// func %s(x *float32, n int) float32\n", fn)
			fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-20\n", fn)
		}
		p("MOVD x+0(FP), R0")
		p("MOVD n+8(FP), R1")
		p("VLD1 (R0), [V0.S4, V1.S4]")
		vmov(2, 0)
		vmov(3, 1)
		if mm {
			for i := 0; i < 4; i++ {
				vmov(8+i, i)
			}
		}
		p("LSR $4, R1, R2")
		p("CBZ R2, tail")
		label("loop")
		p("VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]")
		for i := 0; i < 4; i++ {
			op3("fmax", i, i, 4+i)
			if mm {
				op3("fmin", 8+i, 8+i, 4+i)
			}
		}
		p("SUBS $1, R2, R2")
		p("BNE loop")
		label("tail")
		p("TBZ $3, R1, reduce")
		p("VLD1 (R0), [V4.S4, V5.S4]")
		for i := 0; i < 2; i++ {
			op3("fmax", i, i, 4+i)
			if mm {
				op3("fmin", 8+i, 8+i, 4+i)
			}
		}
		label("reduce")
		op3("fmax", 0, 0, 1)
		op3("fmax", 2, 2, 3)
		op3("fmax", 0, 0, 2)
		op2("fmaxv", 0, 0)
		if mm {
			op3("fmin", 8, 8, 9)
			op3("fmin", 10, 10, 11)
			op3("fmin", 8, 8, 10)
			op2("fminv", 8, 8)
			p("FMOVS F0, mx+16(FP)")
			p("FMOVS F8, mn+20(FP)")
		} else {
			p("FMOVS F0, ret+16(FP)")
		}
		p("RET")
	}
	for _, nm := range []bool{false, true} {
		fn := "expShiftSumNEON"
		if nm {
			fn = "expShiftSumNormalNEON"
		}
		normal = nm
		fmt.Fprintf(&out, "\n// func %s(x *float32, n int, shift float32) float32\n", fn)
		fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-28\n", fn)
		p("MOVD x+0(FP), R0")
		p("MOVD n+8(FP), R1")
		p("FMOVS shift+16(FP), F5")
		p("VDUP V5.S[0], V5.S4")
		preload(preSigmoidN...)
		for q := 0; q < 4; q++ {
			p("VEOR V%d.B16, V%d.B16, V%d.B16", 6+q, 6+q, 6+q)
		}
		vec := func(q int) {
			p("VLD1 (R0), [V1.S4]")
			op3("fsub", 1, 1, 5)
			expv(-1, -1, -1)
			p("VST1.P [V3.S4], 16(R0)")
			op3("fadd", 6+q, 6+q, 3)
		}
		p("LSR $4, R1, R2")
		p("CBZ R2, tail")
		label("loop")
		for q := 0; q < 4; q++ {
			vec(q)
		}
		p("SUBS $1, R2, R2")
		p("BNE loop")
		label("tail")
		p("TBZ $3, R1, done")
		vec(0)
		vec(1)
		label("done")
		op3("fadd", 6, 6, 8)
		op3("fadd", 7, 7, 9)
		op3("fadd", 6, 6, 7)
		p("VEXT $8, V6.B16, V6.B16, V7.B16")
		op3("fadd", 6, 6, 7)
		op2("faddp.s", 6, 6)
		p("FMOVS F6, ret+24(FP)")
		p("RET")
		normal = false
	}
}

// normStats emits the float64 statistics of LayerNorm and RMSNorm as
// gen_asm.go's AVX2 ones (the same bits):
//
//	func sumF64NEON(x *float32, n int) float64                 // Σ x[i]
//	func sqDevF64NEON(x *float32, n int, mean float64) float64 // Σ (x[i] − mean)²
//
// n a multiple of 16, 16 float64 partial sums (V0–V7, two each; V(2i+h)
// lane l sums x[16j+4i+2h+l], AVX2's ymm i lane 2h+l) reduced in AVX2's
// order; the square is fused.
func normStats() {
	reduce := func() {
		// AVX2: Y0+=Y1, Y2+=Y3, Y0+=Y2 (each as its two halves), then
		// high half + low half, then lane 0 + lane 1.
		op3("fadd.2d", 0, 0, 2)
		op3("fadd.2d", 1, 1, 3)
		op3("fadd.2d", 4, 4, 6)
		op3("fadd.2d", 5, 5, 7)
		op3("fadd.2d", 0, 0, 4)
		op3("fadd.2d", 1, 1, 5)
		op3("fadd.2d", 0, 0, 1)
		op2("faddp.d", 0, 0)
	}
	for _, sq := range []bool{false, true} {
		if sq {
			fmt.Fprintf(&out, "\n// func sqDevF64NEON(x *float32, n int, mean float64) float64\n")
			fmt.Fprintf(&out, "TEXT ·sqDevF64NEON(SB), NOSPLIT, $0-32\n")
		} else {
			fmt.Fprintf(&out, "\n// func sumF64NEON(x *float32, n int) float64\n")
			fmt.Fprintf(&out, "TEXT ·sumF64NEON(SB), NOSPLIT, $0-24\n")
		}
		p("MOVD x+0(FP), R0")
		p("MOVD n+8(FP), R1")
		if sq {
			p("FMOVD mean+16(FP), F20")
			p("VDUP V20.D[0], V20.D2")
		}
		for i := 0; i < 8; i++ {
			p("VEOR V%d.B16, V%d.B16, V%d.B16", i, i, i)
		}
		p("LSR $4, R1, R1")
		p("CBZ R1, done")
		label("loop")
		p("VLD1.P 64(R0), [V16.S4, V17.S4, V18.S4, V19.S4]")
		for i := 0; i < 4; i++ {
			op2("fcvtl", 8+2*i, 16+i)
			op2("fcvtl2", 9+2*i, 16+i)
		}
		for j := 0; j < 8; j++ {
			if sq {
				op3("fsub.2d", 8+j, 8+j, 20)
				op3("fmla.2d", j, 8+j, 8+j)
			} else {
				op3("fadd.2d", j, j, 8+j)
			}
		}
		p("SUBS $1, R1, R1")
		p("BNE loop")
		label("done")
		reduce()
		if sq {
			p("FMOVD F0, ret+24(FP)")
		} else {
			p("FMOVD F0, ret+16(FP)")
		}
		p("RET")
	}
}
