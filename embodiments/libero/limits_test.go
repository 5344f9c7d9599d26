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
// testdata/statistics.json by the rules its comment states (min/max ± 5 % of
// the range, intersected with [-1, 1]; the gripper's range [-1, 1]) and
// checks them against Describe.
func TestActionLimitsFromStatistics(t *testing.T) {
	tmpl, err := os.ReadFile(plugins.ManifestFile)
	require.NoError(t, err)
	m, err := plugins.ParseManifestTemplate(tmpl)
	require.NoError(t, err)
	d := Describe()
	require.NoError(t, abi.CheckActionLimits(&d, m.ActionLimits))

	b, err := os.ReadFile(filepath.Join("testdata", "statistics.json"))
	require.NoError(t, err)
	var all map[string]struct {
		Action map[string]struct{ Min, Max []float64 } `json:"action"`
	}
	require.NoError(t, json.Unmarshal(b, &all))
	require.Len(t, m.ActionLimits, len(d.Actions))
	for _, g := range d.Actions {
		got := m.ActionLimits[g.Key]
		if g.Key == "gripper" {
			require.Equal(t, abi.ActionLimit{Gripper: []float64{-1, 1}}, got)
			continue
		}
		a := all[Tag].Action[g.Key]
		require.Len(t, a.Min, 1, g.Key)
		w := 0.05 * (a.Max[0] - a.Min[0])
		lo, hi := math.Max(a.Min[0]-w, -1), math.Min(a.Max[0]+w, 1)
		require.Nil(t, got.MaxStepDelta, g.Key)
		require.Nil(t, got.MaxJump, g.Key)
		require.Len(t, got.Min, 1, g.Key)
		require.Len(t, got.Max, 1, g.Key)
		require.InDelta(t, lo, got.Min[0], 1e-12, g.Key)
		require.InDelta(t, hi, got.Max[0], 1e-12, g.Key)
	}
}
