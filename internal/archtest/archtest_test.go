package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleGraph is the module's import graph from `go list` (non-test
// imports, module packages only).
func moduleGraph(t *testing.T) Graph {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIPPED: no go command on PATH to list the module's imports")
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Imports", Module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	g := Graph{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkg, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		g[pkg] = nil
		for _, imp := range p.Imports {
			if r, ok := rel(imp); ok {
				g[pkg] = append(g[pkg], r)
			}
		}
	}
	require.NotEmpty(t, g)
	return g
}

func rel(path string) (string, bool) {
	r, ok := strings.CutPrefix(path, Module+"/")
	return r, ok
}

// TestImportRules: the tree keeps the directions of architecture.md.
func TestImportRules(t *testing.T) {
	g := moduleGraph(t)
	for _, v := range Check(g) {
		t.Error(v)
	}
	t.Logf("%d packages checked against %d rules, %d known exceptions", len(g), len(Rules), len(Exceptions))
}

// TestCheckFindsPlantedViolations: the check is not vacuous — a planted
// import of each forbidden kind is reported, naming the edge.
func TestCheckFindsPlantedViolations(t *testing.T) {
	// A planted exception (the real list shrinks to nothing as the breaks
	// are fixed; core/processor -> assets was the first to go).
	saved := Exceptions
	Exceptions = map[string]string{"core/processor -> assets": "planted for this test"}
	t.Cleanup(func() { Exceptions = saved })
	g := Graph{
		"core/processor":        {"assets"}, // the listed exception
		"client/oipclient":      {"gateway/oip", "client/rawobs", "api/oip"},
		"client/rawobs":         {"core/image", "gateway"},
		"core/tensor":           {"gateway"},
		"device/cpu":            {"core/tensor", "gateway/wire"},
		"plugins":               {"core/image"},
		"embodiments/droid":     {"plugins/pdk", "core/tensor"},
		"gateway/zmq/zmqclient": {"gateway/zmq"},
		"newtop/thing":          nil,
		"config":                {"device"},
		"internal/benchcpu":     {"gateway"},
	}
	got := strings.Join(Check(g), "\n")
	for _, want := range []string{
		"core/tensor -> gateway: core may import itself, internal/freelist only",
		"device/cpu -> gateway/wire: device may import",
		"plugins -> core/image: plugins may import itself only",
		"embodiments/droid -> core/tensor: embodiments may import",
		"gateway/zmq/zmqclient -> gateway/zmq: a client package imports a server package",
		"client/oipclient -> gateway/oip: a client package imports a server package",
		"client/rawobs -> gateway: a client package imports a server package",
		"newtop/thing: no rule covers this package",
		"config -> device: config may import itself only",
		"internal/benchcpu -> gateway: internal may import itself only",
	} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, "core/processor -> assets", "a listed exception is not reported")
	assert.NotContains(t, got, "-> client/rawobs", "a client may import the raw-observation helpers")
	assert.NotContains(t, got, "-> api/oip", "a client may import the protocol vocabulary")
	assert.NotContains(t, got, "client/rawobs -> core/image", "a client may import core")

	// An exception that no longer occurs is reported, so the list only shrinks.
	delete(g, "core/processor")
	assert.Contains(t, strings.Join(Check(g), "\n"), "core/processor -> assets: listed as an exception")
}
