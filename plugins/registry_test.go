package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// Scan lists every plugin directory with a revision that follows its
// content, flags duplicate tags and bad manifests; Open loads with the
// shared cache and checks the described tag.
func TestRegistryScanOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, err := plugintest.Pack(ctx, slowMisbehave, dir)
	require.NoError(t, err)
	_, err = plugintest.Pack(ctx, raw, dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "not-a-plugin"), 0o755))
	reg, err := plugins.NewRegistry(dir, plugintest.DefaultOptions(t)...)
	require.NoError(t, err)

	ents, err := reg.Scan()
	require.NoError(t, err)
	require.Len(t, ents, 2)
	assert.Equal(t, "test_misbehave", ents[0].Tag)
	assert.Equal(t, "test_raw", ents[1].Tag)
	for _, e := range ents {
		require.NoError(t, e.Err)
		assert.Len(t, e.Revision, 64)
	}
	p, err := reg.Open(ctx, ents[1])
	require.NoError(t, err)
	out, err := p.Pre(ctx, preIn("ok", 6, 2))
	require.NoError(t, err)
	assert.Equal(t, float32(3), out.State[0])

	// The revision follows the manifest (and the .wasm): a rescan of an
	// unchanged directory gives the same revisions, an edit another one.
	again, err := reg.Scan()
	require.NoError(t, err)
	assert.Equal(t, ents[1].Revision, again[1].Revision)
	mf := filepath.Join(dir, "raw", plugins.ManifestFile)
	b, err := os.ReadFile(mf)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mf, []byte(strings.Replace(string(b), "abi: 1", "abi: 2", 1)), 0o644))
	edited, err := reg.Scan()
	require.NoError(t, err)
	assert.NotEqual(t, ents[1].Revision, edited[1].Revision)
	_, err = reg.Open(ctx, edited[1])
	require.ErrorContains(t, err, "wasm: plugin[raw] ABI version mismatch")
	// The plugin opened before keeps working: the caller owns it.
	_, err = p.Pre(ctx, preIn("ok", 1, 1))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mf, b, 0o644))

	// An entry whose files changed after the scan is refused, not loaded
	// under the scanned revision.
	require.NoError(t, os.WriteFile(mf, append(append([]byte(nil), b...), "# edited\n"...), 0o644))
	_, err = reg.Open(ctx, ents[1])
	require.ErrorContains(t, err, "wasm: plugin[raw] in "+filepath.Join(dir, "raw")+" changed since it was scanned")
	require.NoError(t, os.WriteFile(mf, b, 0o644))
	p2, err := reg.Open(ctx, ents[1])
	require.NoError(t, err)
	require.NoError(t, p2.Close(ctx))

	// A second plugin claiming test_raw: both entries carry the error.
	require.NoError(t, os.CopyFS(filepath.Join(dir, "raw2"), os.DirFS(filepath.Join(dir, "raw"))))
	dup, err := reg.Scan()
	require.NoError(t, err)
	var n int
	for _, e := range dup {
		if e.Tag == "test_raw" {
			n++
			require.ErrorContains(t, e.Err, "all serve embodiment test_raw")
			_, err := reg.Open(ctx, e)
			require.Error(t, err)
		}
	}
	assert.Equal(t, 2, n)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "raw2")))

	// An unparsable manifest is listed, not fatal to the scan.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "broken"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken", plugins.ManifestFile), []byte("name: [\n"), 0o644))
	withBroken, err := reg.Scan()
	require.NoError(t, err)
	require.Len(t, withBroken, 3)
	assert.Equal(t, "", withBroken[0].Tag)
	assert.Error(t, withBroken[0].Err)

	require.NoError(t, p.Close(ctx))
	require.NoError(t, reg.Close(ctx))
	_, err = reg.Open(ctx, ents[1])
	require.ErrorIs(t, err, plugins.ErrClosed)
	_, err = plugins.NewRegistry("")
	require.Error(t, err)
}
