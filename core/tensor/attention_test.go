package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// naiveAttention is the float64 reference of AttentionArgs.
func naiveAttention(a *AttentionArgs) []float64 {
	hd := a.HeadDim
	out := make([]float64, a.NQ*a.Heads*hd)
	for h := 0; h < a.Heads; h++ {
		g := h / (a.Heads / a.KVHeads)
		for i := 0; i < a.NQ; i++ {
			sc := make([]float64, a.NK)
			mx := math.Inf(-1)
			for j := 0; j < a.NK; j++ {
				if !a.visible(i, j) {
					sc[j] = math.Inf(-1)
					continue
				}
				var s float64
				for d := 0; d < hd; d++ {
					s += float64(a.Q[i*a.QStride+a.QOff+h*hd+d]) * float64(a.K[j*a.KStride+a.KOff+g*hd+d])
				}
				sc[j] = s * float64(a.Scale)
				mx = math.Max(mx, sc[j])
			}
			if math.IsInf(mx, -1) {
				continue
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for d := 0; d < hd; d++ {
				var o float64
				for j := range sc {
					o += sc[j] * float64(a.V[j*a.VStride+a.VOff+g*hd+d])
				}
				out[(i*a.Heads+h)*hd+d] = o / sum
			}
		}
	}
	return out
}

func TestAttentionAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	type tc struct {
		nq, nk, heads, kv, hd int
		causal, mask          bool
	}
	cases := []tc{
		{1, 1, 1, 1, 8, false, false},
		{41, 41, 4, 4, 48, false, false}, // DiT self-attention shape (fewer heads)
		{41, 300, 2, 2, 48, false, true}, // DiT cross-attention with key mask
		{97, 97, 4, 2, 64, true, false},  // causal GQA
		{50, 130, 2, 1, 128, true, true}, // causal, NK > NQ, Qwen head dim
		{7, 200, 3, 3, 72, false, false}, // head dim not a multiple of 16
		{130, 65, 2, 2, 33, false, true},
	}
	if !testing.Short() && !raceEnabled {
		cases = append(cases, tc{448, 448, 2, 2, 64, false, false}, tc{469, 469, 2, 1, 128, true, true})
	}
	for _, c := range cases {
		name := fmt.Sprintf("nq%d_nk%d_h%d_kv%d_hd%d_causal=%v_mask=%v", c.nq, c.nk, c.heads, c.kv, c.hd, c.causal, c.mask)
		t.Run(name, func(t *testing.T) {
			// Q/K/V packed in one qkv row like the vision tower, with an
			// extra column offset to exercise strides.
			qw, kw := c.heads*c.hd, c.kv*c.hd
			qs := 3 + qw
			ks := 2*kw + 5
			q := randSlice(r, c.nq*qs)
			kv := randSlice(r, c.nk*ks)
			for i := range kv {
				kv[i] *= 2 // spread the softmax
			}
			a := &AttentionArgs{
				Q: q, K: kv, V: kv, QStride: qs, KStride: ks, VStride: ks, QOff: 3, KOff: 0, VOff: kw + 5,
				NQ: c.nq, NK: c.nk, Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd,
				Scale: float32(1 / math.Sqrt(float64(c.hd))), Causal: c.causal,
			}
			if c.mask {
				a.KeyMask = make([]int32, c.nk)
				for j := range a.KeyMask {
					if r.IntN(3) != 0 || j == c.nk-1 {
						a.KeyMask[j] = 1
					}
				}
				if c.nk > 4 {
					a.KeyMask[c.nk-1] = 0 // some rows may see nothing under causal
				}
			}
			a.OutStride = qw + 2
			a.OutOff = 1
			a.Out = make([]float32, c.nq*a.OutStride)
			for i := range a.Out {
				a.Out[i] = float32(math.NaN())
			}
			want := naiveAttention(a)
			for _, v := range Variants() {
				var at Attention
				at.impl = v.Kernels
				for rep := 0; rep < 2; rep++ { // second run reuses the buffers
					at.Run(a)
					for i := 0; i < c.nq; i++ {
						for hd := 0; hd < qw; hd++ {
							g := float64(a.Out[i*a.OutStride+1+hd])
							w := want[i*qw+hd]
							if math.IsNaN(g) || math.Abs(g-w) > 2e-5*(1+math.Abs(w)) {
								t.Fatalf("%s: out[%d][%d] = %g, want %g", v.Name, i, hd, g, w)
							}
						}
					}
				}
				if c.nq > 1 && !raceEnabled { // sync.Pool drops items at random under -race
					allocs := testing.AllocsPerRun(3, func() { at.Run(a) })
					require.Zero(t, allocs, v.Name)
				}
			}
		})
	}
}

func TestAttentionRejectsBadArgs(t *testing.T) {
	var at Attention
	good := func() *AttentionArgs {
		return &AttentionArgs{Q: make([]float32, 16), K: make([]float32, 16), V: make([]float32, 16), Out: make([]float32, 16),
			QStride: 8, KStride: 8, VStride: 8, OutStride: 8, NQ: 2, NK: 2, Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 1}
	}
	at.Run(good())
	a := good()
	a.Heads = 3
	require.PanicsWithValue(t, "tensor: Attention: Heads=3 is not a multiple of KVHeads=2", func() { a.KVHeads = 2; at.Run(a) })
	a = good()
	a.Q = a.Q[:15]
	require.Panics(t, func() { at.Run(a) })
	a = good()
	a.KeyMask = []int32{1}
	require.Panics(t, func() { at.Run(a) })
}

// BenchmarkAttention times the vision tower's per-frame attention (448
// patches, 16 heads of 64) and the LLM's causal GQA over 469 tokens.
func BenchmarkAttention(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name                  string
		nq, nk, heads, kv, hd int
		causal                bool
	}{
		{"vision_frame_448x16x64", 448, 448, 16, 16, 64, false},
		{"llm_469_causal_16x8x128", 469, 469, 16, 8, 128, true},
		{"dit_cross_41x469_32x48", 41, 469, 32, 32, 48, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			qw, kw := c.heads*c.hd, c.kv*c.hd
			a := &AttentionArgs{Q: randSlice(r, c.nq*qw), K: randSlice(r, c.nk*kw), V: randSlice(r, c.nk*kw), Out: make([]float32, c.nq*qw),
				QStride: qw, KStride: kw, VStride: kw, OutStride: qw, NQ: c.nq, NK: c.nk, Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd,
				Scale: float32(1 / math.Sqrt(float64(c.hd))), Causal: c.causal}
			var at Attention
			at.Run(a)
			b.ReportAllocs()
			b.ResetTimer()
			c0 := benchcpu.Now()
			for i := 0; i < b.N; i++ {
				at.Run(a)
			}
			cpu := benchcpu.Now() - c0
			flop := 4 * float64(c.nq) * float64(c.nk) * float64(c.heads*c.hd) * float64(b.N)
			if c.causal {
				flop /= 2
			}
			b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flop/(cpu.Seconds()/float64(defaultTeam().threads()))/1e9, "GFLOP/s-cpu")
		})
	}
}

// TestInterleave checks the panel packing against its definition, for the
// unrolled six-row case, short blocks (zero rows) and other widths.
func TestInterleave(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ rows, w, n int }{{6, 6, 1}, {6, 6, 37}, {4, 6, 37}, {1, 6, 5}, {12, 12, 9}, {7, 12, 9}, {3, 8, 2}} {
		stride := c.n + 3
		src := randSlice(r, c.rows*stride)
		dst := randSlice(r, c.n*c.w)
		interleave(dst, src, stride, c.rows, c.w, c.n)
		for j := 0; j < c.n; j++ {
			for row := 0; row < c.w; row++ {
				want := float32(0)
				if row < c.rows {
					want = src[row*stride+j]
				}
				require.Equal(t, want, dst[j*c.w+row], "%+v: dst[%d][%d]", c, j, row)
			}
		}
	}
}
