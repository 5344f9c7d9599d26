package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPackBF16MatchesWidened checks that packing bf16 bits directly gives
// the same products as widening and packing fp32, for every variant and
// both layouts, including a Kernels without BF16Packer.
func TestPackBF16MatchesWidened(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	// The second shape packs on the worker team (n·k ≥ packParallelMin),
	// with a ragged last panel at every NR.
	for _, sh := range [][3]int{{13, 150, 77}, {7, 1030, 70}} {
		m, n, k := sh[0], sh[1], sh[2]
		wf := randSlice(r, n*k)
		roundBF16(wf)
		wh := make([]uint16, n*k)
		for i, v := range wf {
			wh[i] = uint16(math.Float32bits(v) >> 16)
		}
		wfKN := transposeKN(wf, n, k)
		whKN := make([]uint16, n*k)
		for i, v := range wfKN {
			whKN[i] = uint16(math.Float32bits(v) >> 16)
		}
		x := randSlice(r, m*k)
		kinds := []Kernels{plainKernels{Portable()}}
		for _, v := range Variants() {
			kinds = append(kinds, v.Kernels)
		}
		for _, kern := range kinds {
			want := make([]float32, m*n)
			kern.MatMul(want, x, m, kern.PackLinear(wf, n, k), nil)
			for _, w := range []Packed{PackLinearBF16(kern, wh, n, k), PackKNBF16(kern, whKN, k, n), kern.PackKN(wfKN, k, n)} {
				got := make([]float32, m*n)
				kern.MatMul(got, x, m, w, nil)
				require.Equal(t, want, got, "%T %v", kern, sh)
			}
		}
		require.Panics(t, func() { Portable().(BF16Packer).PackLinearBF16(wh[:10], n, k) })
	}
}

// plainKernels hides the optional interfaces of the Kernels it wraps.
type plainKernels struct{ Kernels }

// TestMatMulActUnfusedFallback runs MatMulAct on a Kernels without
// FusedMatMul: MatMul, then Activate over y[:m·n] only.
func TestMatMulActUnfusedFallback(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	const m, n, k = 5, 40, 30
	kern := Default()
	x := randSlice(r, m*k)
	w := kern.PackLinear(randSlice(r, n*k), n, k)
	want := make([]float32, m*n)
	MatMulAct(kern, want, x, m, w, nil, ActSiLU)
	got := make([]float32, m*n+3)
	got[m*n] = -1
	MatMulAct(plainKernels{kern}, got, x, m, w, nil, ActSiLU)
	require.Equal(t, want, got[:m*n])
	require.Equal(t, float32(-1), got[m*n], "wrote past m·n")
}

// TestPackPanelsLayout holds packPanels (blocked, on the team above
// packParallelMin values) to the panel layout written naively, for shapes
// with a ragged last panel and a ragged last column block.
func TestPackPanelsLayout(t *testing.T) {
	for _, sh := range [][3]int{{150, 77, 64}, {301, 333, 64}, {37, 2000, 8}, {1, 130, 16}} {
		n, k, nr := sh[0], sh[1], sh[2]
		src := make([]uint16, n*k)
		for i := range src {
			src[i] = uint16(i*7 + 3)
		}
		panels := (n + nr - 1) / nr
		want := make([]uint16, panels*k*nr)
		for j := range n {
			for p := range k {
				want[(j/nr)*k*nr+p*nr+j%nr] = src[j*k+p]
			}
		}
		got := make([]uint16, len(want))
		packPanels(got, src, n, k, nr)
		require.Equal(t, want, got, "n=%d k=%d nr=%d (parallel %v)", n, k, nr, n*k >= packParallelMin)
	}
}

// TestPackPanelsBF16 checks packPanels on bf16 bits (the four-row
// transpose and its scalar edges) against the definition, for row counts
// and column counts on and off multiples of 4 and of packKB.
func TestPackPanelsBF16(t *testing.T) {
	for _, nr := range []int{8, 16, 64} {
		for _, c := range []struct{ n, k int }{{1, 1}, {3, 5}, {4, 4}, {7, 9}, {64, 64}, {67, 130}, {130, 67}} {
			src := make([]uint16, c.n*c.k)
			for i := range src {
				src[i] = uint16(i*7919 + 1)
			}
			panels := (c.n + nr - 1) / nr
			dst := make([]uint16, panels*c.k*nr)
			packPanels(dst, src, c.n, c.k, nr)
			for j := 0; j < panels*nr; j++ {
				for p := 0; p < c.k; p++ {
					want := uint16(0)
					if j < c.n {
						want = src[j*c.k+p]
					}
					if got := dst[((j/nr)*c.k+p)*nr+j%nr]; got != want {
						t.Fatalf("nr %d n %d k %d: row %d col %d = %d, want %d", nr, c.n, c.k, j, p, got, want)
					}
				}
			}
		}
	}
}
