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
)

// TestActionLimitsFromStatistics recomputes plugin.yaml's action_limits from
// the shipped checkpoint's statistics by the rules its comment states, and
// checks them against Describe, so that the numbers and their documented
// origin cannot drift apart.
func TestActionLimitsFromStatistics(t *testing.T) {
	tmpl, err := os.ReadFile(plugins.ManifestFile)
	require.NoError(t, err)
	m, err := plugins.ParseManifestTemplate(tmpl)
	require.NoError(t, err)
	d := new(Droid).Describe()
	require.NoError(t, abi.CheckActionLimits(&d, m.ActionLimits))

	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "n17-tiny", "statistics.json"))
	require.NoError(t, err)
	type stat struct{ Min, Max []float64 }
	type relStat struct{ Min, Max [][]float64 }
	var all map[string]struct {
		Action         map[string]stat    `json:"action"`
		RelativeAction map[string]relStat `json:"relative_action"`
	}
	require.NoError(t, json.Unmarshal(b, &all))
	st := all[d.Embodiment]

	franka := [2][7]float64{
		{-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973},
		{2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973},
	}
	want := map[string]abi.ActionLimit{"gripper_position": {Gripper: []float64{0, 1}}}
	for _, k := range []string{"eef_9d", "joint_position"} {
		a, r := st.Action[k], st.RelativeAction[k]
		n := len(a.Min)
		var l abi.ActionLimit
		e := make([]float64, n)
		for i := 0; i < n; i++ {
			w := 0.05 * (a.Max[i] - a.Min[i])
			lo, hi := a.Min[i]-w, a.Max[i]+w
			if k == "eef_9d" && i >= 3 {
				lo, hi = math.Max(lo, -1), math.Min(hi, 1)
			}
			if k == "joint_position" {
				lo, hi = math.Max(lo, franka[0][i]), math.Min(hi, franka[1][i])
			}
			l.Min, l.Max = append(l.Min, lo), append(l.Max, hi)
			ref := 0.0
			if k == "eef_9d" && (i == 3 || i == 7) {
				ref = 1
			}
			e[i] = math.Max(math.Abs(r.Min[0][i]-ref), math.Abs(r.Max[0][i]-ref))
			for s := 1; s < len(r.Min); s++ {
				e[i] = math.Max(e[i], math.Max(math.Abs(r.Max[s][i]-r.Max[s-1][i]), math.Abs(r.Min[s][i]-r.Min[s-1][i])))
			}
		}
		if k == "eef_9d" {
			xyz, rot := 2*math.Hypot(math.Hypot(e[0], e[1]), e[2]), 0.0
			for _, x := range e[3:] {
				rot += x * x
			}
			rot = 2 * math.Sqrt(rot)
			for i := range n {
				l.MaxStepDelta = append(l.MaxStepDelta, map[bool]float64{true: xyz, false: rot}[i < 3])
			}
		} else {
			for _, x := range e {
				l.MaxStepDelta = append(l.MaxStepDelta, 2*x)
			}
		}
		l.MaxJump = l.MaxStepDelta
		want[k] = l
	}
	requireLimitsNear(t, want, m.ActionLimits)
}

// requireLimitsNear compares limits to 6 significant digits (the manifest's
// precision).
func requireLimitsNear(t *testing.T, want, got map[string]abi.ActionLimit) {
	t.Helper()
	require.Len(t, got, len(want))
	near := func(field string, w, g []float64) {
		require.Len(t, g, len(w), field)
		for i := range w {
			require.InDelta(t, w[i], g[i], 5e-6*math.Abs(w[i])+1e-12, "%s[%d]", field, i)
		}
	}
	for k, w := range want {
		g, ok := got[k]
		require.True(t, ok, k)
		near(k+".min", w.Min, g.Min)
		near(k+".max", w.Max, g.Max)
		near(k+".gripper", w.Gripper, g.Gripper)
		near(k+".max_step_delta", w.MaxStepDelta, g.MaxStepDelta)
		near(k+".max_jump", w.MaxJump, g.MaxJump)
		require.Equal(t, w.JumpFrom, g.JumpFrom, k)
	}
}
