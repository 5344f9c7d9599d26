package httpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gr00tgw/gr00tgw/service"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
)

// Test doubles for the gateway's consumer interfaces. They model the real
// contracts closely enough to exercise every error path: the encoder reads
// PNG/JPEG headers and applies the DROID frame-size band; the embodiment
// validates nothing beyond what the gateway already checks and decodes
// its own horizon's first rows of the model's chunk as action_pred + a
// state offset (as the real plugins do); the backend always returns the
// model's [testHorizon, testActionDim] chunk and echoes the noise.

const (
	testHorizon   = 40
	testActionDim = 132
)

var droidInfo = service.EmbodimentInfo{
	Name: "oxe_droid_relative_eef_relative_joint", ID: 24, Plugin: "droid", PluginVersion: "0.1.0",
	Cameras: []string{"exterior_image_1_left", "wrist_image_left"}, VideoDeltaIndices: []int{-15, 0},
	StateGroups:   []service.Group{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}},
	ActionGroups:  []service.Group{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}},
	ActionHorizon: testHorizon,
}

type fakeEncoder struct {
	decodeErr error
	encoded   atomic.Int64
	released  atomic.Int64
}

func (e *fakeEncoder) Decode(ctx context.Context, cams []service.CameraFrames) (*service.Decoded, error) {
	if e.decodeErr != nil {
		return nil, e.decodeErr
	}
	d := &service.Decoded{}
	for _, c := range cams {
		ci := service.CameraImages{Key: c.Key, Frames: len(c.Frames)}
		for i, f := range c.Frames {
			field := fmt.Sprintf("images.%s[%d]", c.Key, i)
			cfg, _, err := image.DecodeConfig(bytes.NewReader(f))
			if err != nil {
				return nil, service.NewFieldError(field, fmt.Errorf("%s: undecodable image: %w", field, err))
			}
			r := float64(cfg.Width) / float64(cfg.Height)
			if r < 1.686 || r > 1.814 {
				return nil, service.NewFieldError(field, fmt.Errorf("%s: %dx%d: width/height %.3f outside [1.686, 1.814] (16:9, 7:4, 9:5 accepted)", field, cfg.Width, cfg.Height, r))
			}
			if i > 0 && (cfg.Width != ci.Width || cfg.Height != ci.Height) {
				return nil, service.NewFieldError(field, fmt.Errorf("%s: frames of one camera must share a size", field))
			}
			ci.Width, ci.Height = cfg.Width, cfg.Height
		}
		d.Cameras = append(d.Cameras, ci)
	}
	return d, nil
}

func (e *fakeEncoder) Encode(ctx context.Context, d *service.Decoded, instruction string) (*service.Encoded, error) {
	words := len(strings.Fields(instruction))
	if words > 51 {
		return nil, service.NewFieldError("instruction", fmt.Errorf("instruction: n_text %d exceeds L_max 51", words))
	}
	grid := map[string][3]int{}
	for _, c := range d.Cameras {
		grid[c.Key] = [3]int{1, 16, 28}
	}
	seq := 461 + words
	e.encoded.Add(1)
	return &service.Encoded{
		Release:      func() { e.released.Add(1) },
		Inputs:       device.Inputs{InputIDs: make([]int32, seq), AttentionMask: make([]int32, seq)},
		SeqLen:       seq,
		PromptTokens: words,
		GridTHW:      grid,
	}, nil
}

type fakeEmbodiment struct {
	info     service.EmbodimentInfo
	preErr   error
	postErr  error
	postNaN  bool // Post returns a NaN in its first action group
	prePanic atomic.Bool
}

func (e *fakeEmbodiment) Describe() service.EmbodimentInfo { return e.info }

func (e *fakeEmbodiment) Pre(ctx context.Context, in *service.PreInput) ([]float32, error) {
	if e.prePanic.Load() {
		panic("fake: pre panicked")
	}
	if e.preErr != nil {
		return nil, e.preErr
	}
	out := make([]float32, testActionDim)
	i := 0
	for _, g := range e.info.StateGroups {
		for _, v := range in.State[g.Key] {
			out[i] = float32(v)
			i++
		}
	}
	return out, nil
}

func (e *fakeEmbodiment) Post(ctx context.Context, in *service.PostInput) (map[string][]float32, error) {
	if e.postErr != nil {
		return nil, e.postErr
	}
	if in.Horizon < e.info.ActionHorizon || len(in.ActionPred) != in.Horizon*in.Dim {
		return nil, fmt.Errorf("fake post: action_pred [%d, %d], want at least %d rows", in.Horizon, in.Dim, e.info.ActionHorizon)
	}
	out := fakeDecode(e.info, in.ActionPred, e.info.ActionHorizon, in.Dim, in.State)
	if e.postNaN {
		out[e.info.ActionGroups[0].Key][1] = float32(math.NaN())
	}
	return out, nil
}

// fakeDecode slices action_pred into groups and adds the group's first
// state value: deterministic, state-dependent, cheap.
func fakeDecode(info service.EmbodimentInfo, pred []float32, h, d int, state map[string][]float64) map[string][]float32 {
	out := map[string][]float32{}
	col := 0
	for _, g := range info.ActionGroups {
		buf := make([]float32, h*g.Dim)
		for t := 0; t < h; t++ {
			for j := 0; j < g.Dim; j++ {
				buf[t*g.Dim+j] = pred[t*d+col+j] + float32(state[g.Key][0])
			}
		}
		out[g.Key] = buf
		col += g.Dim
	}
	return out
}

type fakeBackend struct {
	delay    time.Duration
	err      error
	calls    atomic.Int64
	active   atomic.Int64
	maxSeen  atomic.Int64
	closed   atomic.Bool
	started  chan struct{} // receives one value per call start, when set
	gate     chan struct{} // when set, Predict waits for it to close
	mu       sync.Mutex
	lastSeed uint64
	lastRTC  *device.RTC // the last call's RTC (a copy of the struct)
	inf      bool        // action_pred[0][1] is +Inf
}

// fakePred is the backend's deterministic output: the noise itself when
// given, else a seed-dependent wave.
func fakePred(in *device.Inputs) []float32 {
	out := make([]float32, testHorizon*testActionDim)
	if in.Noise != nil {
		copy(out, in.Noise)
		return out
	}
	for i := range out {
		out[i] = float32(math.Sin(float64(i)*0.37 + float64(in.Seed)))
	}
	return out
}

func (b *fakeBackend) Predict(ctx context.Context, in *device.Inputs) (*device.Result, error) {
	if b.closed.Load() {
		return nil, errors.New("fake: closed")
	}
	b.calls.Add(1)
	n := b.active.Add(1)
	defer b.active.Add(-1)
	for {
		m := b.maxSeen.Load()
		if n <= m || b.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	if b.started != nil {
		b.started <- struct{}{}
	}
	b.mu.Lock()
	b.lastSeed = in.Seed
	b.lastRTC = nil
	if in.RTC != nil {
		c := *in.RTC
		c.Prev = append([]float32(nil), c.Prev...)
		b.lastRTC = &c
	}
	b.mu.Unlock()
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if b.delay > 0 {
		select {
		case <-time.After(b.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	pred := fakePred(in)
	if b.inf {
		pred[1] = float32(math.Inf(1))
	}
	return &device.Result{
		ActionPred: pred, Horizon: testHorizon, ActionDim: testActionDim,
		Stages: []device.StageTiming{
			{Name: device.StageVision, Duration: 3 * time.Millisecond},
			{Name: device.StageLLM, Duration: 2 * time.Millisecond},
			{Name: device.StageAdapter, Duration: time.Millisecond},
			{Name: device.StageDenoise, Duration: 4 * time.Millisecond},
		},
	}, nil
}

func (b *fakeBackend) Facts() device.Facts {
	return device.Facts{Backend: "fake", Policy: "fp32", Stages: []string{"vision", "llm", "adapter", "denoise"}}
}

func (b *fakeBackend) Close() error { b.closed.Store(true); return nil }

// fakeCatalog serves bindings by tag; tests change its content between
// reloads. Each Open hands out a fresh copy of the tag's binding whose
// Close is counted.
type fakeCatalog struct {
	mu       sync.Mutex
	bindings map[string]*service.Binding // tag → template; revision = SHA256
	scanErr  error
	openErr  map[string]error
	opened   atomic.Int64
	closed   atomic.Int64
}

func newFakeCatalog(bs ...*service.Binding) *fakeCatalog {
	c := &fakeCatalog{bindings: map[string]*service.Binding{}, openErr: map[string]error{}}
	for _, b := range bs {
		c.bindings[b.Embodiment.Describe().Name] = b
	}
	return c
}

// put replaces (or adds) tag's binding; nil removes it.
func (c *fakeCatalog) put(tag string, b *service.Binding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b == nil {
		delete(c.bindings, tag)
		return
	}
	c.bindings[tag] = b
}

func (c *fakeCatalog) Scan(context.Context) ([]service.Candidate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scanErr != nil {
		return nil, c.scanErr
	}
	var out []service.Candidate
	for tag, b := range c.bindings {
		out = append(out, service.Candidate{Tag: tag, Revision: b.SHA256, Source: "fake/" + tag})
	}
	return out, nil
}

func (c *fakeCatalog) Open(_ context.Context, cand service.Candidate) (*service.Binding, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.openErr[cand.Tag]; err != nil {
		return nil, err
	}
	b, ok := c.bindings[cand.Tag]
	if !ok {
		return nil, fmt.Errorf("fake catalog: no %s", cand.Tag)
	}
	c.opened.Add(1)
	cp := *b
	cp.Close = func(context.Context) error { c.closed.Add(1); return nil }
	return &cp, nil
}

// demoRequest is the DROID demo /predict body (testdata/droid_request.json),
// decoded to a map for tests to mutate.
func demoRequest(tb testing.TB) map[string]any {
	tb.Helper()
	raw, err := os.ReadFile("../../service/testdata/droid_request.json")
	require.NoError(tb, err)
	var m map[string]any
	require.NoError(tb, json.Unmarshal(raw, &m))
	return m
}

// fakeDemo builds a Demo whose golden is what the fakes produce for the
// demo request, perturbed by eps (0: exact).
func fakeDemo(tb testing.TB, eps float64) *service.Demo {
	tb.Helper()
	raw, err := os.ReadFile("../../service/testdata/droid_request.json")
	require.NoError(tb, err)
	r, err := service.DecodeJSON(raw)
	require.NoError(tb, err)
	state := map[string][]float64{} // as the service rounds it (state_dtype float32)
	for g, vals := range r.State {
		for _, v := range vals {
			state[g] = append(state[g], float64(float32(v)))
		}
	}
	pred := fakePred(&device.Inputs{Noise: r.Noise})
	acts := fakeDecode(droidInfo, pred, testHorizon, testActionDim, state)
	golden := map[string][][]float64{}
	for _, g := range droidInfo.ActionGroups {
		buf := acts[g.Key]
		for t := 0; t < testHorizon; t++ {
			row := make([]float64, g.Dim)
			for j := range row {
				row[j] = float64(buf[t*g.Dim+j])
			}
			golden[g.Key] = append(golden[g.Key], row)
		}
	}
	for _, rows := range golden {
		for i := range rows {
			for j := range rows[i] {
				rows[i][j] += eps * math.Sin(float64(i*7+j))
			}
		}
	}
	return &service.Demo{Request: raw, Golden: golden, Source: "testdata"}
}

type fixture struct {
	core    *service.Core
	srv     *Server
	backend *fakeBackend
	emb     *fakeEmbodiment
	enc     *fakeEncoder
	catalog *fakeCatalog
	binding *service.Binding // the default (DROID) embodiment's
	deps    *service.Deps
}

type fixtureOpt func(*config.Config, *fixtureOptions, *fixture)

// fixtureOptions are the service's and the front end's options together.
type fixtureOptions struct {
	service.Options
	MetricsHandler http.Handler
	Keys           *secure.Keyring
}

// droidBinding is the fakes' DROID binding.
func droidBinding(tb testing.TB, emb service.Embodiment, enc service.Encoder) *service.Binding {
	return &service.Binding{Embodiment: emb, Encoder: enc, Demo: fakeDemo(tb, 0), SHA256: "sha-droid-1",
		Layout: service.Layout{Name: "droid", Cameras: 2, FramesPerCamera: 2, VitGridTHW: [3]int{1, 16, 28}, MaxTextTokens: 51}}
}

// newFixture builds a Server over fakes; started (loaded and warmed up)
// unless start is false.
func newFixture(tb testing.TB, start bool, opts ...fixtureOpt) *fixture {
	tb.Helper()
	f := &fixture{backend: &fakeBackend{}, emb: &fakeEmbodiment{info: droidInfo}, enc: &fakeEncoder{}}
	f.binding = droidBinding(tb, f.emb, f.enc)
	f.catalog = newFakeCatalog(f.binding)
	cfg := config.Default()
	cfg.WarmupRuns = 1
	cfg.AdminToken = "s3cret"
	o := fixtureOptions{Options: service.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"}}
	f.deps = &service.Deps{
		Backend: f.backend, Catalog: f.catalog,
		Model: service.ModelInfo{Version: "n17", ActionDim: testActionDim, ActionHorizon: testHorizon, DefaultSeed: 42},
	}
	for _, fn := range opts {
		fn(&cfg, &o, f)
	}
	o.Config = cfg
	core, err := service.New(o.Options)
	require.NoError(tb, err)
	srv, err := New(core, Options{TracerProvider: o.TracerProvider, MeterProvider: o.MeterProvider,
		MetricsHandler: o.MetricsHandler, Keys: o.Keys})
	require.NoError(tb, err)
	f.core, f.srv = core, srv
	if start {
		require.NoError(tb, core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil }))
		require.True(tb, core.WaitBound(context.Background()))
	}
	return f
}

// shutdown drains the service with the HTTP front end alongside, as
// gr00tgw serve does.
func (f *fixture) shutdown(ctx context.Context) error {
	return f.core.Shutdown(ctx, f.srv.Shutdown)
}

// do sends one request through the Fiber app.
func (f *fixture) do(tb testing.TB, method, path string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, path, bytes.NewReader(body))
	require.NoError(tb, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.App().Test(req, -1)
	require.NoError(tb, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	_ = resp.Body.Close()
	return resp, b
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	require.NoError(tb, err)
	return b
}

// status is tag's entry in the service's embodiment list (/info's
// "embodiments"), nil when the service does not know it.
func status(f *fixture, tag string) *service.EmbodimentStatus {
	for _, e := range f.core.Embodiments() {
		if e.Name == tag {
			return &e
		}
	}
	return nil
}

// defaultContract is the default embodiment's contract.
func defaultContract(tb testing.TB, f *fixture) *service.Contract {
	tb.Helper()
	c, err := f.core.Contract("")
	require.NoError(tb, err)
	return c
}

// withEmbodiment sets the embodiment member of a JSON request object.
func withEmbodiment(req json.RawMessage, tag string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(req, &m); err != nil {
		return nil, err
	}
	t, _ := json.Marshal(tag)
	m["embodiment"] = t
	return json.Marshal(m)
}
