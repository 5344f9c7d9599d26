package httpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gr00tgw/gr00tgw/service"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device"
)

// supervisedBackend is a fakeBackend with the runner pool's optional
// interfaces: two slots, a supervision snapshot the test sets, a gate.
type supervisedBackend struct {
	*fakeBackend
	mu     sync.Mutex
	sv     device.Supervision
	gated  atomic.Int32
	down   atomic.Bool
	slotsN int
}

func (b *supervisedBackend) Slots() int { return b.slotsN }

func (b *supervisedBackend) Supervision() device.Supervision {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sv
}

func (b *supervisedBackend) set(sv device.Supervision) {
	b.mu.Lock()
	b.sv = sv
	b.mu.Unlock()
}

func (b *supervisedBackend) SetGate(ctx context.Context, gate device.GateFunc) error {
	b.gated.Add(1)
	return gate(ctx, b.fakeBackend) // the gate predicts on "the device"
}

func (b *supervisedBackend) Predict(ctx context.Context, in *device.Inputs) (*device.Result, error) {
	if b.down.Load() {
		return nil, fmt.Errorf("%w: runner[0] went away: signal killed", device.ErrRestarting)
	}
	return b.fakeBackend.Predict(ctx, in)
}

var _ device.Supervised = (*supervisedBackend)(nil)

func TestSupervisedBackend(t *testing.T) {
	sb := &supervisedBackend{fakeBackend: &fakeBackend{}, slotsN: 2,
		sv: device.Supervision{Serving: true, Runners: []device.RunnerStatus{{Index: 0, PID: 42, State: "ok"}}}}
	f := newFixture(t, true, func(_ *config.Config, _ *fixtureOptions, f *fixture) { f.deps.Backend = sb })
	assert.Equal(t, int32(1), sb.gated.Load(), "Start gates the devices once warmed up")
	assert.Equal(t, 2, f.core.DeviceSlots(), "one device slot per runner")
	body := mustJSON(t, demoRequest(t))

	health := func() (string, int) {
		resp, b := f.do(t, http.MethodGet, "/health", nil, nil)
		var h struct{ Status string }
		require.NoError(t, json.Unmarshal(b, &h))
		r2, _ := f.do(t, http.MethodGet, "/v2/health/ready", nil, nil)
		_ = resp
		return h.Status, r2.StatusCode
	}
	st, code := health()
	assert.Equal(t, "ok", st)
	assert.Equal(t, http.StatusOK, code)

	// The runner goes away: the request in flight and new ones get 503
	// device_restarting; health says starting; readiness 503.
	sb.down.Store(true)
	sb.set(device.Supervision{Reason: "runner[0] restarting after signal killed",
		Runners: []device.RunnerStatus{{Index: 0, State: "restarting", Restarts: 1, LastCause: "signal killed",
			RestartsByCause: map[string]int{"signal": 1}, Since: time.Now()}}})
	resp, b := f.do(t, http.MethodPost, "/predict", body, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"code":"device_restarting"`)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	st, code = health()
	assert.Equal(t, "starting", st)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	_, ib := f.do(t, http.MethodGet, "/info", nil, nil)
	var info struct {
		Runner map[string]any `json:"runner"`
	}
	require.NoError(t, json.Unmarshal(ib, &info))
	assert.Equal(t, "process", info.Runner["isolation"])
	assert.Equal(t, float64(1), info.Runner["restarts"])
	assert.Equal(t, "signal killed", info.Runner["last_cause"])

	// Gave up: failed, with the reason; health and info keep answering.
	sb.set(device.Supervision{Failed: true, Reason: "runner[0] failed: 5 consecutive failed restarts",
		Runners: []device.RunnerStatus{{Index: 0, State: "failed"}}})
	st, code = health()
	assert.Equal(t, "failed", st)
	assert.Equal(t, http.StatusServiceUnavailable, code)

	// Back: ready, predicts served.
	sb.down.Store(false)
	sb.set(device.Supervision{Serving: true, Runners: []device.RunnerStatus{{Index: 0, PID: 43, State: "ok", Restarts: 1}}})
	st, code = health()
	assert.Equal(t, "ok", st)
	assert.Equal(t, http.StatusOK, code)
	resp, b = f.do(t, http.MethodPost, "/predict", body, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
}

// multiDevice is a gated backend of n devices: SetGate runs the gate on
// each; Predict through the pool counts apart from each device's calls.
type multiDevice struct {
	*fakeBackend // the pool's own Predict
	devs         []*fakeBackend
}

func (b *multiDevice) Supervision() device.Supervision {
	return device.Supervision{Serving: true, Runners: []device.RunnerStatus{{Index: 0, State: "ok"}, {Index: 1, State: "ok"}}}
}

func (b *multiDevice) SetGate(ctx context.Context, gate device.GateFunc) error {
	for _, d := range b.devs {
		if err := gate(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// TestStartWarmsEachDeviceOnce: with a supervised backend the default
// embodiment's start warm-up is the device gate — warmup_runs predictions
// on each device, none more through the pool (it was both: the warm-up
// through the pool, then the gate again on the same device, ~30 s more per
// start at real size) — and the warm-up report is recorded.
func TestStartWarmsEachDeviceOnce(t *testing.T) {
	md := &multiDevice{fakeBackend: &fakeBackend{}, devs: []*fakeBackend{{}, {}}}
	var runs int
	f := newFixture(t, true, func(c *config.Config, _ *fixtureOptions, f *fixture) {
		c.WarmupRuns = 2
		runs = c.WarmupRuns
		f.deps.Backend = md
	})
	f.core.WaitBound(context.Background())
	def := status(f, droidInfo.Name)
	require.NotNil(t, def)
	assert.Equal(t, int64(0), md.calls.Load(), "no default warm-up through the pool")
	for i, d := range md.devs {
		assert.Equal(t, int64(runs), d.calls.Load(), "device %d warmed up once (warmup_runs predictions)", i)
	}
	assert.Equal(t, runs, def.Warmup.Runs, "the warm-up report is recorded")
	assert.Len(t, def.Warmup.LatencyMS, runs)
}

// keptGate is a gated backend that keeps its gate, so a test can run it
// as the supervisor does on a restarted device.
type keptGate struct {
	*fakeBackend
	mu   sync.Mutex
	gate device.GateFunc
}

func (b *keptGate) SetGate(ctx context.Context, gate device.GateFunc) error {
	b.mu.Lock()
	b.gate = gate
	b.mu.Unlock()
	return gate(ctx, b.fakeBackend)
}

// TestRestartGateUsesReloadedDefault: after a reload replaced the default
// embodiment's plugin (the old one closed), a restarted device is gated
// with the binding served now; gating with the start-time one would fail on
// its closed plugin and fail every restart.
func TestRestartGateUsesReloadedDefault(t *testing.T) {
	kg := &keptGate{fakeBackend: &fakeBackend{}}
	f := newFixture(t, true, func(_ *config.Config, _ *fixtureOptions, f *fixture) { f.deps.Backend = kg })
	kg.mu.Lock()
	gate := kg.gate
	kg.mu.Unlock()
	require.NotNil(t, gate, "start set the gate")

	info := droidInfo
	info.PluginVersion = "9.9.9"
	b := droidBinding(t, &fakeEmbodiment{info: info}, f.enc)
	b.SHA256 = "sha-droid-2"
	f.catalog.put(droidInfo.Name, b)
	_, err := f.core.Reload(context.Background())
	require.NoError(t, err)
	require.Equal(t, "9.9.9", defaultContract(t, f).Info.PluginVersion)
	// The start-time plugin is closed now: its calls fail.
	f.emb.preErr = errors.New("plugin closed")

	require.NoError(t, gate(context.Background(), kg.fakeBackend), "a restarted device is gated with the served default")
}

// slottedGater is a two-slot backend whose SetGate records the gate (the
// test runs it on a "restarted runner" of its own).
type slottedGater struct {
	*fakeBackend
	gate device.GateFunc
}

func (b *slottedGater) Slots() int { return 2 }
func (b *slottedGater) SetGate(ctx context.Context, gate device.GateFunc) error {
	b.gate = gate
	return gate(ctx, b.fakeBackend)
}

// TestInternalPredictionsUnderLoad: with clients filling the device slots
// and queue_depth, a reload's warm-up waits its turn instead of being
// refused as queue_full (which refused a valid plugin), and the gate of a
// restarted runner (out of rotation: no client waits for it) runs at once
// without a slot (its failures under load killed good runners until the
// pool gave up on them).
func TestInternalPredictionsUnderLoad(t *testing.T) {
	sg := &slottedGater{fakeBackend: &fakeBackend{}}
	f := newFixture(t, true, func(c *config.Config, _ *fixtureOptions, f *fixture) { c.QueueDepth = 1; f.deps.Backend = sg })
	sg.fakeBackend.gate = make(chan struct{})
	sg.fakeBackend.started = make(chan struct{}, 16)
	b := body(t, nil)
	var wg sync.WaitGroup
	for range 3 { // 2 slots busy + 1 waiting: the queue is full
		wg.Add(1)
		go func() { defer wg.Done(); f.do(t, "POST", "/predict", b, nil) }()
	}
	<-sg.fakeBackend.started
	<-sg.fakeBackend.started
	require.Eventually(t, func() bool { return f.core.QueueWaiting() == 1 }, 10*time.Second, 5*time.Millisecond)
	resp, _ := f.do(t, "POST", "/predict", b, nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a client past queue_depth is refused")

	restarted := &fakeBackend{}
	require.NoError(t, sg.gate(context.Background(), restarted), "restart gate under load")
	assert.Positive(t, restarted.calls.Load())

	f.catalog.put(secondTag, secondBinding(t, "1.0.0", f.enc))
	encoded := f.enc.encoded.Load()
	done := make(chan []service.Change, 1)
	go func() {
		changes, err := f.core.Reload(context.Background())
		assert.NoError(t, err)
		done <- changes
	}()
	require.Eventually(t, func() bool { return f.enc.encoded.Load() > encoded }, 10*time.Second, 5*time.Millisecond, "the warm-up reached the device lock")
	time.Sleep(50 * time.Millisecond) // and waits there (a refusal would end the reload now)
	assert.EqualValues(t, 1, f.core.QueueWaiting(), "the warm-up is not counted against queue_depth")
	close(sg.fakeBackend.gate)
	changes := <-done
	wg.Wait()
	found := false
	for _, ch := range changes {
		if ch.Embodiment == secondTag {
			found = true
			assert.NotEqual(t, "refused", ch.Change, ch.Reason)
		}
	}
	assert.True(t, found, "%+v", changes)
}
