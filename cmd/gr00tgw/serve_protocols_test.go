package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/openpiclient"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/client/zmqclient"
)

// TestServeProtocols runs the real binary with the ZeroMQ endpoint on a
// bare port (loopback) and the openpi endpoint, predicts the demo over
// both, and stops the server with a ZeroMQ kill (zmq.allow_kill): a clean
// exit 0. A zmq.addr that cannot be bound fails the start, naming the key.
func TestServeProtocols(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and starts the binary")
	}
	bin, plugins := buildGateway(t)
	_, zport, _ := net.SplitHostPort(pickPort(t))
	oaddr := pickPort(t)
	g := startGateway(t, bin, plugins, "--zmq-addr", zport, "--openpi-addr", oaddr, "--zmq-allow-kill")

	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "testdata", "n17-tiny", "caseA", "request.json"))
	require.NoError(t, err)
	obs, err := rawobs.FromPredictJSON(raw)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	zc, err := zmqclient.Dial(ctx, "127.0.0.1:"+zport, zmqclient.Options{})
	require.NoError(t, err)
	defer zc.Close()
	zobs, err := zmqclient.FromRaw(obs, "")
	require.NoError(t, err)
	acts, err := zc.GetAction(ctx, zobs, zmqclient.Nested, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 40, 9}, acts["eef_9d"].Shape)

	resp, err := http.Get("http://" + oaddr + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "OK\n", string(body))
	oc, err := openpiclient.Dial(ctx, oaddr, openpiclient.Options{})
	require.NoError(t, err)
	oobs, err := openpiclient.FromRaw(obs, true)
	require.NoError(t, err)
	m, err := oc.Infer(ctx, oobs)
	require.NoError(t, err)
	r, err := openpiclient.ParseResult(m)
	require.NoError(t, err)
	assert.Equal(t, []int{40, 17}, r.Actions.Shape)
	oc.Close()

	_, err = zc.Call(ctx, "kill", nil)
	require.NoError(t, err)
	select {
	case <-g.done:
		require.NoError(t, g.err, "exit status 0 after kill")
	case <-time.After(e2eDrainTimeout + 15*time.Second):
		t.Fatal("gr00tgw did not exit after a ZeroMQ kill")
	}
	logs, _ := os.ReadFile(g.stderr)
	assert.Contains(t, string(logs), "listening (ZeroMQ: Isaac-GR00T policy protocol)")
	assert.Contains(t, string(logs), `"addr":"127.0.0.1:`+zport+`"`, "a bare port listens on loopback")

	// A zmq.addr already in use fails the start.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cmd := exec.Command(bin, "serve", "--addr", pickPort(t), "--plugins-dir", plugins, "--zmq-addr", ln.Addr().String())
	cmd.Env = childEnv(moduleRoot(t))
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.True(t, strings.Contains(string(out), "listen zmq.addr "+ln.Addr().String()), string(out))
}
