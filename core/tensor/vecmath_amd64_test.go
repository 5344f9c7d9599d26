//go:build amd64 && !purego

package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpShiftSumNormalAVX2 checks AVX2's normal-range softmax kernel
// against its general one, bit for bit (every exp and the sum), over every
// 61st float32 in [−86, 0] and the boundary values, in rows of 4096.
func TestExpShiftSumNormalAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	x := []float32{0, float32(math.Copysign(0, -1)), -1e-45, -1e-30, -86, math.Nextafter32(-86, 0), -85.99}
	step := uint32(61)
	if testing.Short() || raceEnabled {
		step = 997
	}
	for b := uint32(0); b <= math.Float32bits(86); b += step {
		x = append(x, -math.Float32frombits(b))
	}
	for len(x)%4096 != 0 {
		x = append(x, -1)
	}
	for i := 0; i < len(x); i += 4096 {
		row := x[i : i+4096]
		a, b := append([]float32(nil), row...), append([]float32(nil), row...)
		sa := expShiftSumAVX2(&a[0], len(a), 0)
		sb := expShiftSumNormalAVX2(&b[0], len(b), 0)
		require.Equal(t, math.Float32bits(sa), math.Float32bits(sb), "sum of row at %d", i)
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("exp(%g): general %g, normal %g", row[j], a[j], b[j])
			}
		}
	}
	mx, mn := rowMaxMinAVX2(&x[0], len(x))
	require.Equal(t, rowMaxAVX2(&x[0], len(x)), mx)
	require.Equal(t, float32(-86), mn)
}

// TestKernelRowsMatchesPacked checks the in-place-A kernels against the
// packed ones at every vector level: A read from six rows of stride lda
// must give the bits of A interleaved into a panel, for k below, at and
// past the four-step unroll.
func TestKernelRowsMatchesPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for _, kind := range vecKinds() {
		if kind == 0 {
			continue
		}
		nr := 16
		if kind == kindAVX512 {
			nr = 64
		}
		for _, kc := range []int{1, 3, 4, 5, 8, 17, 448} {
			lda := kc + 13
			a := randSlice(r, 6*lda)
			b := randSlice(r, kc*nr)
			ldc := nr + 5
			want, got := make([]float32, 6*ldc), make([]float32, 6*ldc)
			pa := make([]float32, 6*kc)
			interleave(pa, a, lda, 6, 6, kc)
			callKernel(kind, &pa[0], &b[0], &want[0], ldc, kc, 0, nil)
			callKernelRows(kind, &a[0], lda, &b[0], &got[0], ldc, kc)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("kind %d kc %d: c[%d] = %g in place, %g packed", kind, kc, i, got[i], want[i])
				}
			}
		}
	}
}
