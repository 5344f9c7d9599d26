package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// testdata/statistics.json is synthetic (see testdata/README.md).
func checkpoint(t testing.TB) plugins.Checkpoint {
	ck, err := plugins.ReadCheckpoint("testdata")
	require.NoError(t, err)
	return ck
}

func native(t testing.TB) *pdk.Table {
	js, err := plugins.InitConfigJSON(Tag, checkpoint(t), nil)
	require.NoError(t, err)
	var cfg abi.InitConfig
	require.NoError(t, json.Unmarshal(js, &cfg))
	l := New()
	require.NoError(t, l.Init(&cfg))
	return l
}

func preInput(vals [8]float64) *plugins.PreInput {
	in := &plugins.PreInput{Instruction: "put the bowl on the plate", Embodiment: Tag}
	off := 0
	d := Describe()
	for _, g := range d.State {
		in.State = append(in.State, plugins.StateGroup{Key: g.Key, Values: append([]float64(nil), vals[off:off+g.Dim]...)})
		off += g.Dim
	}
	for _, c := range d.Cameras {
		in.Cameras = append(in.Cameras, plugins.Camera{Key: c.Key, Frames: 1, Height: 256, Width: 256})
	}
	return in
}

func toObs(in *plugins.PreInput) *pdk.Observation {
	o := &pdk.Observation{Embodiment: in.Embodiment, Instruction: in.Instruction, StateDType: "float32"}
	for _, s := range in.State {
		o.State = append(o.State, pdk.StateInput{Key: s.Key, Dim: len(s.Values), Values: s.Values})
	}
	for _, c := range in.Cameras {
		o.Cameras = append(o.Cameras, pdk.CameraInput{Key: c.Key, Frames: c.Frames, Height: c.Height, Width: c.Width, Channels: 3})
	}
	return o
}

func TestPreNative(t *testing.T) {
	l := native(t)
	// x at q01, y at q99, z far above q99 (clipped), roll mid, pitch, yaw
	// degenerate (isclose → 0), gripper fingers.
	st, err := l.Pre(toObs(preInput([8]float64{-0.38, 0.33, 5, (2.78 + 3.41) / 2, 0, 0.5, 0.02, -0.02})))
	require.NoError(t, err)
	require.Len(t, st, 132)
	assert.Equal(t, float32(-1), st[0])
	assert.Equal(t, float32(1), st[1])
	assert.Equal(t, float32(1), st[2], "clipped")
	assert.InDelta(t, 0, st[3], 1e-6)
	assert.Equal(t, float32(0), st[5], "isclose(q99, q01) → 0")
	for _, v := range st[8:] {
		require.Zero(t, v, "padding")
	}
}

func TestPostNative(t *testing.T) {
	l := native(t)
	pred := make([]float32, 40*132)
	for k := 0; k < 40; k++ {
		pred[k*132+0] = -1 // x → q01
		pred[k*132+1] = 1  // y → q99
		pred[k*132+2] = 7  // z clipped → q99
		pred[k*132+6] = 0  // gripper → midpoint of [-1, 1]
	}
	acts, err := l.Post(&pdk.PostInput{ActionPred: pred, Horizon: 40, Dim: 132})
	require.NoError(t, err)
	require.Len(t, acts.Groups, 7)
	for _, g := range acts.Groups {
		require.Equal(t, 16, g.Horizon)
		require.Equal(t, 1, g.Dim)
	}
	assert.InDelta(t, -0.7821, acts.Groups[0].Values[15], 1e-6)
	assert.InDelta(t, 0.8196, acts.Groups[1].Values[0], 1e-6)
	assert.InDelta(t, 0.8196, acts.Groups[2].Values[0], 1e-6)
	assert.InDelta(t, 0, acts.Groups[6].Values[3], 1e-7)
}

// TestWasmMatchesNative runs the real libero.wasm through the host and
// compares it bit for bit with the native plugin on random inputs, and
// checks the layout-specific validation.
func TestWasmMatchesNative(t *testing.T) {
	p := plugintest.MustOpen(t, plugintest.Guest{Dir: "."}, plugins.WithCheckpoint(checkpoint(t)))
	d := p.Describe()
	assert.Equal(t, 2, d.ProjectorSlot)
	hz, ok := p.ControlHz() // the packed manifest's control_hz, through the host
	assert.True(t, ok)
	assert.Equal(t, 20.0, hz)
	assert.Equal(t, [3]int{1, 16, 16}, d.Layout.VitGridTHW)
	assert.Len(t, d.Cameras, 2)
	assert.Len(t, d.State, 7)

	l := native(t)
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for range 20 {
		var v [8]float64
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		in := preInput(v)
		got, err := p.Pre(ctx, in)
		require.NoError(t, err)
		want, err := l.Pre(toObs(in))
		require.NoError(t, err)
		require.Equal(t, want, got.State)

		pred := make([]float32, 40*132)
		for i := range pred {
			pred[i] = float32(rng.NormFloat64())
		}
		gp, err := p.Post(ctx, &plugins.PostInput{ActionPred: pred, Horizon: 40, Dim: 132})
		require.NoError(t, err)
		wp, err := l.Post(&pdk.PostInput{ActionPred: pred, Horizon: 40, Dim: 132})
		require.NoError(t, err)
		for i, g := range gp.Actions {
			require.Equal(t, wp.Groups[i].Key, g.Key)
			require.Equal(t, wp.Groups[i].Values, g.Values)
		}
	}

	bad := preInput([8]float64{})
	bad.Cameras[0].Frames = 2
	_, err := p.Pre(ctx, bad)
	var ge *plugins.GuestError
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, "images.image", ge.Field)

	bad = preInput([8]float64{})
	bad.State[6].Values = []float64{0.01}
	_, err = p.Pre(ctx, bad)
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, plugins.GuestError{Plugin: "libero", Stage: "pre", Code: "invalid_state", Field: "state.gripper", Message: "expected 2 values, got 1"}, *ge)
}

// TestCases runs testdata/cases through libero.wasm under the host.
func TestCases(t *testing.T) {
	p := plugintest.MustOpen(t, plugintest.Guest{Dir: "."}, plugins.WithCheckpoint(checkpoint(t)))
	cases, err := plugintest.LoadCases("testdata/cases")
	require.NoError(t, err)
	require.Len(t, cases, 3)
	for _, c := range cases {
		r := c.Run(context.Background(), p)
		require.NoError(t, r.Err, "%s (%s)", r.Name, r.File)
	}
}
