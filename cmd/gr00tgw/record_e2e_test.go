package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client"
	"github.com/gr00tgw/gr00tgw/record"
)

// TestE2ERecordReplay is issue 28's acceptance: a server recording to
// record.dir answers predicts of DROID and LIBERO from 4 concurrent
// clients over HTTP and ZeroMQ; `gr00tgw replay` of the directory against
// the same server finds every request bit-identical; against a server
// whose LIBERO plugin changed — its manifest's action limits tightened,
// the gate clamping LIBERO — the report names exactly the LIBERO
// requests. 200 predicts (40 with -short).
func TestE2ERecordReplay(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 40
	}
	bin, plugins := buildGateway(t)
	recDir := filepath.Join(t.TempDir(), "records")
	zaddr := pickPort(t)
	g := startGateway(t, bin, plugins, "--zmq-addr", zaddr, "--record-dir", recDir)
	ctx := context.Background()
	h := client.NewHTTP(g.base, client.Options{Timeout: time.Minute})
	demo := func(emb string) json.RawMessage {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second) // LIBERO may still warm up
		for {
			d, err := h.Demo(ctx, emb)
			if err == nil {
				var m map[string]any
				require.NoError(t, json.Unmarshal(d.Request, &m))
				m["embodiment"] = emb
				delete(m, "noise")
				b, err := json.Marshal(m)
				require.NoError(t, err)
				return b
			}
			require.True(t, time.Now().Before(deadline), "demo %s: %v", emb, err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	const droid, libero = "oxe_droid_relative_eef_relative_joint", "libero_sim"
	bodies := map[string]json.RawMessage{droid: demo(droid), libero: demo(libero)}

	// 4 clients: two over HTTP, two over ZeroMQ, each alternating the
	// embodiments, every request its own seed.
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for c := range 4 {
		proto, url := "http", g.base
		if c >= 2 {
			proto, url = "zmq", "tcp://"+zaddr
		}
		p, err := client.Dial(ctx, proto, url, client.Options{Timeout: time.Minute, DemoURL: g.base})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += 4 {
				emb := droid
				if (i/4)%2 == 1 {
					emb = libero
				}
				req, err := client.WithSeed(bodies[emb], 1000+i)
				if err == nil {
					_, err = p.Predict(ctx, req)
				}
				if err != nil {
					errs <- fmt.Errorf("client %d (%s) request %d (%s): %w", c, proto, i, emb, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d predicts from 4 clients in %v", n, time.Since(t0).Round(time.Millisecond))

	// The writer is off the request path: wait for the files.
	var files []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		files, err = record.List(recDir)
		require.NoError(t, err)
		if len(files) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Len(t, files, n, "one record per predict")
	fi, err := os.Stat(recDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	var liberoFiles []string
	protos := map[string]int{}
	for _, f := range files {
		r, err := record.ReadFile(f)
		require.NoError(t, err)
		protos[r.Protocol+"/"+r.Embodiment]++
		if r.Embodiment == libero {
			liberoFiles = append(liberoFiles, filepath.Base(f))
		}
	}
	assert.Equal(t, map[string]int{"http/" + droid: n / 4, "http/" + libero: n / 4, "zmq/" + droid: n / 4, "zmq/" + libero: n / 4}, protos)

	// Replay a copy: the recording server records the replays too.
	snap := filepath.Join(t.TempDir(), "snapshot")
	copyDir(t, recDir, snap)

	replayTo := func(base, zmqAddr string) (int, *replayReport, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "replay.json")
		var stdout, stderr bytes.Buffer
		var code int
		b := captureStdout(t, func() {
			code = dispatch(ctx, []string{"replay", snap, "--url", base, "--zmq-url", "tcp://" + zmqAddr, "--out", out}, &stdout, &stderr)
		})
		var r replayReport
		require.NoError(t, json.Unmarshal([]byte(mustRead(t, out)), &r), "%s%s", b, stderr.String())
		return code, &r, string(b) + stdout.String() + stderr.String()
	}

	t1 := time.Now()
	code, r, text := replayTo(g.base, zaddr)
	t.Logf("replay against the same server in %v", time.Since(t1).Round(time.Millisecond))
	require.Equal(t, 0, code, text)
	assert.Equal(t, n, r.Total)
	assert.Equal(t, n, r.BitIdentical, text)
	assert.Contains(t, text, fmt.Sprintf("%d requests: %d bit-identical, 0 within tolerance 0, 0 differ, 0 errors", n, n))
	for _, rr := range r.Requests {
		assert.Equal(t, rr.Recorded, rr.Protocol, "%s replayed over its own protocol", rr.File)
	}

	// The changed LIBERO plugin: its manifest's x limits tightened to
	// ±0.001 and the gate clamping LIBERO; DROID's plugin is the same.
	changed := filepath.Join(t.TempDir(), "plugins")
	for _, p := range []string{"droid", "libero"} {
		copyDir(t, filepath.Join(plugins, p), filepath.Join(changed, p))
	}
	manifest := filepath.Join(changed, "libero", "plugin.yaml")
	y := mustRead(t, manifest)
	const x = "    x:\n        min:\n            - -1\n        max:\n            - 1\n"
	require.Contains(t, y, x, "libero's packed manifest declares action_limits.x")
	y = strings.Replace(y, x, "    x:\n        min: [-0.001]\n        max: [0.001]\n", 1)
	require.NoError(t, os.WriteFile(manifest, []byte(y), 0o600))
	z2 := pickPort(t)
	g2 := startGateway(t, bin, changed, "--zmq-addr", z2, "--safety-policies", libero+"=clamp")
	code, r, text = replayTo(g2.base, z2)
	assert.Equal(t, 1, code, text)
	var failing []string
	for _, rr := range r.Requests {
		if rr.Status != "bit-identical" {
			failing = append(failing, rr.File)
			assert.Equal(t, libero, rr.Embodiment, rr.File)
			assert.Equal(t, "differs", rr.Status, rr.File)
		}
	}
	assert.Equal(t, liberoFiles, failing, "the report names exactly the LIBERO requests")
	assert.Len(t, r.Failing, len(liberoFiles))
	for _, f := range r.Failing {
		assert.True(t, slices.Contains(liberoFiles, strings.Fields(f)[0]), f)
	}
	t.Logf("against the changed LIBERO plugin: %d of %d differ", len(failing), n)
}

// copyDir copies the regular files of src into dst (one level).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() {
			copyDir(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
}
