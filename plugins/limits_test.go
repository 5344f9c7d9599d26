package plugins

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

const limitsManifest = goodManifest + `action_limits:
  joint_position: {min: [-1, -.inf], max: [1, 2.5], max_step_delta: [0.1, 0.2], max_jump: [0.3, 0.4]}
  gripper_position: {gripper: [0, 1]}
`

func TestManifestActionLimits(t *testing.T) {
	m, err := ParseManifest([]byte(limitsManifest))
	require.NoError(t, err)
	assert.Equal(t, map[string]abi.ActionLimit{
		"joint_position":   {Min: []float64{-1, math.Inf(-1)}, Max: []float64{1, 2.5}, MaxStepDelta: []float64{0.1, 0.2}, MaxJump: []float64{0.3, 0.4}},
		"gripper_position": {Gripper: []float64{0, 1}},
	}, m.ActionLimits)

	// The written manifest reads back the same limits (±Inf and every
	// float64 bit included).
	m.ActionLimits["joint_position"].Max[1] = math.Nextafter(2.5, 3)
	dir := t.TempDir()
	require.NoError(t, WritePluginDir(dir, m, []byte("\x00asm")))
	back, err := ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, m.ActionLimits, back.ActionLimits)

	tests := []struct{ from, to, want string }{
		{"max_step_delta: [0.1, 0.2]", "max_step_delta: [0.1, -0.2]", "wasm: plugin[droid] manifest: action_limits.joint_position.max_step_delta[1]: -0.2 is not a finite value > 0"},
		{"gripper: [0, 1]", "gripper: [1, 0]", "wasm: plugin[droid] manifest: action_limits.gripper_position.gripper: [1 0] is not a finite range"},
		{"max: [1, 2.5]", "max: [1]", "wasm: plugin[droid] manifest: action_limits.joint_position.max: 1 values, the group's other limits have 2"},
		{"gripper: [0, 1]", "grip: [0, 1]", "field grip not found"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := ParseManifest([]byte(strings.Replace(limitsManifest, tt.from, tt.to, 1)))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestCompleteChecksActionLimits: gwplugin-pack (Complete) refuses limits
// that do not fit the module's description, naming the field.
func TestCompleteChecksActionLimits(t *testing.T) {
	d := &Description{
		Name: "droid", Version: "1.0.0", Embodiment: "oxe_droid_relative_eef_relative_joint",
		State: []abi.StateGroup{{Key: "joint_position", Dim: 2}},
		Actions: []abi.ActionGroup{
			{Key: "joint_position", Dim: 2, Rep: abi.RepRelative, StateKey: "joint_position"},
			{Key: "gripper_position", Dim: 1, Rep: abi.RepAbsolute},
		},
	}
	m, err := ParseManifestTemplate([]byte(limitsManifest))
	require.NoError(t, err)
	require.NoError(t, m.complete(d))

	d.Actions[0].Dim = 3
	require.EqualError(t, m.complete(d), "wasm: plugin[droid] manifest: action_limits.joint_position: 2 values per limit, the group has 3 dimensions")
}
