package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
)

// TestPackVersionFromDescribe: the packer fills the manifest's version
// from the module's describe(), and fails — naming both values — when
// plugin.yaml says another version (bumped in one place only), instead of
// leaving the refusal to the server's reload.
func TestPackVersionFromDescribe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin to wasm")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "build"), 0o755))
	parent, err := os.MkdirTemp(filepath.Join(root, "build"), "_packtest-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	pkg := filepath.Join(parent, "libero")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	src := filepath.Join(root, "embodiments", "libero")
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(pkg, e.Name()), b, 0o644))
	}
	out := filepath.Join(parent, "out")
	ctx := context.Background()
	require.NoError(t, pack(ctx, pkg, out))
	m, err := plugins.ReadManifest(filepath.Join(out, "libero"))
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", m.Version, "filled from describe")

	yml := filepath.Join(pkg, plugins.ManifestFile)
	b, err := os.ReadFile(yml)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(yml, append([]byte("version: 1.0.1\n"), b...), 0o644))
	err = pack(ctx, pkg, filepath.Join(parent, "out2"))
	require.ErrorContains(t, err, `plugin[libero] plugin.yaml version "1.0.1" differs from the module's describe version "1.0.0"`)
	assert.NoDirExists(t, filepath.Join(parent, "out2", "libero"))
}
