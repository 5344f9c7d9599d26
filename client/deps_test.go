package client

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/gr00tgw/gr00tgw"

// forbiddenDeps are what a client must not link, by import path (the
// package or any below it):
// the server's HTTP framework, its configuration loader, the OpenTelemetry
// SDK, and the module's server packages.
var forbiddenDeps = []struct{ prefix, why string }{
	{"github.com/gofiber", "Fiber, the server's HTTP framework"},
	{"github.com/valyala/fasthttp", "fasthttp, under Fiber"},
	{"github.com/knadh/koanf", "koanf, the server's configuration loader"},
	{"go.opentelemetry.io/otel/sdk", "the OpenTelemetry SDK"},
	{module + "/gateway", "a server package"},
	{module + "/service", "a server package"},
	{module + "/frontend", "a server package"},
}

// allowedDeps are packages under a forbidden prefix that are not server
// code: the wire codec, until it moves to wire/ (issue 26 point 3).
var allowedDeps = []string{module + "/gateway/wire"}

// forbidden returns each package of deps a client may not link, with why.
func forbidden(deps []string) []string {
	var bad []string
	for _, d := range deps {
		ok := false
		for _, a := range allowedDeps {
			ok = ok || d == a
		}
		for _, f := range forbiddenDeps {
			if !ok && (d == f.prefix || strings.HasPrefix(d, f.prefix+"/")) {
				bad = append(bad, d+": "+f.why)
			}
		}
	}
	return bad
}

// TestDependencyClosure: `go list -deps ./client/...` holds no Fiber,
// koanf, OpenTelemetry SDK or server package of this module.
func TestDependencyClosure(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIPPED: no go command on PATH to list the client's dependencies")
	}
	cmd := exec.Command(goTool, "list", "-deps", "./client/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps ./client/...")
	deps := strings.Fields(string(out))
	// The listing is real: it holds the clients and what they use.
	for _, want := range []string{module + "/client", module + "/client/zmqclient", module + "/client/openpiclient",
		module + "/client/oipclient", module + "/client/rawobs", "github.com/coder/websocket"} {
		assert.Contains(t, deps, want)
	}
	for _, b := range forbidden(deps) {
		t.Error(b)
	}
	var third int
	for _, d := range deps {
		if strings.Contains(strings.SplitN(d, "/", 2)[0], ".") && !strings.HasPrefix(d, module+"/") {
			third++
		}
	}
	t.Logf("%d packages, %d outside the standard library and this module", len(deps), third)
}

// TestForbiddenFindsPlantedDeps: the check is not vacuous.
func TestForbiddenFindsPlantedDeps(t *testing.T) {
	got := forbidden([]string{
		"fmt", module + "/client", module + "/core/image", module + "/gateway/wire", "github.com/coder/websocket",
		"github.com/gofiber/fiber/v2", "github.com/valyala/fasthttp", "github.com/knadh/koanf/v2",
		"go.opentelemetry.io/otel/sdk/trace", "go.opentelemetry.io/otel/trace",
		module + "/gateway", module + "/gateway/oip", module + "/service", module + "/frontend/http",
		module + "/gatewayish", module + "/services",
	})
	assert.Equal(t, []string{
		"github.com/gofiber/fiber/v2: Fiber, the server's HTTP framework",
		"github.com/valyala/fasthttp: fasthttp, under Fiber",
		"github.com/knadh/koanf/v2: koanf, the server's configuration loader",
		"go.opentelemetry.io/otel/sdk/trace: the OpenTelemetry SDK",
		module + "/gateway: a server package",
		module + "/gateway/oip: a server package",
		module + "/service: a server package",
		module + "/frontend/http: a server package",
	}, got)
}
