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
		"core/processor":         {"assets"}, // the listed exception
		"client/oipclient":       {"frontend/oip", "client/rawobs", "api/oip"},
		"client/rawobs":          {"core/image", "service"},
		"core/tensor":            {"service"},
		"device/cpu":             {"core/tensor", "frontend/zmq"},
		"plugins":                {"core/image"},
		"embodiments/droid":      {"plugins/pdk", "core/tensor"},
		"frontend/zmq/zmqclient": {"frontend/zmq"},
		"service":                {"frontend/http", "plugins", "session"},
		"frontend/zmq":           {"plugins", "service", "wire/zmtp"},
		"newtop/thing":           nil,
		"config":                 {"device"},
		"internal/benchcpu":      {"service"},
	}
	got := strings.Join(Check(g), "\n")
	for _, want := range []string{
		"core/tensor -> service: core may import itself, internal/freelist only",
		"device/cpu -> frontend/zmq: device may import",
		"plugins -> core/image: plugins may import itself only",
		"embodiments/droid -> core/tensor: embodiments may import",
		"frontend/zmq/zmqclient -> frontend/zmq: a client package imports a server package",
		"service -> frontend/http: service may import",
		"frontend/zmq -> plugins: frontend may import",
		"client/oipclient -> frontend/oip: a client package imports a server package",
		"client/rawobs -> service: a client package imports a server package",
		"newtop/thing: no rule covers this package",
		"config -> device: config may import itself only",
		"internal/benchcpu -> service: internal may import itself only",
	} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, "core/processor -> assets", "a listed exception is not reported")
	assert.NotContains(t, got, "-> client/rawobs", "a client may import the raw-observation helpers")
	assert.NotContains(t, got, "-> api/oip", "a client may import the protocol vocabulary")
	assert.NotContains(t, got, "client/rawobs -> core/image", "a client may import core")
	assert.NotContains(t, got, "service -> plugins", "the service core drives the plugins")
	assert.NotContains(t, got, "frontend/zmq -> service", "a front end translates to the service")
	assert.NotContains(t, got, "frontend/zmq -> wire/zmtp", "a front end uses the wire formats")

	// An exception that no longer occurs is reported, so the list only shrinks.
	delete(g, "core/processor")
	assert.Contains(t, strings.Join(Check(g), "\n"), "core/processor -> assets: listed as an exception")
}
