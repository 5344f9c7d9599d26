package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveMatMul is the float64 triple-loop reference: y = x·Wᵀ + bias with
// W in [n, k] layout.
func naiveMatMul(x []float32, m, k int, w []float32, n int, bias []float32) []float64 {
	y := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			if bias != nil {
				s = float64(bias[j])
			}
			for p := 0; p < k; p++ {
				s += float64(x[i*k+p]) * float64(w[j*k+p])
			}
			y[i*n+j] = s
		}
	}
	return y
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.Float64()*2 - 1)
	}
	return s
}

// shapeCase is one (m, n, k) GEMM shape.
type shapeCase struct{ m, n, k int }

// testShapes covers ragged edges around every blocking parameter.
func testShapes(short bool) []shapeCase {
	s := []shapeCase{
		{1, 1, 1}, {1, 7, 3}, {2, 3, 5}, {3, 17, 9}, {4, 4, 4}, {5, 33, 31},
		{1, 1536, 97}, {1, 65, 1030}, {7, 129, 257}, {13, 31, 513},
		{41, 100, 77}, {41, 67, 1537}, {64, 64, 64}, {65, 63, 129},
		{17, 48, 33}, {31, 47, 100}, {33, 95, 161}, {97, 200, 300},
	}
	if !short {
		s = append(s, shapeCase{469, 259, 211}, shapeCase{129, 1031, 65}, shapeCase{41, 1543, 523})
	}
	return s
}

// roundBF16 rounds every value to the nearest bf16 (ties to even), in place.
func roundBF16(s []float32) {
	for i, v := range s {
		b := math.Float32bits(v)
		b += 0x7fff + (b>>16)&1
		s[i] = math.Float32frombits(b &^ 0xffff)
	}
}

func transposeKN(w []float32, n, k int) []float32 {
	t := make([]float32, k*n)
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			t[p*n+j] = w[j*k+p]
		}
	}
	return t
}

// naiveCase is one shape with its inputs, the float64 reference and the
// per-element magnitude Σ|x||w| that scales the tolerance.
type naiveCase struct {
	m, n, k     int
	bf16        bool
	x, w, bias  []float32
	want, wantB []float64 // without and with bias
	mag         []float64
}

func newNaiveCase(r *rand.Rand, sc shapeCase, bf16 bool) *naiveCase {
	m, n, k := sc.m, sc.n, sc.k
	c := &naiveCase{m: m, n: n, k: k, bf16: bf16, x: randSlice(r, m*k), w: randSlice(r, n*k), bias: randSlice(r, n)}
	if bf16 {
		roundBF16(c.w)
	}
	c.want = naiveMatMul(c.x, m, k, c.w, n, nil)
	c.wantB = naiveMatMul(c.x, m, k, c.w, n, c.bias)
	c.mag = make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += math.Abs(float64(c.x[i*k+p]) * float64(c.w[j*k+p]))
			}
			c.mag[i*n+j] = s
		}
	}
	return c
}

// check compares got with the reference: |got − want| ≤ rel·Σ|x||w| + 1e-6.
// fp32 accumulation in any order errs by at most ≈ k·eps·Σ|x||w|.
func (c *naiveCase) check(t *testing.T, name string, got []float32, withBias bool, rel float64) {
	t.Helper()
	want := c.want
	if withBias {
		want = c.wantB
	}
	for i, g := range got[:c.m*c.n] {
		tol := rel*c.mag[i] + 1e-6
		if d := math.Abs(float64(g) - want[i]); d > tol || math.IsNaN(float64(g)) {
			t.Fatalf("%s: y[%d,%d] = %g, want %g (|diff| %g > tol %g)", name, i/c.n, i%c.n, g, want[i], d, tol)
		}
	}
}

// TestVariantsAgainstNaive checks every implementation this CPU supports
// (Portable and Default included) against the float64 triple loop on shapes
// with ragged edges, with and without bias, via both packers; every other
// shape has bf16-exact weights, which the -bf16 variants store as bf16.
func TestVariantsAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for si, sc := range testShapes(testing.Short() || raceEnabled) {
		c := newNaiveCase(r, sc, si%2 == 1)
		for _, v := range Variants() {
			kern := v.Kernels
			name := fmt.Sprintf("%s/m%d_n%d_k%d_bf16=%v", v.Name, c.m, c.n, c.k, c.bf16)
			y := make([]float32, c.m*c.n)
			pl := kern.PackLinear(c.w, c.n, c.k)
			require.Equal(t, c.n, pl.N(), name)
			require.Equal(t, c.k, pl.K(), name)
			pk := kern.PackKN(transposeKN(c.w, c.n, c.k), c.k, c.n)
			require.Equal(t, c.n, pk.N(), name)
			require.Equal(t, c.k, pk.K(), name)
			for _, withBias := range []bool{false, true} {
				var b []float32
				if withBias {
					b = c.bias
				}
				for _, pw := range []Packed{pl, pk} {
					for i := range y {
						y[i] = float32(math.NaN()) // y must be fully overwritten
					}
					kern.MatMul(y, c.x, c.m, pw, b)
					c.check(t, fmt.Sprintf("%s bias=%v", name, withBias), y, withBias, 1e-6)
				}
			}
		}
	}
}

func TestMatMulZeroRows(t *testing.T) {
	for _, kern := range []Kernels{Portable(), Default()} {
		w := kern.PackLinear(make([]float32, 6), 2, 3)
		kern.MatMul(nil, nil, 0, w, nil) // must not panic or touch memory
	}
}

func TestMatMulPanicsOnShortSlices(t *testing.T) {
	kern := Portable()
	w := kern.PackLinear(make([]float32, 6), 2, 3)
	require.Panics(t, func() { kern.MatMul(make([]float32, 4), make([]float32, 5), 2, w, nil) })
	require.Panics(t, func() { kern.MatMul(make([]float32, 3), make([]float32, 6), 2, w, nil) })
	require.Panics(t, func() { kern.MatMul(make([]float32, 4), make([]float32, 6), 2, w, []float32{1}) })
	require.Panics(t, func() { kern.PackLinear(make([]float32, 5), 2, 3) })
	require.Panics(t, func() { kern.PackKN(make([]float32, 5), 3, 2) })
}

// TestMatMulConcurrent runs independent MatMuls from several goroutines on
// the shared worker team, for every variant (run with -race): results must
// equal the serial ones bit for bit.
func TestMatMulConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 9, 70, 45
	x := randSlice(r, m*k)
	wf := randSlice(r, n*k)
	roundBF16(wf)
	iters := 30
	if testing.Short() {
		iters = 8
	}
	for _, v := range Variants() {
		kern := v.Kernels
		w := kern.PackLinear(wf, n, k)
		want := make([]float32, m*n)
		MatMulAct(kern, want, x, m, w, nil, ActGELUTanh)
		done := make(chan []float32, 4)
		for g := 0; g < 4; g++ {
			go func() {
				y := make([]float32, m*n)
				for it := 0; it < iters; it++ {
					MatMulAct(kern, y, x, m, w, nil, ActGELUTanh)
				}
				done <- y
			}()
		}
		for g := 0; g < 4; g++ {
			require.Equal(t, want, <-done, v.Name)
		}
	}
}

func TestMatMulNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, sc := range []shapeCase{{41, 300, 200}, {250, 130, 70}} {
		x := randSlice(r, sc.m*sc.k)
		wf := randSlice(r, sc.n*sc.k)
		roundBF16(wf)
		y := make([]float32, sc.m*sc.n)
		for _, v := range Variants() {
			w := v.Kernels.PackLinear(wf, sc.n, sc.k)
			MatMulAct(v.Kernels, y, x, sc.m, w, nil, ActGELUTanh)
			allocs := testing.AllocsPerRun(10, func() { MatMulAct(v.Kernels, y, x, sc.m, w, nil, ActGELUTanh) })
			require.Zero(t, allocs, "%s allocated in steady state at %v", v.Name, sc)
		}
	}
}
