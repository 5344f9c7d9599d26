package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// This file checks the vector elementwise kernels (the activations, SiLUMul
// and the softmax exp) at every vector level the CPU runs against float64
// oracles written with package math, over a dense sweep of float32 values
// and the edge values, and checks that AVX2 and AVX-512 agree bit for bit.

func kindName(k kernelKind) string {
	switch k {
	case kindAVX512:
		return "avx512"
	case kindAVX2:
		return "avx2"
	case kindNEON:
		return "neon"
	}
	return "scalar"
}

// vecEdges are the edge inputs of every sweep: zeros, tiny and subnormal
// values, the exp overflow (88.72) and underflow (−87.34 normal, −103.97
// zero) boundaries and their neighbours, the GELU-erf clamp (±16), large
// values, infinities and NaN.
func vecEdges() []float32 {
	e := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-38, -1e-38, 1e-30, -1e-30, 1e-7, -1e-7,
		0.5, -0.5, 1, -1, 3, -3, 5.5, -5.5, 9, -9, 10, -10, 14.4, -14.4, 16, -16, 20, -20, 44, -44,
		87.33654, -87.33654, 88.72283, -88.72283, 88.7229, 89, -89, 100, -100, 103.97, -103.97, 104, -104,
		150, -150, 200, -200, 201, -201, 1e4, -1e4, 1e30, -1e30, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	var out []float32
	for _, v := range e {
		out = append(out, v, math.Nextafter32(v, float32(math.Inf(1))), math.Nextafter32(v, float32(math.Inf(-1))))
	}
	return out
}

// vecSweep returns the edges, every stride-th float32 bit pattern of both
// signs over the whole range (NaN patterns skipped), and every
// denseStride-th one over [−dense, dense].
func vecSweep(stride, denseStride uint32, dense float32) []float32 {
	x := vecEdges()
	for b := uint32(0); b < 0x7f800000; b += stride {
		v := math.Float32frombits(b)
		x = append(x, v, -v)
	}
	for b := uint32(0); b <= math.Float32bits(dense); b += denseStride {
		v := math.Float32frombits(b)
		x = append(x, v, -v)
	}
	return x
}

// ulpErr returns |got − want| in units of the float32 spacing at want
// (2⁻¹⁴⁹ below the normal range), want the exact value: 0.5 is a correct
// rounding. A NaN or infinite want must be matched exactly (else +Inf);
// a finite want past the float32 range must give the infinity it rounds to.
func ulpErr(got float32, want float64) float64 {
	g := float64(got)
	switch {
	case math.IsNaN(want):
		if math.IsNaN(g) {
			return 0
		}
		return math.Inf(1)
	case math.IsNaN(g):
		return math.Inf(1)
	case math.IsInf(float64(float32(want)), 0) || math.IsInf(g, 0):
		if g == float64(float32(want)) {
			return 0
		}
		return math.Inf(1)
	}
	a := math.Abs(want)
	ulp := 0x1p-149
	if a >= 0x1p-126 {
		_, e := math.Frexp(a) // a = f·2^e, f ∈ [0.5, 1)
		ulp = math.Ldexp(1, e-24)
	}
	return math.Abs(g-want) / ulp
}

// Float64 oracles. The GELU ones are the stable forms of the same
// functions (x·σ(2u) and x·erfc(−x/√2)/2): GELUTanh's 0.5·x·(1 + tanh u)
// and GELUErf's 0.5·x·(1 + erf(x/√2)) cancel in float64 for x < −5.5 and
// x < −5.9, where the results are below 1e-11·|x| and 1e-8·|x|.
func oracleExp(v float64) float64  { return math.Exp(v) }
func oracleSiLU(v float64) float64 { return v / (1 + math.Exp(-v)) }
func oracleGELUTanh(v float64) float64 {
	u := 0.7978845608028654 * (v + 0.044715*v*v*v)
	return v / (1 + math.Exp(-2*u))
}
func oracleGELUErf(v float64) float64 { return 0.5 * v * math.Erfc(-v/math.Sqrt2) }

// expKind evaluates the softmax exp of level kind on x ≤ 0 (shift 0), through
// expShiftSumSIMD (padded to 16), or the scalar path's float32(math.Exp).
func expKind(kind kernelKind, x []float32) []float32 {
	n := (len(x) + 15) &^ 15
	y := make([]float32, n)
	copy(y, x)
	if _, ok := expShiftSumSIMD(kind, y, 0); !ok {
		for i, v := range y {
			y[i] = float32(math.Exp(float64(v)))
		}
	}
	return y[:len(x)]
}

// siluMulKind is SiLUMul at level kind with y = 1.
func siluMulKind(kind kernelKind, x []float32) []float32 {
	y := make([]float32, len(x))
	out := append([]float32(nil), x...)
	for i := range y {
		y[i] = 1
	}
	if !siluMulSIMD(kind, out, y) {
		for i, v := range out {
			out[i] = SiLU(v) * y[i]
		}
	}
	return out
}

// vecFunc is one kernel under test with its oracle and the contract's
// bounds: maxULP over every input whose exact result is at least floor·
// max(|x|, 1) in magnitude (or is zero, NaN or Inf), tailAbs·max(|x|, 1) in
// absolute error below it, and tighter bounds on bands of x.
type vecFunc struct {
	name    string
	eval    func(kind kernelKind, x []float32) []float32
	oracle  func(float64) float64
	maxULP  float64
	floor   float64
	tailAbs float64
	bands   []ulpBand
	// nonPositive restricts the inputs to x ≤ 0 and NaN (the softmax exp's
	// domain: x − max).
	nonPositive bool
}

// domain returns the inputs of x that f is specified for.
func (f vecFunc) domain(x []float32) []float32 {
	if !f.nonPositive {
		return x
	}
	var d []float32
	for _, v := range x {
		if !(v > 0) {
			d = append(d, v)
		}
	}
	return d
}

// ulpBand bounds the error to ulp for x in [lo, hi).
type ulpBand struct{ lo, hi, ulp float64 }

func vecFuncs() []vecFunc {
	act := func(a Activation) func(kernelKind, []float32) []float32 {
		return func(kind kernelKind, x []float32) []float32 {
			y := append([]float32(nil), x...)
			activateKind(kind, a, y)
			return y
		}
	}
	inf := math.Inf(1)
	// The bounds are Activate's contract (the maxima of a sweep of every
	// 3rd float32 in [−110, 110], rounded up).
	return []vecFunc{
		{name: "exp", eval: expKind, oracle: oracleExp, maxULP: 1.05, nonPositive: true},
		{name: "silu", eval: act(ActSiLU), oracle: oracleSiLU, maxULP: 3.3},
		{name: "silumul", eval: siluMulKind, oracle: oracleSiLU, maxULP: 3.3},
		{name: "gelu_tanh", eval: act(ActGELUTanh), oracle: oracleGELUTanh, maxULP: 32, floor: 1e-6, tailAbs: 2e-12,
			bands: []ulpBand{{0, inf, 2}, {-1, 0, 3.4}}},
		{name: "gelu_erf", eval: act(ActGELUErf), oracle: oracleGELUErf, maxULP: 7,
			bands: []ulpBand{{-1, 1, 3.1}}},
	}
}

// vecErrors evaluates f at level kind on x and returns the worst ulp error
// (and where) outside the tail, the worst tail error, and the worst error
// per band.
func vecErrors(f vecFunc, kind kernelKind, x []float32) (worst float64, worstX float32, tail float64, tailX float32, band []float64) {
	x = f.domain(x)
	got := f.eval(kind, x)
	band = make([]float64, len(f.bands))
	for i, v := range x {
		want := f.oracle(float64(v))
		mag := math.Max(math.Abs(float64(v)), 1)
		if f.floor > 0 && math.Abs(want) < f.floor*mag && want != 0 && !math.IsNaN(want) {
			if d := math.Abs(float64(got[i])-want) / mag; d > tail {
				tail, tailX = d, v
			}
			continue
		}
		e := ulpErr(got[i], want)
		if e > worst {
			worst, worstX = e, v
		}
		for b, bd := range f.bands {
			if float64(v) >= bd.lo && float64(v) < bd.hi {
				band[b] = math.Max(band[b], e)
			}
		}
	}
	return
}

// TestVecAccuracy is the accuracy contract of Activate and the softmax exp
// (see Activate's doc comment), at every vector level of this CPU and for
// the scalar references, over ~2.3M inputs per function.
func TestVecAccuracy(t *testing.T) {
	x := vecSweep(4099, 1021, 110)
	if testing.Short() || raceEnabled {
		x = vecSweep(65537, 1021, 110)
	}
	for _, f := range vecFuncs() {
		for _, kind := range vecKinds() {
			t.Run(f.name+"/"+kindName(kind), func(t *testing.T) {
				worst, worstX, tail, tailX, band := vecErrors(f, kind, x)
				t.Logf("%s %s: max %.2f ulp (at x=%g) over %d inputs; tail max |err|/max(|x|,1) %.2g (at x=%g)",
					f.name, kindName(kind), worst, worstX, len(x), tail, tailX)
				for b, bd := range f.bands {
					t.Logf("  x in [%g, %g): max %.2f ulp", bd.lo, bd.hi, band[b])
				}
				if kind == 0 { // the scalar references are measured, not gated here
					return
				}
				require.LessOrEqual(t, worst, f.maxULP, "%s %s at x=%g", f.name, kindName(kind), worstX)
				require.LessOrEqual(t, tail, f.tailAbs, "%s %s tail at x=%g", f.name, kindName(kind), tailX)
				for b, bd := range f.bands {
					require.LessOrEqual(t, band[b], bd.ulp, "%s %s in [%g, %g)", f.name, kindName(kind), bd.lo, bd.hi)
				}
			})
		}
	}
}

// TestVecKindsBitIdentical: the AVX2 and AVX-512 kernels return the same
// bits for every input (activations, SiLUMul, exp, and the softmax row sum
// with its 16-lane summation order). Skipped without both levels.
func TestVecKindsBitIdentical(t *testing.T) {
	if len(vecKinds()) < 3 {
		t.Skip("needs both AVX-512 and AVX2")
	}
	x := vecSweep(16411, 251, 110)
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
	}
	for _, f := range vecFuncs() {
		x := f.domain(x)
		a, b := f.eval(kindAVX512, x), f.eval(kindAVX2, x)
		for i := range x {
			if !same(a[i], b[i]) {
				t.Fatalf("%s(%g): avx512 %g (%#08x), avx2 %g (%#08x)", f.name, x[i], a[i], math.Float32bits(a[i]), b[i], math.Float32bits(b[i]))
			}
		}
	}
	r := rand.New(rand.NewPCG(41, 42))
	// Rows with masked keys (AVX2's general kernel), narrow rows (its
	// normal-range kernel, min − max ≥ −86), and rows spanning the
	// underflow range.
	for ri, n := range []int{16, 32, 48, 160, 480, 4096, 16, 448, 4096, 448, 4096} {
		row := make([]float32, n)
		for i := range row {
			switch {
			case ri < 6:
				row[i] = float32(r.NormFloat64() * 6)
				if i%7 == 3 {
					row[i] = float32(math.Inf(-1))
				}
			case ri < 9:
				row[i] = float32(r.NormFloat64() * 10)
			default:
				row[i] = float32(r.Float64()*130 - 120)
			}
		}
		ra, rb := append([]float32(nil), row...), append([]float32(nil), row...)
		sa, sb := softmaxRow(kindAVX512, ra), softmaxRow(kindAVX2, rb)
		require.Equal(t, math.Float32bits(sa), math.Float32bits(sb), "n=%d: 1/Σ", n)
		require.Equal(t, ra, rb, "n=%d", n)
	}
}

// TestSoftmaxRowKinds checks softmaxRow at every level against float64 for
// rows as attention produces them (masked −Inf keys, all-masked rows,
// lengths around the 16-lane step, a row of one visible key).
func TestSoftmaxRowKinds(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	neg := float32(math.Inf(-1))
	type tc struct {
		name string
		row  []float32
	}
	var cases []tc
	for _, n := range []int{1, 15, 16, 17, 32, 64, 469, 480} {
		row := make([]float32, n)
		for i := range row {
			row[i] = float32(r.NormFloat64() * 8)
			if i%5 == 1 {
				row[i] = neg
			}
		}
		cases = append(cases, tc{fmt.Sprintf("n%d", n), row})
	}
	cases = append(cases,
		tc{"all_masked", []float32{neg, neg, neg, neg, neg, neg, neg, neg, neg, neg, neg, neg, neg, neg, neg, neg}},
		tc{"one_visible", append([]float32{neg, neg, 3}, make16(neg, 13)...)},
		tc{"wide_range", []float32{100, -100, 50, -50, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		tc{"nan", append([]float32{1, 2, float32(math.NaN())}, make16(0, 29)...)},
		tc{"span_85", append([]float32{0, -85.9}, make16(-3, 30)...)},
		tc{"span_87", append([]float32{0, -86.1, -87.5, -95, -103.9, -104.5}, make16(-1, 26)...)},
	)
	for _, c := range cases {
		for _, kind := range vecKinds() {
			t.Run(c.name+"/"+kindName(kind), func(t *testing.T) {
				row := append([]float32(nil), c.row...)
				inv := softmaxRow(kind, row)
				if c.name == "nan" { // a NaN score poisons the row, as in torch
					require.True(t, math.IsNaN(float64(inv)), "1/Σ = %g", inv)
					return
				}
				mx := float32(math.Inf(-1))
				for _, v := range c.row {
					mx = max(mx, v)
				}
				if math.IsInf(float64(mx), -1) {
					require.Zero(t, inv)
					require.Equal(t, make([]float32, len(row)), row)
					return
				}
				var sum float64
				for i, v := range c.row {
					e := math.Exp(float64(v - mx)) // the kernels subtract in fp32
					sum += e
					require.LessOrEqual(t, ulpErr(row[i], e), 1.5, "exp(%g)", v-mx)
				}
				require.InDelta(t, 1/sum, float64(inv), 1e-6/sum)
			})
		}
	}
}

func make16(v float32, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// TestAVX2MatchesAVX512Bits: the "avx2" and "avx512" variants return the
// same bits for MatMul, every fused activation and Attention — the
// micro-kernels accumulate k in the same order under the same k blocking,
// and the elementwise kernels are bit-identical — so forcing AVX2
// (GODEBUG=cpu.avx512f=off) reproduces the AVX-512 numerics exactly. If a
// change makes the two levels block k differently, this test is the one to
// relax (to TestVariantsDifferential's tolerance). Skipped without both.
func TestAVX2MatchesAVX512Bits(t *testing.T) {
	k512, err1 := ByName("avx512")
	k2, err2 := ByName("avx2")
	if err1 != nil || err2 != nil {
		t.Skip("needs both AVX-512 and AVX2")
	}
	r := rand.New(rand.NewPCG(45, 46))
	for _, sc := range []shapeCase{{1, 70, 33}, {41, 129, 520}, {97, 300, 700}, {448, 64, 1152}} {
		x := randSlice(r, sc.m*sc.k)
		w := randSlice(r, sc.n*sc.k)
		bias := randSlice(r, sc.n)
		for _, act := range []Activation{ActNone, ActGELUTanh, ActGELUErf, ActSiLU} {
			ya, yb := make([]float32, sc.m*sc.n), make([]float32, sc.m*sc.n)
			MatMulAct(k512, ya, x, sc.m, k512.PackLinear(w, sc.n, sc.k), bias, act)
			MatMulAct(k2, yb, x, sc.m, k2.PackLinear(w, sc.n, sc.k), bias, act)
			require.Equal(t, ya, yb, "m=%d n=%d k=%d %s", sc.m, sc.n, sc.k, act)
		}
	}
	for _, c := range []struct{ nq, nk, heads, kv, hd int }{{41, 300, 4, 4, 48}, {97, 97, 4, 2, 64}, {448, 448, 2, 2, 64}} {
		qw, kw := c.heads*c.hd, c.kv*c.hd
		a := AttentionArgs{Q: randSlice(r, c.nq*qw), K: randSlice(r, c.nk*kw), V: randSlice(r, c.nk*kw),
			QStride: qw, KStride: kw, VStride: kw, OutStride: qw, NQ: c.nq, NK: c.nk,
			Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))), Causal: c.nq == c.nk}
		outs := [2][]float32{}
		for i, k := range []Kernels{k512, k2} {
			a.Out = make([]float32, c.nq*qw)
			at := Attention{impl: k}
			at.Run(&a)
			outs[i] = a.Out
		}
		require.Equal(t, outs[0], outs[1], "attention %+v", c)
	}
}

// BenchmarkElementwise times the elementwise kernels at every vector level
// of this CPU side by side ("scalar" is what AVX2 machines ran before the
// AVX2 kernels: float64 math.Exp/Tanh/Erf): each activation over a
// 1792×64 tile, and the softmax of 448-key rows (a vision-frame attention
// chunk, 48 rows) as Attention calls it.
func BenchmarkElementwise(b *testing.B) {
	r := rand.New(rand.NewPCG(47, 48))
	x := randSlice(r, 1792*64)
	for i := range x {
		x[i] *= 3
	}
	scores := make([]float32, 48*448)
	for i := range scores {
		scores[i] = float32(r.NormFloat64() * 4)
	}
	for _, kind := range vecKinds() {
		for _, act := range []Activation{ActGELUTanh, ActGELUErf, ActSiLU} {
			b.Run(fmt.Sprintf("%s/%s", act, kindName(kind)), func(b *testing.B) {
				y := make([]float32, len(x))
				for b.Loop() {
					copy(y, x)
					activateKind(kind, act, y)
				}
				b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
			})
		}
		b.Run("softmax448/"+kindName(kind), func(b *testing.B) {
			s := make([]float32, len(scores))
			for b.Loop() {
				copy(s, scores)
				for row := range 48 {
					softmaxRow(kind, s[row*448:(row+1)*448])
				}
			}
			b.ReportMetric(float64(len(s))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

// godebugOff reports whether GODEBUG turns the cpu feature name off (the
// last setting of cpu.<name> or cpu.all wins, as in golang.org/x/sys/cpu).
func godebugOff(name string) bool {
	off := false
	for _, f := range strings.Split(os.Getenv("GODEBUG"), ",") {
		switch f {
		case "cpu." + name + "=off", "cpu.all=off":
			off = true
		case "cpu." + name + "=on", "cpu.all=on":
			off = false
		}
	}
	return off
}

// TestISALevel logs the vector level and the kernels this process runs,
// and checks that the ISA switches take effect: GODEBUG=cpu.avx512f=off
// leaves no AVX-512 path (AVX2 where the CPU has it), and -tags purego (or
// a build off amd64) no SIMD path at all.
func TestISALevel(t *testing.T) {
	var names []string
	for _, v := range Variants() {
		names = append(names, v.Name)
	}
	t.Logf("elementwise level %s; kernels %v; default %s", kindName(vecKind), names, names[0])
	if !simdBuild {
		require.Equal(t, kernelKind(0), vecKind)
		require.Equal(t, []string{"portable"}, names)
		require.Equal(t, []kernelKind{0}, vecKinds())
	}
	if godebugOff("avx512f") {
		require.NotEqual(t, kindAVX512, vecKind)
		for _, n := range names {
			require.NotContains(t, n, "avx512")
		}
	}
	if runtime.GOARCH == "arm64" && godebugOff("asimd") {
		// GODEBUG=cpu.asimd=off: no NEON path on arm64.
		require.Equal(t, kernelKind(0), vecKind)
		require.Equal(t, []string{"portable"}, names)
	}
}
