//go:build linux

package main

// End-to-end tests of device isolation on the real binary: serve starts
// `gr00tgw runner` children (device.isolation process, the default), and
// the tests kill, stop and replace them under requests. The chaos test
// runs 30 s by default; GR00TGW_CHAOS_DURATION=5m (any Go duration) runs
// it longer. The conformance suite (device/runnertest) runs against the
// built `gr00tgw runner` too.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/cpu"
	"github.com/gr00tgw/gr00tgw/device/runnertest"
)

// runnerInfo is /info's "runner" block.
type runnerInfoBlock struct {
	Isolation string                `json:"isolation"`
	PID       int                   `json:"pid"`
	Restarts  int                   `json:"restarts"`
	LastCause string                `json:"last_cause"`
	Reason    string                `json:"reason"`
	Runners   []device.RunnerStatus `json:"runners"`
}

func getRunnerInfo(t testing.TB, g *childGateway) runnerInfoBlock {
	t.Helper()
	resp, err := http.Get(g.base + "/info")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var m struct {
		Runner runnerInfoBlock `json:"runner"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return m.Runner
}

// healthStatus is /health's status and /v2/health/ready's code.
func healthStatus(t testing.TB, g *childGateway) (string, int) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(g.base + "/health")
	require.NoError(t, err, "/health keeps answering")
	var h struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	_ = resp.Body.Close()
	r2, err := c.Get(g.base + "/v2/health/ready")
	require.NoError(t, err)
	_ = r2.Body.Close()
	return h.Status, r2.StatusCode
}

// waitReady waits for readiness to return.
func waitReady(t testing.TB, g *childGateway, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if st, code := healthStatus(t, g); st == "ok" && code == http.StatusOK {
			return
		}
		require.True(t, time.Now().Before(deadline), "not ready again within %v", within)
		time.Sleep(20 * time.Millisecond)
	}
}

// demoPredict posts the demo and returns status, headers, body.
func demoPredict(t testing.TB, client *http.Client, g *childGateway, demo *demoData, kv ...string) (int, http.Header, []byte, error) {
	return postPredict(client, g.base, demo.Request, "application/json", kv...)
}

// checkGolden checks a 200 answer against the demo's golden.
func checkGolden(t testing.TB, body []byte, demo *demoData) map[string][][]float64 {
	t.Helper()
	var r struct {
		Actions map[string][][]float64 `json:"actions"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	md, err := maxActionDiff(r.Actions, demo.Expected.Actions)
	require.NoError(t, err)
	assert.LessOrEqual(t, md, 1e-3, "max |actions - golden|")
	return r.Actions
}

// signalDuringPredict sends sig to the runner while a demo predict is in
// flight, until a predict is hit (the tiny model answers in ~40 ms), and
// returns that answer and its latency after the signal.
func signalDuringPredict(t *testing.T, g *childGateway, demo *demoData, sig syscall.Signal, kv ...string) (int, http.Header, []byte, time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second}
	for attempt := range 30 {
		pid := getRunnerInfo(t, g).PID
		require.NotZero(t, pid)
		type answer struct {
			st   int
			h    http.Header
			body []byte
			err  error
			at   time.Time
		}
		ch := make(chan answer, 1)
		go func() {
			st, h, b, err := demoPredict(t, client, g, demo, kv...)
			ch <- answer{st, h, b, err, time.Now()}
		}()
		time.Sleep(time.Duration(15+3*attempt) * time.Millisecond) // decode + encode come first
		t0 := time.Now()
		require.NoError(t, syscall.Kill(pid, sig))
		a := <-ch
		require.NoError(t, a.err)
		if a.st != http.StatusOK {
			return a.st, a.h, a.body, a.at.Sub(t0)
		}
		if sig == syscall.SIGSTOP {
			_ = syscall.Kill(pid, syscall.SIGCONT) // answered before it stopped: let it go
		}
		waitReady(t, g, 30*time.Second)
	}
	t.Fatal("no predict was in flight at the signal in 30 attempts")
	return 0, nil, nil, 0
}

func TestE2ERunnerKill9(t *testing.T) {
	bin, plugins := buildGateway(t)
	g := startGateway(t, bin, plugins)
	demo := getDemo(t, g)
	ri := getRunnerInfo(t, g)
	require.Equal(t, "process", ri.Isolation, "serve isolates the device by default")
	require.NotZero(t, ri.PID)
	require.NotEqual(t, g.cmd.Process.Pid, ri.PID)

	st, h, body, d := signalDuringPredict(t, g, demo, syscall.SIGKILL)
	require.Equal(t, http.StatusServiceUnavailable, st, "%s", body)
	assert.Contains(t, string(body), `"code":"device_restarting"`)
	assert.NotEmpty(t, h.Get("Retry-After"))
	assert.Less(t, d, 2*time.Second, "the request in flight fails at once")
	t.Logf("kill -9 during a request: %d after %v: %s", st, d, body)
	status, _ := healthStatus(t, g) // /health answers during the restart
	t.Logf("/health right after: %s", status)

	waitReady(t, g, 60*time.Second)
	st, _, body, err := demoPredict(t, &http.Client{Timeout: 20 * time.Second}, g, demo)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, "%s", body)
	checkGolden(t, body, demo)
	ri = getRunnerInfo(t, g)
	assert.GreaterOrEqual(t, ri.Restarts, 1)
	assert.Contains(t, ri.LastCause, "killed")
	assert.NotEqual(t, 0, ri.PID)
	line := metricLine(t, g, "gateway_device_restarts_total{", `cause="signal"`)
	assert.NotEmpty(t, line, "gateway_device_restarts_total{cause=\"signal\"}")
	t.Logf("metric: %s", line)
	require.NoError(t, g.stop(t))
}

func TestE2ERunnerSIGSTOP(t *testing.T) {
	bin, plugins := buildGateway(t)
	g := startGateway(t, bin, plugins, "--device-runner-ping-interval", "100ms", "--device-runner-ping-timeout", "700ms",
		"--device-runner-call-grace", "300ms")
	demo := getDemo(t, g)
	old := getRunnerInfo(t, g).PID
	st, _, body, d := signalDuringPredict(t, g, demo, syscall.SIGSTOP, "X-Request-Timeout", "1.5")
	assert.Contains(t, []int{http.StatusServiceUnavailable, http.StatusGatewayTimeout}, st, "%s", body)
	assert.Less(t, d, 2*time.Second)
	t.Logf("SIGSTOP during a request: %d after %v: %s", st, d, body)
	waitReady(t, g, 60*time.Second)
	ri := getRunnerInfo(t, g)
	assert.NotEqual(t, old, ri.PID, "the stopped runner was replaced")
	assert.Contains(t, ri.LastCause, "hang")
	assert.Error(t, syscall.Kill(old, 0), "the stopped runner was killed and reaped")
	st, _, body, err := demoPredict(t, &http.Client{Timeout: 20 * time.Second}, g, demo)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, "%s", body)
	checkGolden(t, body, demo)
	require.NoError(t, g.stop(t))
}

// fakeRunner writes a shell script runner that misbehaves.
func fakeRunner(t *testing.T, script string) string {
	p := filepath.Join(t.TempDir(), "runner.sh")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/bash\n"+script+"\n"), 0o755))
	return p
}

func TestE2ERunnerBadStart(t *testing.T) {
	bin, plugins := buildGateway(t)
	root := moduleRoot(t)
	for _, tc := range []struct{ name, script, want string }{
		{"exits", `echo "runner: no device found" >&2; exit 3`, "exit status 3"},
		{"garbage", `printf 'this is not the protocol' >&3; sleep 10`, "protocol"},
		{"wrong_version", `printf 'GRNR\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00{"protocol":9}' >&3; sleep 10`, "protocol version 9, want 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			_, err := tryStartGateway(t, root, bin, plugins, []string{"--device-runner-command", fakeRunner(t, tc.script)})
			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, tc.want)
			assert.NotContains(t, msg, "panic:", "a clean error, no crash")
			assert.NotContains(t, msg, "goroutine ")
			assert.Less(t, time.Since(t0), 30*time.Second)
			t.Logf("%s: %s", tc.name, lastLine(msg))
		})
	}
}

// metricLine returns the first /metrics line starting with prefix and
// containing sub ("" if none).
func metricLine(t testing.TB, g *childGateway, prefix, sub string) string {
	t.Helper()
	resp, err := http.Get(g.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestE2ERunnerGivesUp: a runner that serves once and then fails every
// restart leaves the server not ready with the reason; health and info
// keep answering and predicts get 503.
func TestE2ERunnerGivesUp(t *testing.T) {
	bin, plugins := buildGateway(t)
	marker := filepath.Join(t.TempDir(), "started")
	script := fakeRunner(t, fmt.Sprintf(`if [ -e %q ]; then echo "runner: device lost" >&2; exit 5; fi
touch %q
exec %q runner "$@"`, marker, marker, bin))
	g := startGateway(t, bin, plugins, "--device-runner-command", script, "--device-runner-max-restarts", "2")
	demo := getDemo(t, g)
	pid := getRunnerInfo(t, g).PID
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, code := healthStatus(t, g)
		if st == "failed" {
			assert.Equal(t, http.StatusServiceUnavailable, code)
			break
		}
		require.True(t, time.Now().Before(deadline), "health %s", st)
		time.Sleep(50 * time.Millisecond)
	}
	ri := getRunnerInfo(t, g)
	assert.Contains(t, ri.Reason, "2 consecutive failed restarts")
	assert.Contains(t, ri.Reason, "device lost", "the reason carries the runner's last stderr lines")
	assert.Contains(t, fmt.Sprint(ri.Runners[0].LastStderr), "device lost")
	st, h, body, err := demoPredict(t, &http.Client{Timeout: 10 * time.Second}, g, demo)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, st, "%s", body)
	assert.NotEmpty(t, h.Get("Retry-After"))
	require.NoError(t, g.stop(t))
}

// TestE2ERunnerChaos kills random runners of a two-runner gateway under
// concurrent load: every answer is 200 with actions bit-identical to the
// undisturbed answer (itself within the golden's tolerance) or 503 with
// Retry-After — never a wrong answer, a hang or another 5xx.
func TestE2ERunnerChaos(t *testing.T) {
	dur := 30 * time.Second
	if v := os.Getenv("GR00TGW_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		dur = d
	} else if testing.Short() {
		dur = 5 * time.Second
	}
	bin, plugins := buildGateway(t)
	g := startGateway(t, bin, plugins, "--device-runners", "2", "--queue-depth", "16")
	demo := getDemo(t, g)
	client := &http.Client{Timeout: 30 * time.Second}
	st, _, ref, err := demoPredict(t, client, g, demo)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st)
	refActions := checkGolden(t, ref, demo)
	refJSON, _ := json.Marshal(refActions)

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				st, h, body, err := demoPredict(t, client, g, demo)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("request failed (hang or reset): %v", err)
					counts["error"]++
				case st == http.StatusOK:
					var r struct {
						Actions map[string][][]float64 `json:"actions"`
					}
					if err := json.Unmarshal(body, &r); err != nil {
						t.Errorf("200 with a bad body: %v", err)
					}
					got, _ := json.Marshal(r.Actions)
					if !bytes.Equal(got, refJSON) {
						t.Errorf("200 with actions that differ from the undisturbed answer")
					}
					counts["200"]++
				case st == http.StatusServiceUnavailable && h.Get("Retry-After") != "":
					counts["503"]++
				default:
					t.Errorf("status %d: %s", st, body)
					counts[fmt.Sprint(st)]++
				}
				mu.Unlock()
			}
		}()
	}
	kills := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(200+rand.IntN(800)) * time.Millisecond):
			rs := getRunnerInfo(t, g).Runners
			r := rs[rand.IntN(len(rs))]
			if r.PID != 0 && syscall.Kill(r.PID, syscall.SIGKILL) == nil {
				kills++
			}
		}
	}
	wg.Wait()
	t.Logf("chaos %v: %d kills, answers %v", dur, kills, counts)
	assert.Positive(t, counts["200"])
	waitReady(t, g, 60*time.Second)
	st, _, body, err := demoPredict(t, client, g, demo)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, "%s", body)
	require.NoError(t, g.stop(t))
}

// TestE2ERunnerConformance runs the conformance suite against the built
// `gr00tgw runner` on the tiny checkpoint, the reference being the
// in-process CPU backend on the case-A inputs.
func TestE2ERunnerConformance(t *testing.T) {
	bin, _ := buildGateway(t)
	root := moduleRoot(t)
	tiny := filepath.Join(root, "testdata", "n17-tiny")
	in := caseAInputsAt(t, filepath.Join(tiny, "caseA"))
	be, err := cpu.Open(context.Background(), device.Options{WeightsDir: tiny, Threads: 1}, cpu.DefaultLayout)
	require.NoError(t, err)
	defer be.Close()
	res, err := be.Predict(context.Background(), in)
	require.NoError(t, err)
	o := runnertest.Options{Inputs: in, Want: res.ActionPred}
	t.Run("fd", func(t *testing.T) {
		runnertest.Run(t, runnertest.Exec(bin, "runner", "--fd", "3", "--weights-dir", tiny, "--threads", "1"), o)
	})
	t.Run("socket", func(t *testing.T) {
		// gr00tgw runner --socket PATH: listens, serves its first client.
		runnertest.Run(t, func(t testing.TB) (*net.UnixConn, func()) {
			path := filepath.Join(t.TempDir(), "runner.sock")
			cmd := exec.Command(bin, "runner", "--socket", path, "--weights-dir", tiny, "--threads", "1")
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			stop := func() {
				done := make(chan struct{})
				go func() { _ = cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-done
				}
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
				if err == nil {
					return c, stop
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					stop()
					t.Fatalf("dial %s: %v", path, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}, o)
	})
}

// caseAInputsAt reads the case-A model inputs from dir.
func caseAInputsAt(t testing.TB, dir string) *device.Inputs {
	read := func(name string) *npy.Array {
		a, err := npy.ReadFile(filepath.Join(dir, name+".npy"))
		require.NoError(t, err)
		return a
	}
	i32 := func(name string) []int32 {
		v, err := read(name).Int64s()
		require.NoError(t, err)
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	}
	f32 := func(name string) []float32 {
		v, err := read(name).Float32s()
		require.NoError(t, err)
		return v
	}
	pa := read("pixel_values")
	pix, err := pa.Float32s()
	require.NoError(t, err)
	g := i32("image_grid_thw")
	in := &device.Inputs{PixelValues: pix, PixelRows: pa.Shape[0], PixelCols: pa.Shape[1],
		InputIDs: i32("input_ids"), AttentionMask: i32("attention_mask"), PositionIDs: i32("position_ids"),
		State: f32("state_normalized"), EmbodimentID: 24, Noise: f32("noise")}
	for i := 0; i+3 <= len(g); i += 3 {
		in.ImageGridTHW = append(in.ImageGridTHW, [3]int{int(g[i]), int(g[i+1]), int(g[i+2])})
	}
	return in
}

// TestE2ERunnersThroughput measures /predict throughput of the demo with
// 4 concurrent clients, one runner (all threads) against two (threads
// split), one gateway each, in one run. Opt-in (GR00TGW_BENCH_RUNNERS=1;
// GR00TGW_BENCH_SECONDS, default 15): a figure, not a check.
func TestE2ERunnersThroughput(t *testing.T) {
	if os.Getenv("GR00TGW_BENCH_RUNNERS") == "" {
		t.Skip("opt-in: GR00TGW_BENCH_RUNNERS=1")
	}
	secs := 15
	if v, err := strconv.Atoi(os.Getenv("GR00TGW_BENCH_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	bin, plugins := buildGateway(t)
	rate := map[string]float64{}
	for _, n := range []string{"1", "2", "1", "2"} { // interleaved: the machine's load drifts
		g := startGateway(t, bin, plugins, "--device-runners", n, "--queue-depth", "16")
		demo := getDemo(t, g)
		client := &http.Client{Timeout: 60 * time.Second}
		for range 3 { // warm
			st, _, _, err := demoPredict(t, client, g, demo)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, st)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
		var mu sync.Mutex
		done := 0
		var wg sync.WaitGroup
		t0 := time.Now()
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					st, _, _, err := demoPredict(t, client, g, demo)
					if err == nil && st == http.StatusOK {
						mu.Lock()
						done++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		r := float64(done) / time.Since(t0).Seconds()
		t.Logf("runners %s: %d predicts in %v: %.1f/s", n, done, time.Since(t0).Round(time.Millisecond), r)
		rate[n] += r / 2
		require.NoError(t, g.stop(t))
	}
	t.Logf("throughput, 4 clients, demo: runners 1 %.1f/s, runners 2 %.1f/s (×%.2f)", rate["1"], rate["2"], rate["2"]/rate["1"])
}
