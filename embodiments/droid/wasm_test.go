package main

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// openWasm builds this package for wasip1 and loads it through the
// production host with the caseA checkpoint.
func openWasm(tb testing.TB, opts ...plugins.Option) *plugins.Plugin {
	tb.Helper()
	ck, err := plugins.ReadCheckpoint(goldenDir)
	require.NoError(tb, err)
	return plugintest.MustOpen(tb, plugintest.Guest{Dir: "."}, append([]plugins.Option{plugins.WithCheckpoint(ck)}, opts...)...)
}

func (c *caseA) preInput() *plugins.PreInput {
	in := &plugins.PreInput{Embodiment: Tag, Instruction: "Put the blue block in the green bowl"}
	for _, g := range groups {
		in.State = append(in.State, plugins.StateGroup{Key: g.key, Values: c.state[g.key]})
	}
	for _, cam := range cameras {
		in.Cameras = append(in.Cameras, plugins.Camera{Key: cam, Frames: 2, Height: 180, Width: 320})
	}
	return in
}

func (c *caseA) postWasmInput() *plugins.PostInput {
	in := &plugins.PostInput{Embodiment: Tag, ActionPred: c.actionPred, Horizon: 40, Dim: 132}
	for _, g := range groups {
		in.State = append(in.State, plugins.StateGroup{Key: g.key, Steps: 1, Values: c.state[g.key]})
	}
	return in
}

// TestGoldenWasm runs the real droid.wasm through the host on caseA.
func TestGoldenWasm(t *testing.T) {
	c := loadCaseA(t)
	p := openWasm(t)
	ctx := context.Background()

	d := p.Describe()
	require.Equal(t, Tag, d.Embodiment)
	require.Equal(t, 24, d.ProjectorSlot)
	hz, ok := p.ControlHz() // the packed manifest's control_hz, through the host
	require.True(t, ok)
	require.Equal(t, 15.0, hz)
	require.Equal(t, 132, d.MaxStateDim)

	pre, err := p.Pre(ctx, c.preInput())
	require.NoError(t, err)
	require.Len(t, pre.State, 132)
	for i := range pre.State {
		require.Equal(t, float32(c.wantState[i]), pre.State[i], "state[%d]", i)
	}
	post, err := p.Post(ctx, c.postWasmInput())
	require.NoError(t, err)
	require.Len(t, post.Actions, 3)
	for _, g := range post.Actions {
		want := c.want[g.Key]
		require.Len(t, g.Values, len(want), g.Key)
		maxd := 0.0
		for i := range want {
			maxd = math.Max(maxd, math.Abs(float64(g.Values[i])-want[i]))
		}
		t.Logf("wasm %s: max |got-want| = %.3g", g.Key, maxd)
		require.LessOrEqual(t, maxd, 1e-5, g.Key)
	}
}

// TestIntoReusesOutputs: PreInto/PostInto give Pre/Post's results, reuse
// the caller's storage and allocate nothing on the host side once warm.
func TestIntoReusesOutputs(t *testing.T) {
	c := loadCaseA(t)
	p := openWasm(t)
	ctx := context.Background()
	pre, post := c.preInput(), c.postWasmInput()
	wantPre, err := p.Pre(ctx, pre)
	require.NoError(t, err)
	wantPost, err := p.Post(ctx, post)
	require.NoError(t, err)
	var po plugins.PreOutput
	var qo plugins.PostOutput
	for range 3 {
		require.NoError(t, p.PreInto(ctx, pre, &po))
		require.NoError(t, p.PostInto(ctx, post, &qo))
		require.Equal(t, wantPre.State, po.State)
		require.Equal(t, wantPost.Actions, qo.Actions)
	}
	allocs := testing.AllocsPerRun(20, func() {
		_ = p.PreInto(ctx, pre, &po)
		_ = p.PostInto(ctx, post, &qo)
	})
	t.Logf("host allocations per request with PreInto/PostInto: %v", allocs)
	if !raceEnabled {
		require.LessOrEqual(t, allocs, 1.0)
	}
}
