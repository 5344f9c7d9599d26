//go:build linux

package runner_test

// Tests of the Go runner (Serve) and the supervising client (runner.Pool) on the
// tiny checkpoint (testdata/n17-tiny) with the case-A golden inputs. The
// runner processes are this test binary re-executed (TestMain, helper
// modes selected by GR00TGW_RUNNER_HELPER): "serve" hosts the CPU backend,
// the others misbehave on purpose (exit at start, garbage, wrong protocol
// version, hang after HELLO).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	"github.com/gr00tgw/gr00tgw/device/runner"
	"github.com/gr00tgw/gr00tgw/device/runnertest"
)

const (
	tinyDir = "../../testdata/n17-tiny"
	caseA   = tinyDir + "/caseA"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("GR00TGW_RUNNER_HELPER"); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is the runner process of the tests.
func helper(mode string) int {
	f := os.NewFile(3, "runner-socket")
	c, err := net.FileConn(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	uc := c.(*net.UnixConn)
	w := runner.NewWire(uc)
	if once := os.Getenv("GR00TGW_RUNNER_HELPER_ONCE"); once != "" {
		// Serve the first time only: later starts exit (failed restarts).
		if _, err := os.Stat(once); err == nil {
			fmt.Fprintln(os.Stderr, "helper: refusing to start again")
			return 7
		}
		_ = os.WriteFile(once, nil, 0o644)
	}
	if strings.HasPrefix(mode, "fake-") {
		return fakeRunner(mode, w)
	}
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "helper: cannot open the device")
		return 3
	case "garbage":
		_ = w.SendRaw([]byte("this is not the runner protocol"))
		time.Sleep(time.Minute)
		return 0
	case "null":
		// A backend that answers at once: the protocol's own cost.
		l := runner.Layout{MaxPatches: 1792, MaxImages: 4, MaxSeq: 512, PixelCols: 1536, StateDim: 132, ActionHorizon: 40, ActionDim: 132}
		if err := runner.Serve(context.Background(), uc, nullBackend{l}, runner.ServeOptions{Layout: l, Runner: "null"}); err != nil {
			return 1
		}
		return 0
	case "version":
		_ = w.Send(runner.MsgHello, 0, runner.HelloBody{Protocol: runner.ProtocolVersion + 1, PID: os.Getpid()}, -1)
		time.Sleep(time.Minute)
		return 0
	}
	be, err := cpu.Open(context.Background(), device.Options{WeightsDir: tinyDir, Threads: 1}, cpu.DefaultLayout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 4
	}
	defer be.Close()
	if mode == "hang" {
		_ = w.Send(runner.MsgHello, 0, runner.HelloBody{Protocol: runner.ProtocolVersion, PID: os.Getpid(), Facts: runner.Facts{Backend: "cpu", Stages: be.Facts().Stages}, Layout: tinyLayout(be)}, -1)
		select {}
	}
	if err := runner.Serve(context.Background(), uc, be, runner.ServeOptions{Layout: tinyLayout(be), Runner: "runner_test"}); err != nil {
		return 1
	}
	return 0
}

// nullBackend answers every Predict at once with zeros.
type nullBackend struct{ l runner.Layout }

func (b nullBackend) Predict(_ context.Context, in *device.Inputs) (*device.Result, error) {
	return &device.Result{ActionPred: make([]float32, b.l.ActionHorizon*b.l.ActionDim), Horizon: b.l.ActionHorizon,
		ActionDim: b.l.ActionDim, Stages: []device.StageTiming{{Name: device.StageVision}}}, nil
}
func (b nullBackend) Facts() device.Facts {
	return device.Facts{Backend: "null", Stages: []string{device.StageVision}, MaxSeqLen: b.l.MaxSeq, MaxImages: b.l.MaxImages, MaxPatches: b.l.MaxPatches}
}
func (b nullBackend) Close() error { return nil }

func tinyLayout(be *cpu.Backend) runner.Layout {
	cfg, f := be.Config(), be.Facts()
	return runner.Layout{MaxPatches: f.MaxPatches, MaxImages: f.MaxImages, MaxSeq: f.MaxSeqLen, PixelCols: cfg.Backbone.Vision.PatchDim(),
		StateDim: cfg.MaxStateDim, ActionHorizon: cfg.ActionHorizon, ActionDim: cfg.MaxActionDim}
}

func npyOf(t testing.TB, name string) *npy.Array {
	a, err := npy.ReadFile(filepath.Join(caseA, name+".npy"))
	require.NoError(t, err)
	return a
}

func i32s(t testing.TB, name string) []int32 {
	v, err := npyOf(t, name).Int64s()
	require.NoError(t, err)
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func f32s(t testing.TB, name string) []float32 {
	v, err := npyOf(t, name).Float32s()
	require.NoError(t, err)
	return v
}

// caseAInputs are the DROID demo's model inputs (1,792 patch rows, 469
// tokens).
func caseAInputs(t testing.TB) *device.Inputs {
	pa := npyOf(t, "pixel_values")
	pix, err := pa.Float32s()
	require.NoError(t, err)
	g := i32s(t, "image_grid_thw")
	in := &device.Inputs{PixelValues: pix, PixelRows: pa.Shape[0], PixelCols: pa.Shape[1],
		InputIDs: i32s(t, "input_ids"), AttentionMask: i32s(t, "attention_mask"),
		PositionIDs: i32s(t, "position_ids"), State: f32s(t, "state_normalized"),
		EmbodimentID: 24, Noise: f32s(t, "noise")}
	for i := 0; i+3 <= len(g); i += 3 {
		in.ImageGridTHW = append(in.ImageGridTHW, [3]int{int(g[i]), int(g[i+1]), int(g[i+2])})
	}
	return in
}

var (
	refOnce sync.Once
	refBE   *cpu.Backend
	refErr  error
)

// reference is the in-process backend and its answer to in.
func reference(t testing.TB, in *device.Inputs) []float32 {
	refOnce.Do(func() {
		refBE, refErr = cpu.Open(context.Background(), device.Options{WeightsDir: tinyDir, Threads: 1}, cpu.DefaultLayout)
	})
	require.NoError(t, refErr)
	res, err := refBE.Predict(context.Background(), in)
	require.NoError(t, err)
	return res.ActionPred
}

// TestConformanceInProcess runs the conformance suite against Serve in a
// goroutine over a socket pair (with -race, the server side's races).
func TestConformanceInProcess(t *testing.T) {
	in := caseAInputs(t)
	runnertest.Run(t, serveInProcess, runnertest.Options{Inputs: in, Want: reference(t, in)})
}

// serveInProcess is a runnertest.StartFunc: Serve of the reference backend
// in a goroutine over a socket pair.
func serveInProcess(t testing.TB) (*net.UnixConn, func()) {
	c, rf, err := runner.SocketPair()
	require.NoError(t, err)
	sc, err := net.FileConn(rf)
	require.NoError(t, err)
	_ = rf.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Serve(context.Background(), sc.(*net.UnixConn), refBE, runner.ServeOptions{Layout: tinyLayout(refBE), Runner: "in-process"})
		_ = sc.Close()
	}()
	return c, func() { <-done }
}

// TestConformanceProcess runs the suite against a runner process.
func TestConformanceProcess(t *testing.T) {
	in := caseAInputs(t)
	want := reference(t, in)
	t.Setenv("GR00TGW_RUNNER_HELPER", "serve")
	requireSelfExec(t)
	runnertest.Run(t, runnertest.Exec(os.Args[0]), runnertest.Options{Inputs: in, Want: want})
}

var selfExec = sync.OnceValue(func() error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GR00TGW_RUNNER_HELPER=")
	return cmd.Run()
})

// requireSelfExec skips a test whose runners are this test binary started
// again when the binary cannot exec itself: an arm64 binary under
// qemu-user (make test-arm64) without a binfmt_misc entry for it gets
// ENOEXEC. Any other failure is the test's to report.
func requireSelfExec(t testing.TB) {
	t.Helper()
	if err := selfExec(); errors.Is(err, syscall.ENOEXEC) {
		t.Skipf("SKIPPED: the runner helper is this test binary, which cannot exec itself here (%v: qemu-user without binfmt_misc for this architecture)", err)
	}
}

// openPool opens a pool of n helper runners in mode.
func openPool(t testing.TB, mode string, n int, o runner.Options) (*runner.Pool, error) {
	requireSelfExec(t)
	o.Command = []string{os.Args[0]}
	o.Env = append(os.Environ(), "GR00TGW_RUNNER_HELPER="+mode)
	o.Runners = n
	o.Backend, o.Device = "cpu", device.Options{WeightsDir: tinyDir, Threads: 1}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	o.Stderr = testWriter{t}
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	return runner.Open(context.Background(), o)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("runner: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fdCount is the number of open descriptors of this process.
func fdCount(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// memfdMaps counts this process's mappings of runner segments.
func memfdMaps(t testing.TB) int {
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return strings.Count(string(b), "gr00tgw-runner-")
}

// checkLeaks records the descriptors, goroutines and segment mappings now
// and checks at cleanup that they came back.
func checkLeaks(t *testing.T) {
	fds, gs, maps := fdCount(t), runtime.NumGoroutine(), memfdMaps(t)
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			nf, ng, nm := fdCount(t), runtime.NumGoroutine(), memfdMaps(t)
			if nf <= fds && ng <= gs && nm <= maps {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				n := runtime.Stack(buf, true)
				t.Errorf("leak: fds %d → %d, goroutines %d → %d, segment maps %d → %d\n%s", fds, nf, gs, ng, maps, nm, buf[:n])
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func bitsEqual(t testing.TB, want, got []float32) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("action_pred[%d] = %v, want %v (bit-identical to in-process)", i, got[i], want[i])
		}
	}
}

// predictInPlace writes in's pixels into a PixelBuffer (as the encoder
// does) and predicts.
func predictInPlace(ctx context.Context, p *runner.Pool, in *device.Inputs) (*device.Result, error) {
	buf, release, ok := p.PixelBuffer()
	if !ok {
		return nil, errors.New("no pixel buffer")
	}
	defer release()
	x := *in
	x.PixelValues = buf[:len(in.PixelValues)]
	copy(x.PixelValues, in.PixelValues)
	return p.Predict(ctx, &x)
}

func TestPoolBitIdenticalNoCopy(t *testing.T) {
	in := caseAInputs(t)
	want := reference(t, in)
	checkLeaks(t)
	p, err := openPool(t, "serve", 1, runner.Options{})
	require.NoError(t, err)
	defer p.Close()

	buf, release, ok := p.PixelBuffer()
	require.True(t, ok)
	x := *in
	x.PixelValues = buf[:len(in.PixelValues)]
	copy(x.PixelValues, in.PixelValues)
	assert.True(t, p.InPlace(x.PixelValues), "a PixelBuffer lies in a shared segment")
	assert.False(t, p.InPlace(in.PixelValues), "a heap slice does not")
	res, err := p.Predict(context.Background(), &x)
	release()
	require.NoError(t, err)
	bitsEqual(t, want, res.ActionPred)
	assert.Equal(t, int64(0), p.Copies(), "pixel_values from PixelBuffer are not copied")

	res, err = p.Predict(context.Background(), in) // heap pixels: copied once into a segment
	require.NoError(t, err)
	bitsEqual(t, want, res.ActionPred)
	assert.Equal(t, int64(1), p.Copies())
	sv := p.Supervision()
	assert.True(t, sv.Serving)
	assert.Equal(t, "process", p.Facts().Extra["isolation"])
}

// goldenGate is a gate that predicts in on the device and checks the bits.
func goldenGate(in *device.Inputs, want []float32, n *int) device.GateFunc {
	return func(ctx context.Context, b device.Backend) error {
		*n++
		res, err := b.Predict(ctx, in)
		if err != nil {
			return err
		}
		for i := range want {
			if math.Float32bits(res.ActionPred[i]) != math.Float32bits(want[i]) {
				return fmt.Errorf("action_pred[%d] = %v, want %v", i, res.ActionPred[i], want[i])
			}
		}
		return nil
	}
}

// waitServing waits until the pool serves again.
func waitServing(t testing.TB, p *runner.Pool, within time.Duration) device.Supervision {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		sv := p.Supervision()
		if sv.Serving {
			return sv
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool not serving after %v: %+v", within, sv)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killDuringPredict signals the runner while a predict runs, until one
// predict fails because of it; it returns that error and how long the
// failure took after the signal.
func killDuringPredict(t testing.TB, p *runner.Pool, in *device.Inputs, sig syscall.Signal, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		pid := p.Supervision().Runners[0].PID
		require.NotZero(t, pid)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		errc := make(chan error, 1)
		go func() {
			_, err := predictInPlace(ctx, p, in)
			errc <- err
		}()
		time.Sleep(time.Duration(2+attempt) * time.Millisecond)
		t0 := time.Now()
		require.NoError(t, syscall.Kill(pid, sig))
		err := <-errc
		d := time.Since(t0)
		cancel()
		if err != nil {
			return d, err
		}
		waitServing(t, p, 20*time.Second) // the predict won the race: again
	}
	t.Fatal("no predict was hit by the signal in 20 attempts")
	return 0, nil
}

func TestPoolKill9(t *testing.T) {
	in := caseAInputs(t)
	want := reference(t, in)
	checkLeaks(t)
	p, err := openPool(t, "serve", 1, runner.Options{BackoffMin: 10 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	gated := 0
	require.NoError(t, p.SetGate(context.Background(), goldenGate(in, want, &gated)))
	require.Equal(t, 1, gated)

	d, err := killDuringPredict(t, p, in, syscall.SIGKILL, 30*time.Second)
	require.ErrorIs(t, err, device.ErrRestarting)
	assert.Less(t, d, 2*time.Second, "the request in flight fails at once")
	t.Logf("kill -9 → %v after %v", err, d)
	// A request while restarting fails at once, without waiting.
	if !p.Supervision().Serving {
		_, err := p.Predict(context.Background(), in)
		assert.ErrorIs(t, err, device.ErrRestarting)
	}
	sv := waitServing(t, p, 20*time.Second)
	r := sv.Runners[0]
	assert.GreaterOrEqual(t, r.Restarts, 1)
	assert.Equal(t, "signal", r.LastCauseKind, r.LastCause)
	assert.Contains(t, r.LastCause, "killed")
	assert.GreaterOrEqual(t, gated, 2, "the restarted runner was gated")
	res, err := predictInPlace(context.Background(), p, in)
	require.NoError(t, err)
	bitsEqual(t, want, res.ActionPred)
}

func TestPoolSIGSTOP(t *testing.T) {
	in := caseAInputs(t)
	want := reference(t, in)
	checkLeaks(t)
	p, err := openPool(t, "serve", 1, runner.Options{BackoffMin: 10 * time.Millisecond, PingInterval: 50 * time.Millisecond,
		PingTimeout: 300 * time.Millisecond, CallGrace: 200 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	d, err := killDuringPredict(t, p, in, syscall.SIGSTOP, time.Second)
	require.Error(t, err)
	assert.True(t, errors.Is(err, device.ErrRestarting) || errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Less(t, d, 2*time.Second)
	t.Logf("SIGSTOP → %v after %v", err, d)
	sv := waitServing(t, p, 20*time.Second)
	assert.Equal(t, "hang", sv.Runners[0].LastCauseKind, sv.Runners[0].LastCause)
	res, err := predictInPlace(context.Background(), p, in)
	require.NoError(t, err)
	bitsEqual(t, want, res.ActionPred)
}

func TestPoolStartFailures(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"exit", "exit status 3"},
		{"garbage", "protocol"},
		{"version", "protocol version 2, want 1"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			checkLeaks(t)
			t0 := time.Now()
			p, err := openPool(t, tc.mode, 1, runner.Options{StartTimeout: 10 * time.Second})
			require.Error(t, err)
			assert.Nil(t, p)
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, time.Since(t0), 5*time.Second)
			t.Logf("%s: %v", tc.mode, err)
		})
	}
	t.Run("exit_stderr", func(t *testing.T) {
		_, err := openPool(t, "exit", 1, runner.Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cannot open the device", "the runner's last stderr lines")
	})
}

func TestPoolMaxRestarts(t *testing.T) {
	in := caseAInputs(t)
	_ = reference(t, in)
	checkLeaks(t)
	t.Setenv("GR00TGW_RUNNER_HELPER_ONCE", filepath.Join(t.TempDir(), "started"))
	p, err := openPool(t, "serve", 1, runner.Options{BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, MaxRestarts: 3})
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, syscall.Kill(p.Supervision().Runners[0].PID, syscall.SIGKILL))
	deadline := time.Now().Add(20 * time.Second)
	for !p.Supervision().Failed {
		require.True(t, time.Now().Before(deadline), "not failed: %+v", p.Supervision())
		time.Sleep(10 * time.Millisecond)
	}
	sv := p.Supervision()
	assert.False(t, sv.Serving)
	assert.Contains(t, sv.Reason, "3 consecutive failed restarts")
	assert.Equal(t, "failed", sv.Runners[0].State)
	_, err = p.Predict(context.Background(), in)
	assert.ErrorIs(t, err, device.ErrRestarting)
}

// TestPoolTwoRunnersUnderKills: two runners, concurrent callers, one
// runner killed now and then: every answer is bit-identical or
// ErrRestarting, never another error.
func TestPoolTwoRunnersUnderKills(t *testing.T) {
	in := caseAInputs(t)
	want := reference(t, in)
	checkLeaks(t)
	p, err := openPool(t, "serve", 2, runner.Options{BackoffMin: 10 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, 2, p.Slots())
	stop := time.Now().Add(3 * time.Second)
	if testing.Short() {
		stop = time.Now().Add(time.Second)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, restarting := 0, 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				res, err := predictInPlace(context.Background(), p, in)
				mu.Lock()
				switch {
				case err == nil:
					for i := range want {
						if math.Float32bits(res.ActionPred[i]) != math.Float32bits(want[i]) {
							t.Errorf("wrong answer at %d", i)
							break
						}
					}
					ok++
				case errors.Is(err, device.ErrRestarting):
					restarting++
				default:
					t.Errorf("unexpected error: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	for time.Now().Before(stop) {
		time.Sleep(300 * time.Millisecond)
		r := p.Supervision().Runners[1]
		if r.PID != 0 {
			_ = syscall.Kill(r.PID, syscall.SIGKILL)
		}
	}
	wg.Wait()
	t.Logf("ok %d, restarting %d, runner[1] restarts %d", ok, restarting, p.Supervision().Runners[1].Restarts)
	assert.Positive(t, ok)
}

// BenchmarkPredict compares, in one run, the in-process CPU backend with
// the same backend behind a runner process (pixel_values written in place
// into the shared segment, as the gateway's encoder does), on the case-A
// inputs of the tiny checkpoint, one thread each. On a shared machine the
// model's own time varies by milliseconds, so each reports
// overhead-µs/op: wall time minus the stages' time the backend measured
// (for the runner: the protocol, the small tensors' copies into the
// segment, action_pred's copy out, two context switches). "null" is a
// runner whose backend answers at once: the protocol round trip alone.
//
//	go test ./device/runner/ -run '^$' -bench Predict -benchtime 200x -count 5
func BenchmarkPredict(b *testing.B) {
	in := caseAInputs(b)
	_ = reference(b, in)
	stagesOf := func(r *device.Result) (d time.Duration) {
		for _, s := range r.Stages {
			d += s.Duration
		}
		return d
	}
	b.Run("inproc", func(b *testing.B) {
		b.ReportAllocs()
		var over time.Duration
		for b.Loop() {
			t0 := time.Now()
			r, err := refBE.Predict(context.Background(), in)
			if err != nil {
				b.Fatal(err)
			}
			over += time.Since(t0) - stagesOf(r)
		}
		b.ReportMetric(float64(over.Microseconds())/float64(b.N), "overhead-µs/op")
	})
	for _, mode := range []string{"serve", "null"} {
		name := map[string]string{"serve": "runner", "null": "null"}[mode]
		b.Run(name, func(b *testing.B) {
			p, err := openPool(b, mode, 1, runner.Options{})
			require.NoError(b, err)
			defer p.Close()
			buf, release, ok := p.PixelBuffer()
			require.True(b, ok)
			defer release()
			x := *in
			x.PixelValues = buf[:len(in.PixelValues)]
			copy(x.PixelValues, in.PixelValues)
			b.ReportAllocs()
			var over time.Duration
			for b.Loop() {
				t0 := time.Now()
				r, err := p.Predict(context.Background(), &x)
				if err != nil {
					b.Fatal(err)
				}
				over += time.Since(t0) - stagesOf(r)
			}
			b.ReportMetric(float64(over.Microseconds())/float64(b.N), "overhead-µs/op")
			if p.Copies() != 0 {
				b.Fatalf("%d pixel_values copies", p.Copies())
			}
		})
	}
}

// TestPoolInputOverLayout: inputs larger than the segment's layout are an
// input error (device.ErrInput), before anything reaches the runner.
func TestPoolInputOverLayout(t *testing.T) {
	in := caseAInputs(t)
	_ = reference(t, in)
	checkLeaks(t)
	p, err := openPool(t, "serve", 1, runner.Options{})
	require.NoError(t, err)
	defer p.Close()
	x := *in
	x.InputIDs = make([]int32, p.Layout().MaxSeq+1)
	_, err = p.Predict(context.Background(), &x)
	require.ErrorIs(t, err, device.ErrInput)
	x = *in
	x.PixelValues = make([]float32, (p.Layout().MaxPatches+1)*p.Layout().PixelCols)
	_, err = p.Predict(context.Background(), &x)
	require.ErrorIs(t, err, device.ErrInput)
	res, err := p.Predict(context.Background(), in) // still serving
	require.NoError(t, err)
	bitsEqual(t, reference(t, in), res.ActionPred)
}
