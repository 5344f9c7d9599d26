package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientToolsE2E: `gr00tgw smoke` and `gr00tgw bench` against the
// real binary serving the tiny checkpoint: smoke PASSes on both
// embodiments' demos (golden, repeat, seed path), bench reports every
// timing_ms field.
func TestClientToolsE2E(t *testing.T) {
	bin, plugins := buildGateway(t)
	g := startGateway(t, bin, plugins)
	dir := t.TempDir()
	run := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		var out, errb bytes.Buffer
		b := captureStdout(t, func() { code = dispatch(context.Background(), args, &out, &errb) })
		return code, string(b), errb.String()
	}

	for _, emb := range []string{"", "libero_sim"} {
		out := filepath.Join(dir, "smoke"+emb+".json")
		args := []string{"smoke", "--url", g.base, "--out", out}
		if emb != "" {
			args = append(args, "--embodiment", emb, "--wait", "60s") // ready serves the default; the others may still warm up
		}
		code, stdout, stderr := run(args...)
		require.Equal(t, 0, code, "%s%s", stdout, stderr)
		line := strings.TrimSpace(stdout)
		t.Log(line)
		want := "PASS GR00T-N1.7-3B n17 oxe_droid_relative_eef_relative_joint: PCC(actions)="
		if emb != "" {
			want = "PASS GR00T-N1.7-3B n17 " + emb + ": PCC(actions)="
		}
		assert.True(t, strings.HasPrefix(line, want), line)
		for _, w := range []string{"repeat_maxdiff=0.0e+00", "seed_path_ok", "device_ms=", "total_ms=", "wall_ms=", "per_group["} {
			assert.Contains(t, line, w)
		}
		var r smokeReport
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &r))
		assert.Equal(t, "PASS", r.Verdict)
		assert.True(t, r.Golden)
		require.NotNil(t, r.Actions)
		assert.GreaterOrEqual(t, float64(r.Actions.PCC), r.PCCMin)
		assert.True(t, r.Repeat.BitIdentical)
		assert.True(t, r.Seed.OK)
		assert.True(t, r.Seed.BitIdentical)
		require.Len(t, r.TimingMS, 2)
		assert.Positive(t, r.TimingMS[0]["device"])
	}
	assert.Contains(t, mustRead(t, filepath.Join(dir, "smoke.json")), `"eef_9d"`)

	out := filepath.Join(dir, "bench.json")
	code, stdout, stderr := run("bench", "--url", g.base, "--n", "4", "--concurrency", "2", "--warmup", "1", "--out", out)
	require.Equal(t, 0, code, "%s%s", stdout, stderr)
	t.Log("\n" + stdout)
	assert.NotContains(t, stderr, "[#", "no progress bar when stderr is not a terminal")
	var r benchReport
	require.NoError(t, json.Unmarshal([]byte(mustRead(t, out)), &r))
	assert.Equal(t, 0, r.Errors)
	require.Len(t, r.Samples, 4)
	for _, f := range []string{"wall", "total", "device", "queue", "parse", "decode", "plugin_pre", "encode", "decode_actions", "plugin_post"} {
		assert.Contains(t, r.Fields, f)
		assert.Equal(t, 4, r.Summary[f].N, f)
		assert.Contains(t, stdout, "\n"+f+" ", "the table has %s", f)
	}
	assert.Contains(t, r.Fields, "device_stages.vision", "the backend's stages")
	assert.LessOrEqual(t, float64(r.Summary["device"].P50), float64(r.Summary["total"].P50))
	assert.LessOrEqual(t, float64(r.Summary["total"].P50), float64(r.Summary["wall"].P50))
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// smoke and bench over the robot protocols: the demo's pixels as raw uint8
// frames with a seed through ZeroMQ, openpi and OIP must reproduce HTTP
// /predict of the same request bit for bit, for both embodiments.
func TestClientToolsRobotProtocolsE2E(t *testing.T) {
	bin, plugins := buildGateway(t)
	zaddr, oaddr := pickPort(t), pickPort(t)
	g := startGateway(t, bin, plugins, "--zmq-addr", zaddr, "--openpi-addr", oaddr)
	for _, tc := range []struct{ protocol, url string }{
		{"zmq", "tcp://" + zaddr},
		{"openpi", "ws://" + oaddr},
		{"oip", g.base}, // Open Inference Protocol v2 on the HTTP port, binary tensor data
	} {
		for _, emb := range []string{"oxe_droid_relative_eef_relative_joint", "libero_sim"} {
			var out, errb bytes.Buffer
			var code int
			b := captureStdout(t, func() {
				code = dispatch(context.Background(), []string{"smoke", "--protocol", tc.protocol, "--url", tc.url, "--demo-url", g.base,
					"--embodiment", emb, "--wait", "60s"}, &out, &errb)
			})
			line := strings.TrimSpace(string(b))
			t.Log(tc.protocol, line)
			require.Equal(t, 0, code, "%s %s: %s%s", tc.protocol, emb, line, errb.String())
			assert.True(t, strings.HasPrefix(line, "PASS"), line)
			assert.Contains(t, line, "max|d|=0 ", "bit-identical to HTTP /predict")
			// Only the timings the protocol reports, never a 0.00 it did not measure.
			assert.NotContains(t, line, "=0.00/0.00")
			switch tc.protocol {
			case "oip":
				assert.Regexp(t, `device_ms=[0-9.]+/[0-9.]+ total_ms=`, line)
			case "openpi":
				assert.Regexp(t, `infer_ms=[0-9.]+/[0-9.]+ wall_ms=`, line)
				assert.NotContains(t, line, "device_ms=")
			case "zmq":
				assert.NotContains(t, line, "device_ms=")
				assert.NotContains(t, line, "total_ms=")
			}
		}
		var out, errb bytes.Buffer
		var code int
		b := captureStdout(t, func() {
			code = dispatch(context.Background(), []string{"bench", "--protocol", tc.protocol, "--url", tc.url, "--demo-url", g.base, "--n", "3"}, &out, &errb)
		})
		require.Equal(t, 0, code, "%s bench: %s%s", tc.protocol, b, errb.String())
		assert.Contains(t, string(b), "0 errors")
	}
}
