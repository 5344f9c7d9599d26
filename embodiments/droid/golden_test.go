package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// Goldens: testdata/n17-tiny, produced by an independent PyTorch/numpy
// re-implementation of upstream N1.7 (testdata/n17-tiny/README.md says
// where they were copied from).
var goldenDir = filepath.Join("..", "..", "testdata", "n17-tiny")

type caseA struct {
	initJSON   []byte
	state      map[string][]float64
	actionPred []float32 // [40, 132]
	wantState  []float64 // [132]
	want       map[string][]float64
	relEEF     []float64
	relJoint   []float64
}

func loadCaseA(tb testing.TB) *caseA {
	tb.Helper()
	ck, err := plugins.ReadCheckpoint(goldenDir)
	require.NoError(tb, err)
	c := &caseA{}
	c.initJSON, err = plugins.InitConfigJSON(Tag, ck, nil)
	require.NoError(tb, err)
	var req struct {
		State map[string][]float64 `json:"state"`
	}
	b, err := os.ReadFile(filepath.Join(goldenDir, "caseA", "request.json"))
	require.NoError(tb, err)
	require.NoError(tb, json.Unmarshal(b, &req))
	c.state = req.State
	npy := func(name string) *plugintest.NPY {
		a, err := plugintest.ReadNPY(filepath.Join(goldenDir, "caseA", name))
		require.NoError(tb, err)
		return a
	}
	c.actionPred = npy("action_pred.npy").Float32s()
	c.wantState = npy("state_normalized.npy").Data
	c.want = map[string][]float64{}
	for _, g := range groups {
		c.want[g.key] = npy("actions_" + g.key + ".npy").Data
	}
	c.relEEF = npy("relative_unnormalized_eef_9d.npy").Data
	c.relJoint = npy("relative_unnormalized_joint_position.npy").Data
	return c
}

func (c *caseA) observation() *pdk.Observation {
	o := &pdk.Observation{Embodiment: Tag, Instruction: "Put the blue block in the green bowl", StateDType: "float32"}
	for _, g := range groups {
		o.State = append(o.State, pdk.StateInput{Key: g.key, Dim: g.dim, Values: c.state[g.key]})
	}
	for _, cam := range cameras {
		o.Cameras = append(o.Cameras, pdk.CameraInput{Key: cam, Frames: 2, Height: 180, Width: 320, Channels: 3})
	}
	return o
}

func (c *caseA) postInput() *pdk.PostInput {
	p := &pdk.PostInput{Embodiment: Tag, StateDType: "float32", ActionPred: c.actionPred, Horizon: 40, Dim: 132}
	for _, g := range groups {
		p.State = append(p.State, pdk.StateInput{Key: g.key, Dim: g.dim, Values: c.state[g.key]})
	}
	return p
}

func newInitialised(tb testing.TB, c *caseA) *Droid {
	tb.Helper()
	var cfg abi.InitConfig
	require.NoError(tb, json.Unmarshal(c.initJSON, &cfg))
	d := New()
	require.NoError(tb, d.Init(&cfg))
	return d
}

// TestGoldenNative checks the plugin logic natively against caseA: the
// normalised state bit-exactly, the decoded actions to 1e-5.
func TestGoldenNative(t *testing.T) {
	c := loadCaseA(t)
	d := newInitialised(t, c)
	st, err := d.Pre(c.observation())
	require.NoError(t, err)
	require.Len(t, st, 132)
	for i := range st {
		require.Equal(t, float32(c.wantState[i]), st[i], "state[%d]", i)
	}
	acts, err := d.Post(c.postInput())
	require.NoError(t, err)
	checkActions(t, c, acts.Groups)
}

func checkActions(t *testing.T, c *caseA, got []pdk.ActionOutput) {
	t.Helper()
	require.Len(t, got, 3)
	for _, g := range got {
		want := c.want[g.Key]
		require.Len(t, g.Values, len(want), g.Key)
		maxd := 0.0
		for i := range want {
			maxd = math.Max(maxd, math.Abs(float64(g.Values[i])-want[i]))
		}
		t.Logf("%s: max |got-want| = %.3g", g.Key, maxd)
		require.LessOrEqual(t, maxd, 1e-5, g.Key)
	}
}

// TestRelativeUnnormalize checks the intermediate relative values against
// the goldens (per-step relative_action min/max, float32→float64 steps).
func TestRelativeUnnormalize(t *testing.T) {
	c := loadCaseA(t)
	d := newInitialised(t, c)
	for k := 0; k < 40; k++ {
		for j := 0; j < 9; j++ {
			got := pdk.UnnormalizeMinMax(c.actionPred[k*132+j], d.relEEFMin[k*9+j], d.relEEFMax[k*9+j])
			require.Equal(t, c.relEEF[k*9+j], got, "eef[%d][%d]", k, j)
		}
		for j := 0; j < 7; j++ {
			got := pdk.UnnormalizeMinMax(c.actionPred[k*132+10+j], d.relJointMin[k*7+j], d.relJointMax[k*7+j])
			require.Equal(t, c.relJoint[k*7+j], got, "joint[%d][%d]", k, j)
		}
	}
}
