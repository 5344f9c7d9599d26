package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVariantsDifferential compares every SIMD implementation with Portable
// on random shapes with ragged edges around MR, NR, KC and the item split.
// Summation order differs, so the tolerance is relative: 1e-5·√k-ish scaled
// by Σ|x||w| (see checkDiff).
func TestVariantsDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	iters, maxM, maxN, maxK := 60, 200, 300, 700
	if testing.Short() || raceEnabled {
		iters, maxM, maxN, maxK = 16, 50, 150, 300
	}
	ref := Portable()
	for _, v := range Variants() {
		if v.Name == "portable" {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			for it := 0; it < iters; it++ {
				m := 1 + r.IntN(maxM)
				n := 1 + r.IntN(maxN)
				k := 1 + r.IntN(maxK)
				if it%5 == 0 {
					m = 1 + r.IntN(8)
				}
				x := randSlice(r, m*k)
				wf := randSlice(r, n*k)
				bf16 := it%4 >= 2
				if bf16 {
					roundBF16(wf)
				}
				var bias []float32
				if it%2 == 1 {
					bias = randSlice(r, n)
				}
				want := make([]float32, m*n)
				ref.MatMul(want, x, m, ref.PackLinear(wf, n, k), bias)
				got := make([]float32, m*n)
				for i := range got {
					got[i] = float32(math.NaN())
				}
				var pw Packed
				if it%3 == 2 {
					pw = v.Kernels.PackKN(transposeKN(wf, n, k), k, n)
				} else {
					pw = v.Kernels.PackLinear(wf, n, k)
				}
				if bp, ok := pw.(*blockedPacked); ok {
					require.Equal(t, bf16 && bp.owner.bf16w, bp.h != nil, "bf16 storage")
				}
				v.Kernels.MatMul(got, x, m, pw, bias)
				checkDiff(t, fmt.Sprintf("m=%d n=%d k=%d bias=%v", m, n, k, bias != nil), got, want, x, wf, m, n, k)
			}
		})
	}
}

// checkDiff allows |got-want| ≤ 1e-5·Σ|x||w| + 1e-6 per element: both sides
// accumulate in fp32 with error ≲ k·eps·Σ|x||w| in the worst case and
// ≲ √k·eps typically; 1e-5 is ~80 eps.
func checkDiff(t *testing.T, name string, got, want, x, w []float32, m, n, k int) {
	t.Helper()
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var mag float64
			for p := 0; p < k; p++ {
				mag += math.Abs(float64(x[i*k+p]) * float64(w[j*k+p]))
			}
			tol := 1e-5*mag + 1e-6
			g, wv := float64(got[i*n+j]), float64(want[i*n+j])
			if math.IsNaN(g) || math.Abs(g-wv) > tol {
				t.Fatalf("%s: y[%d,%d] = %g, portable %g, tol %g", name, i, j, g, wv, tol)
			}
		}
	}
}

// TestMatMulAcceptsSiblingPacked runs a weight packed by the bf16 variant
// through the fp32 one (same micro-kernel): allowed, same result.
func TestMatMulAcceptsSiblingPacked(t *testing.T) {
	a, b := Default(), DefaultBF16Weights()
	if a == b {
		t.Skip("no bf16 variant")
	}
	r := rand.New(rand.NewPCG(61, 62))
	const m, n, k = 20, 100, 90
	x := randSlice(r, m*k)
	wf := randSlice(r, n*k)
	roundBF16(wf)
	want := make([]float32, m*n)
	got := make([]float32, m*n)
	a.MatMul(want, x, m, a.PackLinear(wf, n, k), nil)
	a.MatMul(got, x, m, b.PackLinear(wf, n, k), nil)
	require.Equal(t, want, got)
}

func TestMatMulRejectsForeignPacked(t *testing.T) {
	vs := Variants()
	if len(vs) < 2 {
		t.Skip("only one implementation on this CPU")
	}
	w := vs[len(vs)-1].Kernels.PackLinear(make([]float32, 4), 2, 2)
	require.Panics(t, func() { vs[0].Kernels.MatMul(make([]float32, 2), make([]float32, 2), 1, w, nil) })
	w0 := vs[0].Kernels.PackLinear(make([]float32, 4), 2, 2)
	require.PanicsWithValue(t, "tensor: MatMul: weight packed by "+vs[0].Name+", not usable by portable",
		func() { Portable().MatMul(make([]float32, 2), make([]float32, 2), 1, w0, nil) })
}

func TestByName(t *testing.T) {
	k, err := ByName("")
	require.NoError(t, err)
	require.Equal(t, Default(), k)
	k, err = ByName("portable")
	require.NoError(t, err)
	require.Equal(t, Portable(), k)
	for _, v := range Variants() {
		k, err := ByName(v.Name)
		require.NoError(t, err)
		require.Equal(t, v.Kernels, k)
	}
	_, err = ByName("nope")
	require.ErrorIs(t, err, ErrUnknownKernels)
	require.ErrorContains(t, err, "kernels[nope]")
	require.Equal(t, Variants()[0].Kernels, Default())
}

// TestBF16WeightsStorage checks that DefaultBF16Weights keeps bf16-exact
// weights in bf16 and everything else in fp32 (where it has a bf16 path).
func TestBF16WeightsStorage(t *testing.T) {
	k := DefaultBF16Weights()
	bk, ok := k.(*blockedKernels)
	if !ok {
		t.Skip("no SIMD bf16-weight path on this CPU")
	}
	require.True(t, bk.bf16w)
	w := randSlice(rand.New(rand.NewPCG(9, 9)), 70*33)
	require.Nil(t, k.PackLinear(w, 70, 33).(*blockedPacked).h)
	roundBF16(w)
	require.NotNil(t, k.PackLinear(w, 70, 33).(*blockedPacked).h)
	require.NotNil(t, k.PackKN(w, 33, 70).(*blockedPacked).h)
}

// TestBF16StorageBitIdentical checks that bf16 weight storage changes
// nothing but the bytes: with bf16-exact weights, every bf16 variant's
// result is bit-identical to its fp32 sibling's (same kernel, same blocking,
// same fp32 products in the same order).
func TestBF16StorageBitIdentical(t *testing.T) {
	byName := map[string]Kernels{}
	for _, v := range Variants() {
		byName[v.Name] = v.Kernels
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, pair := range [][2]string{{"avx512", "avx512-bf16"}, {"avx2", "avx2-bf16"}} {
		ref, ok1 := byName[pair[0]]
		bf, ok2 := byName[pair[1]]
		if !ok1 || !ok2 {
			continue
		}
		// m = 41 and 7 widen inside the kernel, m = 100 and 250 once per panel.
		for _, sc := range []shapeCase{{41, 200, 700}, {7, 64, 1030}, {100, 130, 300}, {250, 70, 260}} {
			x := randSlice(r, sc.m*sc.k)
			w := randSlice(r, sc.n*sc.k)
			roundBF16(w)
			bias := randSlice(r, sc.n)
			want := make([]float32, sc.m*sc.n)
			got := make([]float32, sc.m*sc.n)
			ref.MatMul(want, x, sc.m, ref.PackLinear(w, sc.n, sc.k), bias)
			bf.MatMul(got, x, sc.m, bf.PackLinear(w, sc.n, sc.k), bias)
			require.Equal(t, want, got, "%s vs %s at %v", pair[0], pair[1], sc)
		}
	}
}
