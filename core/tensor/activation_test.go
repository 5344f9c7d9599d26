package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// actClose bounds the SIMD activations against the float64 scalar
// reference evaluated at x: ≤ 8 ulp relative, plus an absolute 1e-7·|x| for
// the negative tails, where the reference's 0.5·x·(1+tanh) itself cancels
// to zero (torch's fp32 GELU has the same cancellation).
func actClose(got, want, x float32) bool {
	if math.IsNaN(float64(want)) {
		return math.IsNaN(float64(got))
	}
	if math.IsInf(float64(want), 0) {
		return got == want
	}
	d := math.Abs(float64(got) - float64(want))
	return d <= 1e-6*math.Abs(float64(want))+1e-7*math.Abs(float64(x))
}

func TestActivateMatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1e-7, -1e-7, 0.5, -0.5, 1, -1,
		3, -3, 5.5, -5.5, 9, -9, 10, -10, 20, -20, 44, -44, 87, -87, 88, -88, 89, -89, 100, -100, 1e4, -1e4,
		1e30, -1e30, float32(math.Inf(1))}
	for _, act := range []Activation{ActGELUTanh, ActGELUErf, ActSiLU} {
		t.Run(act.String(), func(t *testing.T) {
			x := make([]float32, 0, 4096+len(special)+7)
			x = append(x, special...)
			for len(x) < cap(x) {
				// Mostly the range activations see, some far tails.
				v := float32(r.NormFloat64() * 3)
				if len(x)%17 == 0 {
					v = float32(r.NormFloat64() * 40)
				}
				x = append(x, v)
			}
			got := append([]float32(nil), x...)
			Activate(act, got)
			worst := 0.0
			for i, v := range x {
				w := []float32{v}
				activateGo(act, w)
				want := w[0]
				if !actClose(got[i], want, v) {
					t.Fatalf("%s(%g) = %g, want %g", act, v, got[i], want)
				}
				if want != 0 && math.Abs(float64(v)) < 5 {
					worst = max(worst, math.Abs(float64(got[i])-float64(want))/math.Abs(float64(want)))
				}
			}
			t.Logf("%s: worst relative error for |x| < 5: %.3g (%.1f ulp) over %d values", act, worst, worst/0x1p-24, len(x))
		})
	}
}

func TestActivateNaN(t *testing.T) {
	for _, act := range []Activation{ActGELUTanh, ActGELUErf, ActSiLU} {
		x := make([]float32, 32)
		x[3] = float32(math.NaN())
		x[20] = float32(math.NaN())
		Activate(act, x)
		require.True(t, math.IsNaN(float64(x[3])) && math.IsNaN(float64(x[20])), act.String())
		require.Zero(t, x[0])
	}
}

// TestMatMulActFused checks the fused epilogue of every implementation
// against MatMul followed by the scalar activation, including edge tiles
// and both weight storages.
func TestMatMulActFused(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	shapes := []shapeCase{{1, 70, 33}, {7, 64, 300}, {41, 129, 520}, {13, 200, 17}}
	for _, v := range Variants() {
		for _, act := range []Activation{ActNone, ActGELUTanh, ActGELUErf, ActSiLU} {
			for si, sc := range shapes {
				m, n, k := sc.m, sc.n, sc.k
				name := fmt.Sprintf("%s/%s/m%d_n%d_k%d", v.Name, act, m, n, k)
				x := randSlice(r, m*k)
				wf := randSlice(r, n*k)
				if si%2 == 0 {
					roundBF16(wf)
				}
				bias := randSlice(r, n)
				w := v.Kernels.PackLinear(wf, n, k)
				pre := make([]float32, m*n)
				v.Kernels.MatMul(pre, x, m, w, bias)
				want := append([]float32(nil), pre...)
				activateGo(act, want)
				got := make([]float32, m*n)
				MatMulAct(v.Kernels, got, x, m, w, bias, act)
				for i := range got {
					if !actClose(got[i], want[i], pre[i]) {
						t.Fatalf("%s: y[%d] = %g, want %g", name, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestActivationString(t *testing.T) {
	for a, want := range map[Activation]string{ActNone: "none", ActGELUTanh: "gelu_tanh", ActGELUErf: "gelu_erf", ActSiLU: "silu", 9: "Activation(9)", -1: "Activation(-1)"} {
		require.Equal(t, want, a.String())
	}
	require.Panics(t, func() { Activate(Activation(9), make([]float32, 3)) })
}

func BenchmarkActivate(b *testing.B) {
	x := randSlice(rand.New(rand.NewPCG(1, 1)), 1792*64)
	for _, act := range []Activation{ActGELUTanh, ActSiLU, ActGELUErf} {
		b.Run(act.String(), func(b *testing.B) {
			b.ReportAllocs()
			y := make([]float32, len(x))
			for i := 0; i < b.N; i++ {
				copy(y, x)
				Activate(act, y)
			}
			b.ReportMetric(float64(len(x)*b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

// TestSiLUMul checks SiLUMul against Activate(ActSiLU) times y, bit for bit
// (same SIMD SiLU, then one rounding of the product), for lengths around
// the 16-lane tail.
func TestSiLUMul(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, n := range []int{0, 1, 15, 16, 17, 100, 6144} {
		x := randSlice(r, n)
		y := randSlice(r, n+3)
		for i := range x {
			x[i] *= 8
		}
		want := make([]float32, n)
		copy(want, x)
		Activate(ActSiLU, want)
		for i := range want {
			want[i] *= y[i]
		}
		SiLUMul(x, y)
		require.Equal(t, want, x, "n=%d", n)
	}
	require.Panics(t, func() { SiLUMul(make([]float32, 3), make([]float32, 2)) })
}
