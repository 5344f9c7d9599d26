package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// TestOpenActionLimits: the host checks a manifest's action_limits against
// the module's description at load and exposes them as ActionLimits.
func TestOpenActionLimits(t *testing.T) {
	dir, err := plugintest.Pack(context.Background(), misbehave, t.TempDir())
	require.NoError(t, err)
	mf := filepath.Join(dir, plugins.ManifestFile)
	orig, err := os.ReadFile(mf)
	require.NoError(t, err)
	open := func(t *testing.T, limits string) (map[string]abi.ActionLimit, error) {
		require.NoError(t, os.WriteFile(mf, append(append([]byte(nil), orig...), limits...), 0o644))
		p, err := plugins.Open(context.Background(), dir, plugintest.DefaultOptions(t)...)
		if err != nil {
			return nil, err
		}
		defer p.Close(context.Background())
		return p.ActionLimits(), nil
	}

	got, err := open(t, "action_limits:\n  a: {min: [-1, -2], max: [1, 2], max_jump: [0.5, 0.5], jump_from: s}\n")
	require.NoError(t, err)
	assert.Equal(t, map[string]abi.ActionLimit{"a": {Min: []float64{-1, -2}, Max: []float64{1, 2}, MaxJump: []float64{0.5, 0.5}, JumpFrom: "s"}}, got)

	for _, tt := range []struct{ limits, want string }{
		{"action_limits:\n  b: {gripper: [0, 1]}\n", "wasm: plugin[misbehave] manifest: action_limits.b: no such action group (the description has [a])"},
		{"action_limits:\n  a: {max: [1, 2, 3]}\n", "wasm: plugin[misbehave] manifest: action_limits.a: 3 values per limit, the group has 2 dimensions"},
		{"action_limits:\n  a: {max_jump: [1, 1]}\n", `wasm: plugin[misbehave] manifest: action_limits.a.max_jump: state group "a" does not exist`},
	} {
		_, err := open(t, tt.limits)
		require.ErrorContains(t, err, tt.want)
	}
}
