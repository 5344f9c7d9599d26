package main

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// TestReencode: LIBERO's groups are all absolute, so re-encoding is an
// identity up to clipping — row i of the result is the previous chunk's
// row shift+i with the 7 action columns clipped to [−1, 1] and the padded
// columns as they were — and it decodes to the same physical actions
// (issue 27 point 5's property, here exact). libero.wasm through the host
// matches the native plugin bit for bit.
func TestReencode(t *testing.T) {
	p := plugintest.MustOpen(t, plugintest.Guest{Dir: "."}, plugins.WithCheckpoint(checkpoint(t)))
	require.True(t, p.CanReencode())
	l := native(t)
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	state := func() (pg []plugins.StateGroup, sg []pdk.StateInput) {
		for _, g := range Describe().State {
			v := make([]float64, g.Dim)
			for i := range v {
				v[i] = rng.NormFloat64()
			}
			pg = append(pg, plugins.StateGroup{Key: g.Key, Values: v})
			sg = append(sg, pdk.StateInput{Key: g.Key, Dim: g.Dim, Values: v})
		}
		return pg, sg
	}
	for _, shift := range []int{0, 1, 7, 15} {
		pred := make([]float32, 40*132)
		for i := range pred {
			pred[i] = float32(1.5 * rng.NormFloat64()) // many beyond [−1, 1]
		}
		prevG, prevS := state()
		curG, curS := state()
		got, err := p.Reencode(ctx, &plugins.ReencodeInput{ActionPred: pred, Rows: 40, Dim: 132, Shift: shift, PrevState: prevG, State: curG})
		require.NoError(t, err)
		want, err := l.Reencode(&pdk.ReencodeInput{StateDType: "float32", ActionPred: pred, Horizon: 40, Dim: 132, Shift: shift, PrevState: prevS, State: curS})
		require.NoError(t, err)
		require.Equal(t, want, got.ActionPred, "wasm and native, shift %d", shift)
		n := Horizon - shift
		require.Equal(t, n, got.Rows)
		for i := 0; i < n; i++ {
			k := shift + i
			for j := 0; j < 132; j++ {
				w := pred[k*132+j]
				if j < 7 {
					w = max(-1, min(1, w))
				}
				require.Equal(t, w, got.ActionPred[i*132+j], "shift %d row %d col %d", shift, i, j)
			}
		}
		// Decoded against any state, the re-encoded rows are the previous rows' actions.
		old, err := l.Post(&pdk.PostInput{ActionPred: pred, Horizon: 40, Dim: 132})
		require.NoError(t, err)
		oldVals := make([][]float32, len(old.Groups))
		for i, g := range old.Groups {
			oldVals[i] = append([]float32(nil), g.Values...)
		}
		pad := make([]float32, 40*132)
		copy(pad, got.ActionPred)
		now, err := l.Post(&pdk.PostInput{ActionPred: pad, Horizon: 40, Dim: 132})
		require.NoError(t, err)
		for gi, g := range now.Groups {
			assert.Equal(t, oldVals[gi][shift:], g.Values[:n], "group %s, shift %d", g.Key, shift)
		}
	}
}
