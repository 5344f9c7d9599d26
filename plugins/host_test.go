package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// Hostile guests are built from source (plugins/testdata/hostile) by
// plugintest.BuildGuest; see their package comments.
var (
	misbehave = plugintest.Guest{Dir: "testdata/hostile/misbehave"}
	raw       = plugintest.Guest{Dir: "testdata/hostile/raw"}
)

// slowMisbehave has a 4 s deadline so that memory exhaustion (not the
// deadline) stops the "grow" request even on a loaded machine.
var slowMisbehave = plugintest.Guest{Dir: misbehave.Dir, Manifest: &plugins.Manifest{
	Name: "misbehave", Version: "0.1.0", ABI: 1, Embodiments: []string{"test_misbehave"},
	Limits: plugins.Limits{MaxPages: 256, TimeoutMS: 4000, PoolSize: 1},
}}

func rawWith(tag string) plugintest.Guest { return plugintest.Guest{Dir: raw.Dir, Tags: []string{tag}} }

// recorder is an Observer that records everything.
type recorder struct {
	mu       sync.Mutex
	calls    map[string]int // stage/outcome
	recycled map[string]int // reason
	inUse    int
	maxInUse int
}

func newRecorder() *recorder {
	return &recorder{calls: map[string]int{}, recycled: map[string]int{}}
}

func (r *recorder) CallDone(plugin, stage, outcome string, d time.Duration) {
	r.mu.Lock()
	r.calls[stage+"/"+outcome]++
	r.mu.Unlock()
}

func (r *recorder) Recycled(plugin, reason string) {
	r.mu.Lock()
	r.recycled[reason]++
	r.mu.Unlock()
}

func (r *recorder) PoolInUse(plugin string, n int) {
	r.mu.Lock()
	r.inUse = n
	r.maxInUse = max(r.maxInUse, n)
	r.mu.Unlock()
}

func (r *recorder) get(m map[string]int, k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return m[k]
}

func preIn(instruction string, s0, s1 float64) *plugins.PreInput {
	return &plugins.PreInput{
		Instruction: instruction,
		State:       []plugins.StateGroup{{Key: "s", Values: []float64{s0, s1}}},
		Cameras:     []plugins.Camera{{Key: "cam", Frames: 1, Height: 64, Width: 64}},
	}
}

func postIn(first float32) *plugins.PostInput {
	pred := make([]float32, 4*8)
	for i := range pred {
		pred[i] = float32(i)
	}
	pred[0] = first
	return &plugins.PostInput{ActionPred: pred, Horizon: 4, Dim: 8}
}

func mustPreOK(t *testing.T, p *plugins.Plugin, s0 float64) {
	t.Helper()
	out, err := p.Pre(context.Background(), preIn("ok", s0, 1))
	require.NoError(t, err)
	require.Equal(t, []float32{float32(s0 * 0.5), 0.5, 0, 0, 0, 0, 0, 0}, out.State)
}

func TestLoadRefusals(t *testing.T) {
	tests := []struct {
		name  string
		guest plugintest.Guest
		opts  []plugins.Option
		want  string
	}{
		{"wrong signature", rawWith("wrongsig"), nil,
			"wasm: plugin[raw] export[gw_pre] has signature (i32) -> i64, want (i32,i32) -> i64"},
		{"abi v2", rawWith("abiv2"), nil,
			"wasm: plugin[raw] ABI version mismatch: plugin exports gw_abi_v2, host supports gw_abi_v1"},
		{"no abi marker", rawWith("noabi"), nil,
			"wasm: plugin[raw] does not export gw_abi_v1"},
		{"pages above host max", misbehave, []plugins.Option{plugins.WithHostLimits(128, 0, 0)},
			"wasm: plugin[misbehave] limits.max_pages 256 exceeds the host maximum 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := plugintest.Open(t, tt.guest, tt.opts...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestManifestRefusals(t *testing.T) {
	dir, err := plugintest.Pack(context.Background(), misbehave, t.TempDir())
	require.NoError(t, err)
	mf := filepath.Join(dir, plugins.ManifestFile)
	orig, err := os.ReadFile(mf)
	require.NoError(t, err)
	m, err := plugins.ParseManifest(orig)
	require.NoError(t, err)

	edit := func(t *testing.T, from, to string) {
		t.Helper()
		require.Contains(t, string(orig), from)
		require.NoError(t, os.WriteFile(mf, []byte(strings.Replace(string(orig), from, to, 1)), 0o644))
		t.Cleanup(func() { _ = os.WriteFile(mf, orig, 0o644) })
	}
	open := func() error {
		p, err := plugins.Open(context.Background(), dir, plugintest.DefaultOptions(t)...)
		if err == nil {
			_ = p.Close(context.Background())
		}
		return err
	}
	t.Run("sha256 mismatch", func(t *testing.T) {
		bad := strings.Repeat("0", 64)
		edit(t, m.SHA256, bad)
		require.ErrorContains(t, open(), "wasm: plugin[misbehave] sha256 mismatch: manifest 000000000000…, file "+m.SHA256[:12]+"…")
	})
	t.Run("abi 2", func(t *testing.T) {
		edit(t, "abi: 1", "abi: 2")
		require.ErrorContains(t, open(), "wasm: plugin[misbehave] ABI version mismatch: manifest abi 2, host supports 1")
	})
	t.Run("describe differs", func(t *testing.T) {
		edit(t, "version: 0.1.0", "version: 0.2.0")
		require.ErrorContains(t, open(), `wasm: plugin[misbehave] describe version "0.1.0" differs from the manifest's "0.2.0"`)
	})
	t.Run("embodiment differs", func(t *testing.T) {
		edit(t, "test_misbehave", "oxe_droid_relative_eef_relative_joint")
		require.ErrorContains(t, open(), `describe embodiment "test_misbehave" differs`)
	})
	t.Run("timeout_ms past 2^63 ns", func(t *testing.T) {
		edit(t, fmt.Sprintf("timeout_ms: %d", m.Limits.TimeoutMS), "timeout_ms: 9223372036855") // ×1e6 wraps negative
		require.ErrorContains(t, open(), "wasm: plugin[misbehave] limits.timeout_ms 9223372036855 exceeds the host maximum")
	})
	t.Run("unknown key", func(t *testing.T) {
		edit(t, "abi: 1", "abi: 1\nstages: [pre]")
		require.ErrorContains(t, open(), "field stages not found")
	})
	t.Run("ok", func(t *testing.T) { require.NoError(t, open()) })
}

// TestHostileCalls: each misbehaviour costs exactly one failed request
// with a clear error; the instance is recycled and the next request works.
func TestHostileCalls(t *testing.T) {
	tests := []struct {
		name   string
		guest  plugintest.Guest
		call   func(p *plugins.Plugin) error
		kind   error
		reason string
		msg    string
	}{
		{"infinite loop in pre", misbehave, preCall("hang"), plugins.ErrTimeout, plugins.ReasonTimeout, "pre: plugins: guest call timed out: deadline"},
		{"unbounded memory in pre", slowMisbehave, preCall("grow"), plugins.ErrTrap, plugins.ReasonTrap, "wasm: plugin[misbehave] pre: plugins: guest trapped"},
		{"panic in pre", misbehave, preCall("panic"), plugins.ErrTrap, plugins.ReasonTrap, "guest trapped"},
		{"trap in post", misbehave, func(p *plugins.Plugin) error {
			_, err := p.Post(context.Background(), postIn(42))
			return err
		}, plugins.ErrTrap, plugins.ReasonTrap, "wasm: plugin[misbehave] post: plugins: guest trapped"},
		{"out-of-range pointer", raw, preCall("badptr"), plugins.ErrBadPointer, plugins.ReasonBadPointer, "result [0xffffff00, +64) outside memory"},
		{"oversized length", raw, preCall("badlen"), plugins.ErrBadPointer, plugins.ReasonBadPointer, "result length 2147483632"},
		{"unknown status", raw, preCall("badstatus"), plugins.ErrBadPointer, plugins.ReasonBadPointer, "unknown result status 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			p := plugintest.MustOpen(t, tt.guest, plugins.WithObserver(rec))
			for range 2 { // twice: the replacement instance must work too
				err := tt.call(p)
				require.Error(t, err)
				var ce *plugins.CallError
				require.ErrorAs(t, err, &ce)
				assert.ErrorIs(t, err, tt.kind)
				assert.Contains(t, err.Error(), tt.msg)
				_, err = p.Pre(context.Background(), preIn("ok", 2, 1))
				require.NoError(t, err, "the request after a failure must succeed")
			}
			assert.Equal(t, 2, rec.get(rec.recycled, tt.reason))
		})
	}
}

func preCall(instruction string) func(p *plugins.Plugin) error {
	return func(p *plugins.Plugin) error {
		_, err := p.Pre(context.Background(), preIn(instruction, 1, 1))
		return err
	}
}

func TestGuestErrors(t *testing.T) {
	rec := newRecorder()
	p := plugintest.MustOpen(t, misbehave, plugins.WithObserver(rec))
	_, err := p.Pre(context.Background(), preIn("invalid", 1, 1))
	var ge *plugins.GuestError
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, plugins.GuestError{Plugin: "misbehave", Stage: "pre", Code: "invalid_state", Field: "state.s", Message: "expected 2 values, got 3"}, *ge)
	assert.EqualError(t, err, "plugin[misbehave] pre: invalid_state: state.s: expected 2 values, got 3")
	assert.Zero(t, rec.get(rec.recycled, plugins.ReasonPluginError), "validation errors keep the instance")

	_, err = p.Pre(context.Background(), preIn("fail", 1, 1))
	require.ErrorAs(t, err, &ge)
	assert.True(t, ge.Internal)
	assert.Equal(t, "plugin_error", ge.Code)
	assert.Equal(t, 1, rec.get(rec.recycled, plugins.ReasonPluginError))

	_, err = p.Post(context.Background(), &plugins.PostInput{ActionPred: []float32{1, 2, 3}, Horizon: 2, Dim: 2})
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, "invalid_action", ge.Code)

	mustPreOK(t, p, 3)
	out, err := p.Post(context.Background(), postIn(7))
	require.NoError(t, err)
	require.Equal(t, []plugins.ActionGroup{{Key: "a", Horizon: 4, Dim: 2, Values: []float32{7, 1, 8, 9, 16, 17, 24, 25}}}, out.Actions)
	assert.Equal(t, 1, rec.get(rec.calls, "post/ok"))
}

func TestPoolExhausted(t *testing.T) {
	rec := newRecorder()
	p := plugintest.MustOpen(t, plugintest.Guest{Dir: misbehave.Dir, Manifest: &plugins.Manifest{
		Name: "misbehave", Version: "0.1.0", ABI: 1, Embodiments: []string{"test_misbehave"},
		Limits: plugins.Limits{MaxPages: 256, TimeoutMS: 250, PoolSize: 1},
	}}, plugins.WithObserver(rec))
	done := make(chan error)
	go func() { done <- preCall("hang")(p) }()
	require.Eventually(t, func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.inUse == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := p.Pre(ctx, preIn("ok", 1, 1))
	require.ErrorIs(t, err, plugins.ErrPoolExhausted)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "plugin[misbehave] all 1 instances busy")
	require.ErrorIs(t, <-done, plugins.ErrTimeout)
	mustPreOK(t, p, 1)
}

func TestRecycleMaxCallsAndMemory(t *testing.T) {
	rec := newRecorder()
	p := plugintest.MustOpen(t, misbehave, plugins.WithObserver(rec), plugins.WithRecycle(3, 0))
	for i := range 7 {
		mustPreOK(t, p, float64(i))
	}
	// pool of 2, round robin is not guaranteed: at least one instance
	// reached 3 calls.
	assert.GreaterOrEqual(t, rec.get(rec.recycled, plugins.ReasonMaxCalls), 1)

	rec2 := newRecorder()
	p2 := plugintest.MustOpen(t, misbehave, plugins.WithObserver(rec2), plugins.WithRecycle(0, 1))
	mustPreOK(t, p2, 1)
	mustPreOK(t, p2, 2)
	assert.Equal(t, 2, rec2.get(rec2.recycled, plugins.ReasonMemory))
}

// logCapture is a slog handler that keeps records.
type logCapture struct {
	mu   sync.Mutex
	recs []string
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	s := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	h.mu.Lock()
	h.recs = append(h.recs, s)
	h.mu.Unlock()
	return nil
}
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

func TestGuestOutputToSlog(t *testing.T) {
	h := &logCapture{}
	p := plugintest.MustOpen(t, misbehave, plugins.WithLogger(slog.New(h)), plugins.WithStdioLimit(12))
	_, err := p.Pre(context.Background(), preIn("log", 1, 1))
	require.NoError(t, err)
	h.mu.Lock()
	logs := strings.Join(h.recs, "\n")
	h.mu.Unlock()
	assert.Contains(t, logs, "INFO misbehave: h plugin=misbehave stream=stdio", "stdout captured and capped at 12 bytes")
	assert.Contains(t, logs, "WARN misbehave: h plugin=misbehave", "gw_host.log capped at 12 bytes")

	// gw_host.log in a loop: one call logs its budget, not 80 MB.
	h.mu.Lock()
	h.recs = nil
	h.mu.Unlock()
	_, err = p.Pre(context.Background(), preIn("logflood", 1, 1))
	require.NoError(t, err)
	h.mu.Lock()
	logs = strings.Join(h.recs, "\n")
	h.mu.Unlock()
	assert.Less(t, len(logs), 1<<10, "gw_host.log budget per call")
	_, err = p.Pre(context.Background(), preIn("ok", 1, 1)) // reports the last call's drops
	require.NoError(t, err)
	h.mu.Lock()
	logs = strings.Join(h.recs, "\n")
	h.mu.Unlock()
	// 20,000 lines, each read up to the 12-byte limit, one of them logged.
	assert.Contains(t, logs, "guest output truncated plugin=misbehave dropped_bytes=239988")
}

// TestHammer: many goroutines × many calls through a small pool; every
// answer must be the one for its own input (no instance shared between two
// calls). Run with -race.
func TestHammer(t *testing.T) {
	rec := newRecorder()
	p := plugintest.MustOpen(t, misbehave, plugins.WithObserver(rec))
	P, N := 16, 100
	if testing.Short() {
		N = 20
	}
	var wg sync.WaitGroup
	errs := make(chan error, P)
	for g := range P {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range N {
				v := float64(g*1000 + i + 100) // never 42 (the post trap trigger)
				out, err := p.Pre(context.Background(), preIn("ok", v, 2))
				if err != nil {
					errs <- err
					return
				}
				if out.State[0] != float32(v*0.5) || out.State[1] != 1 {
					errs <- fmt.Errorf("goroutine %d call %d: got %v", g, i, out.State[:2])
					return
				}
				po, err := p.Post(context.Background(), postIn(float32(v)))
				if err != nil {
					errs <- err
					return
				}
				if po.Actions[0].Values[0] != float32(v) {
					errs <- fmt.Errorf("goroutine %d call %d: post got %v", g, i, po.Actions[0].Values[0])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.LessOrEqual(t, rec.maxInUse, p.PoolSize())
	assert.Equal(t, P*N, rec.get(rec.calls, "pre/ok"))
}

func TestClosed(t *testing.T) {
	p := plugintest.MustOpen(t, misbehave)
	require.NoError(t, p.Close(context.Background()))
	_, err := p.Pre(context.Background(), preIn("ok", 1, 1))
	require.ErrorIs(t, err, plugins.ErrClosed)
	require.NoError(t, p.Close(context.Background()), "idempotent")
}

var _ = errors.Is
