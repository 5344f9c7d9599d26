package repo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
}

// Find passes over other modules' go.mod (the tools module's) and stops at
// the server module's.
func TestFind(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "// the server\nmodule github.com/gr00tgw/gr00tgw\n\ngo 1.26\n")
	write(t, filepath.Join(root, "tools", "go.mod"), "module github.com/gr00tgw/gr00tgw/tools\n")
	write(t, filepath.Join(root, "tools", "x", "go.mod"), "module \"github.com/gr00tgw/gr00tgwx\"\n")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "tools", "x", "deep"), 0o755))
	for _, dir := range []string{"", "tools", "tools/x", "tools/x/deep"} {
		t.Run(dir, func(t *testing.T) {
			got, err := Find(filepath.Join(root, dir))
			require.NoError(t, err)
			assert.Equal(t, root, got)
		})
	}
}

func TestFindOutsideACheckout(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module example.com/other\n")
	_, err := Find(dir)
	require.ErrorContains(t, err, "no go.mod of module github.com/gr00tgw/gr00tgw")
}

// Root from this package's directory is the checkout two levels above
// tools/.
func TestRootOfThisCheckout(t *testing.T) {
	got, err := Root()
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, filepath.Clean(filepath.Join(wd, "..", "..", "..")), got)
	assert.FileExists(t, filepath.Join(got, "tools", "go.mod"))
}
