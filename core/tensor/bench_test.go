package tensor

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// benchShapes are the GR00T N1.7 GEMM shapes at real size (m, n, k) with
// y[m,n] = x[m,k]·Wᵀ, W [n,k].
//
// rotate is the number of distinct weights cycled through, one per op: the
// DiT shapes are weight-streaming bound, and in the model every layer has
// its own weight, so the benchmark must not let one 38 MB weight sit in L3.
var benchShapes = []struct {
	name    string
	m, n, k int
	rotate  int
}{
	{"vision_qkv_1792x1536x1024", 1792, 1024, 1536, 1},
	{"vision_mlp_up_1792x1024x4096", 1792, 4096, 1024, 1},
	{"vision_mlp_down_1792x4096x1024", 1792, 1024, 4096, 1},
	{"llm_512x2048x6144", 512, 6144, 2048, 1},
	{"dit_41x1536x6144", 41, 6144, 1536, 6},
	{"dit_41x6144x1536", 41, 1536, 6144, 6},
}

// benchWeights returns rotate random bf16-exact [n,k] weights (the model's
// weights are widened from a bf16 checkpoint).
func benchWeights(r *rand.Rand, n, k, rotate int) [][]float32 {
	ws := make([][]float32, rotate)
	for i := range ws {
		ws[i] = randSlice(r, n*k)
		roundBF16(ws[i])
	}
	return ws
}

// benchKernels lists the implementations to benchmark, by name: every
// variant but portable (set BENCH_PORTABLE=1 to include it).
func benchKernels() []struct {
	name string
	k    Kernels
} {
	out := []struct {
		name string
		k    Kernels
	}{}
	for _, v := range Variants() {
		// Portable runs ~7 GFLOP/s: seconds per op at these shapes.
		if v.Name == "portable" && os.Getenv("BENCH_PORTABLE") == "" && len(Variants()) > 1 {
			continue
		}
		out = append(out, struct {
			name string
			k    Kernels
		}{v.Name, v.Kernels})
	}
	return out
}

// BenchmarkMatMul reports GFLOP/s (2·m·n·k per op) for every implementation
// at the real shapes. Run briefly: go test -run=^$ -bench=MatMul -benchtime=5x ./core/tensor/
func BenchmarkMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range benchShapes {
		x := randSlice(r, s.m*s.k)
		wfs := benchWeights(r, s.n, s.k, s.rotate)
		bias := randSlice(r, s.n)
		y := make([]float32, s.m*s.n)
		for _, kv := range benchKernels() {
			b.Run(fmt.Sprintf("%s/%s", s.name, kv.name), func(b *testing.B) {
				ws := make([]Packed, len(wfs))
				for i, wf := range wfs {
					ws[i] = kv.k.PackLinear(wf, s.n, s.k)
				}
				kv.k.MatMul(y, x, s.m, ws[0], bias) // warm-up
				b.ReportAllocs()
				b.ResetTimer()
				c0 := benchcpu.Now()
				for i := 0; i < b.N; i++ {
					kv.k.MatMul(y, x, s.m, ws[i%len(ws)], bias)
				}
				cpu := benchcpu.Now() - c0
				flop := 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(b.N)
				b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				// Speed on dedicated cores: flops per (CPU time ÷ threads).
				b.ReportMetric(flop/(cpu.Seconds()/float64(defaultTeam().threads()))/1e9, "GFLOP/s-cpu")
			})
		}
	}
}

// BenchmarkMatMulSmall covers the action head's small products (m = 1
// timestep/state encoders, the 132-wide action decoder), where dispatch and
// packing overheads, not FLOPs, decide.
func BenchmarkMatMulSmall(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range []struct {
		name    string
		m, n, k int
	}{
		{"m1_1536x1536", 1, 1536, 1536},
		{"m40_132x1024", 40, 132, 1024},
		{"m40_1536x132", 40, 1536, 132},
	} {
		x := randSlice(r, s.m*s.k)
		wf := randSlice(r, s.n*s.k)
		y := make([]float32, s.m*s.n)
		for _, kv := range benchKernels() {
			b.Run(s.name+"/"+kv.name, func(b *testing.B) {
				w := kv.k.PackLinear(wf, s.n, s.k)
				kv.k.MatMul(y, x, s.m, w, nil)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					kv.k.MatMul(y, x, s.m, w, nil)
				}
				b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkPackA times packing the activations of the largest-k vision
// GEMM (1792×4096) into MR panels, one thread.
func BenchmarkPackA(b *testing.B) {
	bk, ok := Default().(*blockedKernels)
	if !ok {
		b.Skip("no SIMD kernels")
	}
	const m, k = 1792, 4096
	x := randSlice(rand.New(rand.NewPCG(3, 3)), m*k)
	st := &gemmState{bk: bk}
	st.plan(make([]float32, m), x, m, bk.newPacked(1, k), nil)
	b.SetBytes(m * k * 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for p := 0; p < st.mPanels; p++ {
			(*packPhase)(st).run(p, 0)
		}
	}
}
