package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
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
	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/frontend/secure/securetest"
)

// TestE2ESecure runs the real binary with TLS (a CA made here by
// crypto/x509), an API key file and both robot protocols: health stays
// open; a predict without or with a wrong key is 401 on HTTP (and on
// /v2/models/{name}/infer), upstream's {"error"} on ZeroMQ and a 401
// before the upgrade on openpi; `gr00tgw predict --url https://…
// --ca-file` passes the demo with the key; plain HTTP to the TLS port is
// refused. SIGHUP then picks up a rotated key file and a rotated
// certificate without a restart; a key file that does not parse fails
// the start naming auth.api_keys_file.
func TestE2ESecure(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and starts the binary")
	}
	bin, plugins := buildGateway(t)
	dir := t.TempDir()
	ca := securetest.NewCA(t, "gr00tgw-test-ca")
	certFile, keyFile, keysFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "api-keys")
	ca.Issue(t, "first", certFile, keyFile)
	writeKeys := func(lines ...string) {
		t.Helper()
		tmp := keysFile + ".tmp"
		require.NoError(t, os.WriteFile(tmp, []byte("# test keys\n"+strings.Join(lines, "\n")+"\n"), 0o600))
		require.NoError(t, os.Rename(tmp, keysFile)) // as a Kubernetes Secret volume swaps its files
	}
	writeKeys(secure.Hash("key-1")+" robot-1", "# "+secure.Hash("key-2")+" not yet")

	_, zport, _ := net.SplitHostPort(pickPort(t))
	oaddr := pickPort(t)
	g := startSecureGateway(t, bin, plugins, ca.File, "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--api-keys-file", keysFile, "--zmq-addr", zport, "--openpi-addr", oaddr)
	tlsCfg, err := secure.ClientConfig(ca.File)
	require.NoError(t, err)
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	get := func(path string, kv ...string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, g.base+path, nil)
		require.NoError(t, err)
		for i := 0; i+1 < len(kv); i += 2 {
			req.Header.Set(kv[i], kv[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	// Health stays open.
	for _, p := range []string{"/health", "/v2/health/live", "/v2/health/ready"} {
		st, _, body := get(p)
		assert.Equal(t, http.StatusOK, st, "%s: %s", p, body)
	}
	// Without or with a wrong key: 401 on every predict route.
	st, _, body := get("/demo", "Authorization", "Bearer key-1")
	require.Equal(t, http.StatusOK, st, body)
	var demo struct {
		Request json.RawMessage `json:"request"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &demo))
	for _, tc := range []struct {
		name, path string
		kv         []string
	}{
		{"predict no key", "/predict", nil},
		{"predict wrong key", "/predict", []string{"Authorization", "Bearer key-2"}},
		{"predict wrong x-api-key", "/predict", []string{"X-API-Key", "nope"}},
		{"predict hash as key", "/predict", []string{"X-API-Key", secure.Hash("key-1")}},
		{"oip infer no key", "/v2/models/oxe_droid_relative_eef_relative_joint/infer", nil},
		{"oip infer wrong key", "/v2/models/oxe_droid_relative_eef_relative_joint/infer", []string{"Authorization", "Bearer key-2"}},
	} {
		st, h, b, err := postPath(client, g.base+tc.path, demo.Request, tc.kv...)
		require.NoError(t, err, tc.name)
		assert.Equal(t, http.StatusUnauthorized, st, "%s: %s", tc.name, b)
		assert.Contains(t, h.Get("WWW-Authenticate"), "Bearer", tc.name)
		var e struct{ Error, Code string }
		require.NoError(t, json.Unmarshal(b, &e), tc.name)
		assert.Equal(t, "unauthorized", e.Code, tc.name)
		assert.Contains(t, e.Error, "missing or invalid API key", tc.name)
	}
	st, _, _ = get("/demo")
	assert.Equal(t, http.StatusUnauthorized, st, "/demo predicts nothing but needs a key (default-deny)")
	st, _, _ = get("/info", "X-API-Key", "key-1")
	assert.Equal(t, http.StatusOK, st)

	// The client tool over HTTPS with the CA: the demo passes its golden.
	predictCLI := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"predict", "--url", g.base, "--out", filepath.Join(t.TempDir(), "resp.json")}, args...)...)
		cmd.Env = append(childEnv(moduleRoot(t)), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := predictCLI(nil, "--ca-file", ca.File, "--api-key", "key-1")
	require.NoError(t, err, out)
	assert.Contains(t, out, "PASS PCC(actions)")
	out, err = predictCLI([]string{apiKeyEnv + "=key-1"}, "--ca-file", ca.File)
	require.NoError(t, err, "the key from $%s: %s", apiKeyEnv, out)
	out, err = predictCLI(nil, "--api-key", "key-1")
	require.Error(t, err, "without --ca-file the test CA is not trusted")
	assert.Contains(t, out, "certificate", out)
	assert.Contains(t, out, "pass the CA that signed it with --ca-file CA.pem", out)
	out, err = predictCLI(nil, "--ca-file", ca.File, "--api-key", "key-2")
	require.Error(t, err)
	assert.Contains(t, out, "401", out)

	// OIP's infer through the client tools' oip protocol, with and without
	// the key.
	smokeCLI := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"smoke", "--url", g.base, "--demo-url", g.base, "--ca-file", ca.File}, args...)...)
		cmd.Env = childEnv(moduleRoot(t))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err = smokeCLI("--protocol", "oip", "--api-key", "key-1")
	require.NoError(t, err, out)
	out, err = smokeCLI("--protocol", "oip", "--api-key", "key-2")
	require.Error(t, err, out)
	assert.Contains(t, out, "401", out)

	// Plain HTTP to the TLS port is refused.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + g.addr + "/health")
	require.NoError(t, err, "plain HTTP gets an answer, not a reset")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(b), "HTTPS server")

	// ZeroMQ and openpi.
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "testdata", "n17-tiny", "caseA", "request.json"))
	require.NoError(t, err)
	obs, err := rawobs.FromPredictJSON(raw)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zobs, err := zmqclient.FromRaw(obs, "")
	require.NoError(t, err)
	oobs, err := openpiclient.FromRaw(obs, true)
	require.NoError(t, err)
	zmqAction := func(tok string) error {
		c, err := zmqclient.Dial(ctx, "127.0.0.1:"+zport, zmqclient.Options{Token: tok})
		require.NoError(t, err)
		defer c.Close()
		_, err = c.GetAction(ctx, zobs, zmqclient.Nested, nil)
		return err
	}
	openpiInfer := func(key string) error {
		var h http.Header
		if key != "" {
			h = http.Header{"Authorization": {"Bearer " + key}}
		}
		c, err := openpiclient.Dial(ctx, oaddr, openpiclient.Options{Header: h})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Infer(ctx, oobs)
		return err
	}
	zmqRefused := func(tok string) {
		t.Helper()
		var se *zmqclient.ServerError
		require.ErrorAs(t, zmqAction(tok), &se, "zmq api_token %q", tok)
		assert.Equal(t, "Unauthorized: Invalid API token", se.Message)
	}
	openpiRefused := func(key string) {
		t.Helper()
		err := openpiInfer(key)
		require.Error(t, err, "openpi key %q", key)
		assert.Contains(t, err.Error(), "HTTP 401")
	}
	zmqRefused("")
	zmqRefused("key-2")
	require.NoError(t, zmqAction("key-1"))
	openpiRefused("")
	openpiRefused("key-2")
	require.NoError(t, openpiInfer("key-1"))

	// SIGHUP: a rotated key file and a rotated certificate are picked up.
	writeKeys(secure.Hash("key-2") + " robot-2")
	ca.Issue(t, "second", certFile, keyFile)
	hup := exec.Command(bin, "reload", "--pid", fmt.Sprint(g.cmd.Process.Pid)) // SIGHUP, as in a container
	hupOut, err := hup.CombinedOutput()
	require.NoError(t, err, string(hupOut))
	require.Eventually(t, func() bool {
		logs, _ := os.ReadFile(g.stderr)
		return strings.Contains(string(logs), "SIGHUP: API keys reloaded") && strings.Contains(string(logs), "SIGHUP: TLS certificate reloaded")
	}, 30*time.Second, 50*time.Millisecond, "no reload log lines after SIGHUP")
	st, _, _ = get("/demo", "Authorization", "Bearer key-1")
	assert.Equal(t, http.StatusUnauthorized, st, "a key rotated out is refused")
	st, _, _ = get("/demo", "Authorization", "Bearer key-2")
	assert.Equal(t, http.StatusOK, st)
	out, err = predictCLI(nil, "--ca-file", ca.File, "--api-key", "key-2")
	require.NoError(t, err, out)
	zmqRefused("key-1")
	require.NoError(t, zmqAction("key-2"))
	openpiRefused("key-1")
	require.NoError(t, openpiInfer("key-2"))
	conn, err := tls.Dial("tcp", g.addr, tlsCfg)
	require.NoError(t, err)
	assert.Equal(t, "second", conn.ConnectionState().PeerCertificates[0].Subject.CommonName, "the rotated certificate is served")
	conn.Close()

	// Keys never reach the logs; key labels do.
	logs, _ := os.ReadFile(g.stderr)
	for _, secret := range []string{"key-1", "key-2"} {
		assert.NotContains(t, strings.ReplaceAll(string(logs), "\"key-", ""), secret)
	}
	assert.Contains(t, string(logs), `"key":"robot-2"`)
	require.NoError(t, g.stop(t), "exit status 0 after SIGTERM")

	// A key file that does not parse fails the start, naming the key.
	require.NoError(t, os.WriteFile(keysFile, []byte("key-1\n"), 0o600))
	cmd := exec.Command(bin, "serve", "--addr", pickPort(t), "--plugins-dir", plugins, "--api-keys-file", keysFile)
	cmd.Env = childEnv(moduleRoot(t))
	o, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(o), "config: key[auth.api_keys_file]: keys: "+keysFile+" line[1]: not a sha256:<hex> key hash", string(o))
	assert.NotContains(t, string(o), "key-1\n")
}

// postPath posts a JSON body to url with headers kv.
func postPath(client *http.Client, url string, body []byte, kv ...string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// startSecureGateway is startGateway for a TLS server: `bin serve` with
// extra flags, ready once /v2/health/ready answers 200 over HTTPS with
// the CA in caFile trusted.
func startSecureGateway(t *testing.T, bin, pluginsDir, caFile string, extra ...string) *childGateway {
	t.Helper()
	dir := t.TempDir()
	g := &childGateway{t: t, addr: pickPort(t), stdout: filepath.Join(dir, "stdout.log"), stderr: filepath.Join(dir, "stderr.log"), done: make(chan struct{})}
	g.base = "https://" + g.addr
	outF, err := os.Create(g.stdout)
	require.NoError(t, err)
	errF, err := os.Create(g.stderr)
	require.NoError(t, err)
	args := append([]string{"serve", "--addr", g.addr, "--plugins-dir", pluginsDir,
		"--plugin-cache-dir", filepath.Join(dir, "wazero-cache"), "--drain-timeout", e2eDrainTimeout.String(), "--log-format", "json"}, extra...)
	g.cmd = exec.Command(bin, args...)
	g.cmd.Dir = dir
	g.cmd.Env = childEnv(moduleRoot(t))
	g.cmd.Stdout, g.cmd.Stderr = outF, errF
	require.NoError(t, g.cmd.Start())
	_, _ = outF.Close(), errF.Close()
	go func() { g.err = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		select {
		case <-g.done:
		default:
			_ = g.cmd.Process.Kill()
			<-g.done
		}
		if t.Failed() {
			t.Logf("gr00tgw stderr (tail):\n%s", fileTail(g.stderr, 4000))
		}
	})
	cfg, err := secure.ClientConfig(caFile)
	require.NoError(t, err)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	deadline := time.Now().Add(e2eReadyTimeout)
	for {
		select {
		case <-g.done:
			t.Fatalf("gr00tgw exited before ready (%v): %s", g.err, fileTail(g.stderr, 2000))
		default:
		}
		if resp, err := client.Get(g.base + "/v2/health/ready"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after %v: %s", e2eReadyTimeout, fileTail(g.stderr, 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
