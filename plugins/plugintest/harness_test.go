package plugintest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

const hostile = "../testdata/hostile"

// TestVerifyHostile runs Verify (the `gr00tgw plugin verify` path) on the
// hostile guests: load refusals are errors, misbehaving requests fail with
// a readable reason and the following well-formed request passes.
func TestVerifyHostile(t *testing.T) {
	ctx := context.Background()
	cases := filepath.Join(hostile, "cases")
	verify := func(g plugintest.Guest) (*plugintest.Report, error) {
		dir, err := plugintest.Pack(ctx, g, t.TempDir())
		require.NoError(t, err)
		return plugintest.Verify(ctx, filepath.Join(dir, filepath.Base(g.Dir)+".wasm"),
			plugintest.VerifyOptions{CasesDir: cases, HostOptions: plugintest.DefaultOptions(t)})
	}

	rep, err := verify(plugintest.Guest{Dir: filepath.Join(hostile, "misbehave")})
	require.NoError(t, err)
	want := map[string]string{
		"00.json": "",
		"01.json": "wasm: plugin[misbehave] pre: plugins: guest call timed out: deadline",
		"02.json": "wasm: plugin[misbehave] pre: plugins: guest", // trapped (memory limit) or timed out, machine-dependent
		"03.json": "wasm: plugin[misbehave] pre: plugins: guest trapped",
		"04.json": "wasm: plugin[misbehave] post: plugins: guest trapped",
		"05.json": "",
		"06.json": "",
	}
	require.Len(t, rep.Cases, len(want))
	for _, c := range rep.Cases {
		if want[c.File] == "" {
			assert.NoError(t, c.Err, c.Name)
		} else if assert.Error(t, c.Err, c.Name) {
			assert.Contains(t, c.Err.Error(), want[c.File], c.Name)
		}
	}

	rep, err = verify(plugintest.Guest{Dir: filepath.Join(hostile, "raw")})
	require.NoError(t, err)
	for _, c := range rep.Cases {
		switch c.File {
		case "05.json":
			require.Error(t, c.Err)
			assert.Contains(t, c.Err.Error(), "wasm: plugin[raw] pre: plugins: guest returned an invalid result: result [0xffffff00, +64) outside memory")
		default:
			assert.NoError(t, c.Err, c.Name)
		}
	}

	_, err = verify(plugintest.Guest{Dir: filepath.Join(hostile, "raw"), Tags: []string{"wrongsig"}})
	require.ErrorContains(t, err, "wasm: plugin[raw] export[gw_pre] has signature (i32) -> i64, want (i32,i32) -> i64")
}

// TestVerifyBareWasm: without a plugin.yaml next to the file, Verify builds
// the manifest from describe().
func TestVerifyBareWasm(t *testing.T) {
	w := plugintest.BuildGuest(t, filepath.Join(hostile, "misbehave"))
	rep, err := plugintest.Verify(context.Background(), w, plugintest.VerifyOptions{HostOptions: plugintest.DefaultOptions(t)})
	require.NoError(t, err)
	assert.Equal(t, "misbehave", rep.Plugin)
	assert.Equal(t, "test_misbehave", rep.Description.Embodiment)
}
