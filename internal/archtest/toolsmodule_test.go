package archtest

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// toolOnly are modules only the build tools link (the Helm renderer, the
// OCI image writer, the schema validator): they belong in tools/go.mod.
var toolOnly = []string{"helm.sh/helm/", "github.com/google/go-containerregistry", "github.com/santhosh-tekuri/jsonschema/"}

// requires lists the module paths a go.mod requires (block and one-line
// forms, direct and indirect).
func requires(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var mods []string
	inBlock := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			inBlock = true
		case inBlock && line == ")":
			inBlock = false
		case inBlock && line != "" && !strings.HasPrefix(line, "//"):
			mods = append(mods, strings.Fields(line)[0])
		case strings.HasPrefix(line, "require "):
			mods = append(mods, strings.Fields(line)[1])
		}
	}
	require.NoError(t, sc.Err())
	return mods
}

// TestServerModuleLeavesToolsOut: the server's go.mod lists only what the
// server links; the tools' dependencies live in tools/go.mod.
func TestServerModuleLeavesToolsOut(t *testing.T) {
	server := requires(t, "../../go.mod")
	require.Contains(t, server, "github.com/gofiber/fiber/v2", "the parse found the server's requirements")
	tools := requires(t, "../../tools/go.mod")
	for _, p := range toolOnly {
		for _, m := range server {
			assert.False(t, strings.HasPrefix(m, p), "go.mod requires %s: a tool's dependency (move its importer to tools/)", m)
		}
		found := false
		for _, m := range tools {
			found = found || strings.HasPrefix(m, p)
		}
		assert.True(t, found, "tools/go.mod requires %s* (else drop it from toolOnly)", p)
	}
}
