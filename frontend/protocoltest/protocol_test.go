package protocoltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gr00tgw/gr00tgw/binding"
	"github.com/gr00tgw/gr00tgw/client/openpiclient"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/client/zmqclient"
	"github.com/gr00tgw/gr00tgw/config"
	_ "github.com/gr00tgw/gr00tgw/device/cpu" // registers backend "cpu"
	"github.com/gr00tgw/gr00tgw/frontend"
	httpfront "github.com/gr00tgw/gr00tgw/frontend/http"
	"github.com/gr00tgw/gr00tgw/frontend/oip"
	"github.com/gr00tgw/gr00tgw/frontend/openpi"
	"github.com/gr00tgw/gr00tgw/frontend/zmq"
	"github.com/gr00tgw/gr00tgw/internal/pytest"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

const (
	droidTag  = "oxe_droid_relative_eef_relative_joint"
	liberoTag = "libero_sim"
	zmqToken  = "zmq-s3cret"
	openpiKey = "openpi-s3cret"
	// maxMessage is both endpoints' message limit here (a DROID
	// observation is ~0.7 MB, a B = 2 one ~1.4 MB).
	maxMessage = 4 << 20
)

// env is the one server every test talks to.
type env struct {
	core       *service.Core
	srv        *httpfront.Server
	rec        *tracetest.SpanRecorder
	zmqAddr    string
	openpiAddr string
	root       string
	droid      []byte // the DROID demo /predict body, noise removed
	libero     []byte // the LIBERO demo body
	shutdown   func()
}

var (
	envOnce sync.Once
	theEnv  *env
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theEnv != nil {
		theEnv.shutdown()
	}
	os.Exit(code)
}

// setup starts the real pipeline behind HTTP (in process), ZeroMQ and
// openpi (loopback listeners), once for the package.
func setup(tb testing.TB) *env {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: builds the plugins and serves the tiny checkpoint on the CPU backend")
	}
	envOnce.Do(func() { theEnv, envErr = start() })
	require.NoError(tb, envErr)
	return theEnv
}

func start(tweaks ...func(*config.Config)) (*env, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	plugins, err := os.MkdirTemp("", "gr00tgw-protocoltest-plugins-")
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"droid", "libero"} {
		if _, err := plugintest.Pack(context.Background(), plugintest.Guest{Dir: filepath.Join(root, "embodiments", name)}, plugins); err != nil {
			return nil, fmt.Errorf("pack %s: %w", name, err)
		}
	}
	cfg := config.Default()
	cfg.Threads = 2
	cfg.WarmupRuns = 1
	cfg.GoldenDir = "-"
	cfg.QueueDepth = 16
	for _, fn := range tweaks {
		fn(&cfg)
	}
	paths := binding.Resolve(cfg, root)
	paths.Plugins = plugins
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mp, metrics, err := httpfront.NewPrometheus()
	if err != nil {
		return nil, err
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	core, err := service.New(service.Options{Config: cfg, Logger: log, MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		return nil, err
	}
	srv, err := httpfront.New(core, httpfront.Options{MeterProvider: mp, MetricsHandler: metrics, TracerProvider: tp})
	if err != nil {
		return nil, err
	}
	oip.Mount(srv)
	if err := core.Start(context.Background(), func(ctx context.Context) (*service.Deps, error) {
		return binding.Open(ctx, cfg, paths, log, mp)
	}); err != nil {
		return nil, err
	}
	if !core.WaitBound(context.Background()) {
		return nil, fmt.Errorf("embodiments not bound")
	}
	zs, err := zmq.New(zmq.Options{Gateway: core, Token: zmqToken, Limits: frontend.Limits{MaxMessageBytes: maxMessage}, Logger: log})
	if err != nil {
		return nil, err
	}
	ps, err := openpi.New(openpi.Options{Gateway: core, APIKey: openpiKey, Limits: frontend.Limits{MaxMessageBytes: maxMessage}, Logger: log})
	if err != nil {
		return nil, err
	}
	zl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ol, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go zs.Serve(zl)
	go ps.Serve(ol)
	e := &env{core: core, srv: srv, rec: rec, zmqAddr: zl.Addr().String(), openpiAddr: ol.Addr().String(), root: root}
	e.shutdown = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		core.Shutdown(ctx, srv.Shutdown, zs.Shutdown, ps.Shutdown)
		os.RemoveAll(plugins)
	}
	if e.droid, err = demoBody(filepath.Join(root, "testdata", "n17-tiny", "caseA", "request.json")); err != nil {
		return nil, err
	}
	if e.libero, err = demoBody(filepath.Join(root, "testdata", "n17-tiny", "demo", "libero_sim", "request.json")); err != nil {
		return nil, err
	}
	return e, nil
}

// demoBody reads a demo /predict body without its noise (the robot
// protocols carry seeds, not noise).
func demoBody(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "noise")
	delete(m, "seed")
	return json.Marshal(m)
}

// httpActions posts body (with seed when not nil) to /predict and returns
// the actions per group, flattened, as float32.
func (e *env) httpActions(t *testing.T, body []byte, seed *uint64) map[string][]float32 {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	if seed != nil {
		m["seed"] = *seed
	}
	b, _ := json.Marshal(m)
	req, _ := http.NewRequest("POST", "/predict", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.App().Test(req, -1)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	require.Equal(t, 200, resp.StatusCode, string(out))
	var pr service.PredictResponse
	require.NoError(t, json.Unmarshal(out, &pr))
	got := map[string][]float32{}
	for g, rows := range pr.Actions {
		for _, r := range rows {
			for _, x := range r {
				got[g] = append(got[g], float32(x))
			}
		}
	}
	return got
}

func raw(t *testing.T, body []byte) *rawobs.Observation {
	t.Helper()
	o, err := rawobs.FromPredictJSON(body)
	require.NoError(t, err)
	return o
}

// sameBits asserts two float32 slices are bit-identical.
func sameBits(t *testing.T, want, got []float32, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s[%d]: got %v, HTTP /predict %v (not bit-identical)", what, i, got[i], want[i])
		}
	}
}

func u64(x uint64) *uint64 { return &x }

var groups = []string{"eef_9d", "gripper_position", "joint_position"}

// TestZMQMatchesHTTP: the DROID demo frames as raw uint8 over ZeroMQ, in
// both array encodings and every observation form, give actions
// bit-identical to HTTP /predict with the same pixels (as PNG) and seed.
func TestZMQMatchesHTTP(t *testing.T) {
	e := setup(t)
	seeded := e.httpActions(t, e.droid, u64(7))
	dflt := e.httpActions(t, e.droid, nil)
	obs, err := zmqclient.FromRaw(raw(t, e.droid), "")
	require.NoError(t, err)
	for _, enc := range []wire.Encoding{wire.EncodingNPY, wire.EncodingMsgpackNumpy} {
		c, err := zmqclient.Dial(context.Background(), e.zmqAddr, zmqclient.Options{Token: zmqToken, Encoding: enc, Timeout: time.Minute})
		require.NoError(t, err)
		defer c.Close()
		for _, form := range []zmqclient.Form{zmqclient.Nested, zmqclient.Flat, zmqclient.Legacy} {
			t.Run(enc.String()+"/"+string(form), func(t *testing.T) {
				want, opts := seeded, map[string]any{"seed": int64(7)}
				if form == zmqclient.Legacy {
					want, opts = dflt, nil // N1.5 requests carry no options: the default seed
				}
				acts, err := c.GetAction(context.Background(), obs, form, opts)
				require.NoError(t, err)
				for _, g := range groups {
					key := g
					if form != zmqclient.Nested {
						key = "action." + g
					}
					a := acts[key]
					require.NotNil(t, a, key)
					assert.Equal(t, []int{1, 40, len(want[g]) / 40}, a.Shape, key)
					f, err := a.Float32s()
					require.NoError(t, err)
					sameBits(t, want[g], f, key)
				}
			})
		}
	}
	// Without a seed on either side: the model's default seed.
	c, err := zmqclient.Dial(context.Background(), e.zmqAddr, zmqclient.Options{Token: zmqToken, Timeout: time.Minute})
	require.NoError(t, err)
	defer c.Close()
	acts, err := c.GetAction(context.Background(), obs, zmqclient.Nested, nil)
	require.NoError(t, err)
	f, _ := acts["joint_position"].Float32s()
	sameBits(t, dflt["joint_position"], f, "default seed")
}

// TestZMQBatchAndEmbodiments: B = 2 is answered (2, 40, D), each sample
// the HTTP prediction; options.embodiment selects LIBERO.
func TestZMQBatchAndEmbodiments(t *testing.T) {
	e := setup(t)
	c, err := zmqclient.Dial(context.Background(), e.zmqAddr, zmqclient.Options{Token: zmqToken, Timeout: time.Minute})
	require.NoError(t, err)
	defer c.Close()
	obs, err := zmqclient.FromRaw(raw(t, e.droid), "")
	require.NoError(t, err)
	want := e.httpActions(t, e.droid, u64(3))
	acts, err := c.GetAction(context.Background(), obs.Batch(2), zmqclient.Nested, map[string]any{"seed": int64(3)})
	require.NoError(t, err)
	for _, g := range groups {
		d := len(want[g]) / 40
		assert.Equal(t, []int{2, 40, d}, acts[g].Shape, g)
		f, _ := acts[g].Float32s()
		sameBits(t, want[g], f[:40*d], g+"[0]")
		sameBits(t, want[g], f[40*d:], g+"[1]")
	}

	lib := raw(t, e.libero)
	lobs, err := zmqclient.FromRaw(lib, "annotation.human.action.task_description")
	require.NoError(t, err)
	mc, err := c.GetModalityConfig(context.Background(), liberoTag)
	require.NoError(t, err)
	lobs.LanguageKey = mc["language"].ModalityKeys[0]
	lwant := e.httpActions(t, e.libero, u64(5))
	lacts, err := c.GetAction(context.Background(), lobs, zmqclient.Nested, map[string]any{"embodiment": liberoTag, "seed": int64(5)})
	require.NoError(t, err)
	require.Len(t, lacts, len(lwant))
	for g, w := range lwant {
		f, _ := lacts[g].Float32s()
		sameBits(t, w, f, "libero "+g)
	}
}

// TestZMQModalityConfigDROID: get_modality_config for DROID is
// upstream's DROID config.
func TestZMQModalityConfigDROID(t *testing.T) {
	e := setup(t)
	c, err := zmqclient.Dial(context.Background(), e.zmqAddr, zmqclient.Options{Token: zmqToken})
	require.NoError(t, err)
	defer c.Close()
	for _, tag := range []string{"", droidTag} {
		mc, err := c.GetModalityConfig(context.Background(), tag)
		require.NoError(t, err)
		assert.Equal(t, []int{-15, 0}, mc["video"].DeltaIndices)
		assert.Equal(t, []string{"exterior_image_1_left", "wrist_image_left"}, mc["video"].ModalityKeys)
		assert.Equal(t, groups, mc["state"].ModalityKeys)
		assert.Equal(t, []int{0}, mc["state"].DeltaIndices)
		assert.Equal(t, groups, mc["action"].ModalityKeys)
		assert.Len(t, mc["action"].DeltaIndices, 40)
		assert.Equal(t, []zmqclient.ActionConfig{
			{Rep: "RELATIVE", Type: "EEF", Format: "XYZ_ROT6D", StateKey: "eef_9d"},
			{Rep: "ABSOLUTE", Type: "NON_EEF", Format: "DEFAULT", StateKey: "gripper_position"},
			{Rep: "RELATIVE", Type: "NON_EEF", Format: "DEFAULT", StateKey: "joint_position"},
		}, mc["action"].ActionConfigs)
		assert.Equal(t, []string{"annotation.language.language_instruction"}, mc["language"].ModalityKeys)
		for name, m := range mc {
			assert.Equal(t, []string{"delta_indices", "modality_keys", "sin_cos_embedding_keys", "mean_std_embedding_keys", "action_configs"}, m.Fields, name)
		}
	}
}

// TestZMQErrorsAndLimits: a wrong token, an oversized message and bad
// input each get their {"error"} and the connection goes on; the
// predictions are counted under protocol="zmq" and traced.
func TestZMQErrorsAndLimits(t *testing.T) {
	e := setup(t)
	bad, err := zmqclient.Dial(context.Background(), e.zmqAddr, zmqclient.Options{Token: "wrong"})
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Ping(context.Background())
	var se *zmqclient.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, zmq.Unauthorized, se.Message)

	c, err := zmqclient.Dial(context.Background(), e.zmqAddr, zmqclient.Options{Token: zmqToken, Timeout: time.Minute})
	require.NoError(t, err)
	defer c.Close()
	huge := wire.NewMap(3).Set("endpoint", "get_action").Set("api_token", zmqToken).Set("data", make([]byte, maxMessage+1))
	b, _ := wire.Marshal(huge, wire.EncodingNPY)
	out, err := c.CallRaw(context.Background(), b)
	require.NoError(t, err)
	_, err = zmqclient.DecodeReply(out)
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodeTooLarge, se.Code)

	// A frame size the gateway's patch grid refuses: the gateway's error,
	// in the protocol's field names.
	obs, err := zmqclient.FromRaw(raw(t, e.droid), "")
	require.NoError(t, err)
	obs.Video["wrist_image_left"] = wire.Uint8Array([]int{1, 2, 100, 100, 3}, make([]byte, 2*100*100*3))
	_, err = c.GetAction(context.Background(), obs, zmqclient.Nested, nil)
	require.ErrorAs(t, err, &se)
	assert.True(t, strings.HasPrefix(se.Field, "video.wrist_image_left"), se.Field)
	assert.True(t, strings.HasPrefix(se.Message, "video.wrist_image_left"), se.Message)

	st, err := c.Ping(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "ok", st)

	// Metrics labelled with the protocol; one server span per message.
	req, _ := http.NewRequest("GET", "/metrics", nil)
	resp, err := e.srv.App().Test(req, -1)
	require.NoError(t, err)
	mb, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(mb), `gateway_protocol_messages_total{code="too_large",endpoint="invalid",protocol="zmq"}`)
	assert.Contains(t, string(mb), `protocol="zmq"`)
	var server sdktrace.ReadOnlySpan
	for _, s := range e.rec.Ended() {
		if s.Name() == "zmq get_action" {
			server = s
		}
	}
	require.NotNil(t, server, "a zmq get_action span")
	var rid string
	for _, a := range server.Attributes() {
		if a.Key == "request.id" {
			rid = a.Value.AsString()
		}
	}
	assert.NotEmpty(t, rid)
}

// TestOpenPIMatchesHTTP: the DROID demo over openpi gives actions
// (horizon, ΣD) bit-identical to HTTP /predict; LIBERO's one frame per
// camera is sent as (H, W, 3).
func TestOpenPIMatchesHTTP(t *testing.T) {
	e := setup(t)
	c, err := openpiclient.Dial(context.Background(), e.openpiAddr, openpiclient.Options{APIKey: openpiKey})
	require.NoError(t, err)
	defer c.Close()
	embs, _ := c.Metadata.Get("embodiments")
	_, ok := embs.(*wire.Map).Get(droidTag)
	assert.True(t, ok, "metadata lists DROID")

	want := e.httpActions(t, e.droid, u64(11))
	obs, err := openpiclient.FromRaw(raw(t, e.droid), true)
	require.NoError(t, err)
	obs.Set("seed", int64(11))
	m, err := c.Infer(context.Background(), obs)
	require.NoError(t, err)
	r, err := openpiclient.ParseResult(m)
	require.NoError(t, err)
	assert.Equal(t, []int{40, 17}, r.Actions.Shape)
	flat, _ := r.Actions.Float32s()
	off := 0
	for _, g := range groups {
		d := len(want[g]) / 40
		gv, _ := r.Groups[g].Float32s()
		sameBits(t, want[g], gv, "action_groups."+g)
		col := make([]float32, 0, 40*d)
		for h := range 40 {
			col = append(col, flat[h*17+off:h*17+off+d]...)
		}
		sameBits(t, want[g], col, "actions[:, "+g+"]")
		off += d
	}
	assert.NotEmpty(t, r.RequestID)

	lib := raw(t, e.libero)
	lwant := e.httpActions(t, e.libero, u64(5))
	lobs, err := openpiclient.FromRaw(lib, true)
	require.NoError(t, err)
	img, _ := lobs.Get("observation/image")
	assert.Len(t, img.(*wire.Array).Shape, 3, "(H, W, 3) for one frame per camera")
	lobs.Set("seed", int64(5))
	m, err = c.Infer(context.Background(), lobs)
	require.NoError(t, err)
	r, err = openpiclient.ParseResult(m)
	require.NoError(t, err)
	for g, w := range lwant {
		gv, _ := r.Groups[g].Float32s()
		sameBits(t, w, gv, "libero "+g)
	}
	assert.GreaterOrEqual(t, r.PrevTotalMS, 0.0, "second reply carries prev_total_ms")

	// Errors: a bad key is refused at the handshake, an oversized frame
	// gets the text frame then 1011.
	_, err = openpiclient.Dial(context.Background(), e.openpiAddr, openpiclient.Options{APIKey: "wrong"})
	require.ErrorContains(t, err, "HTTP 401")
	c2, err := openpiclient.Dial(context.Background(), e.openpiAddr, openpiclient.Options{APIKey: openpiKey})
	require.NoError(t, err)
	_, err = c2.InferRaw(context.Background(), make([]byte, maxMessage+1))
	var se *openpiclient.ServerError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Text, "openpi.max_message_bytes")
	assert.EqualValues(t, 1011, se.CloseCode)
}

// pyJSON is the Python clients' action dump: key → {shape, values}.
type pyArray struct {
	Shape  []int     `json:"shape"`
	Values []float64 `json:"values"`
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// TestPythonZMQ runs the Python Isaac-GR00T client (pyzmq REQ, both
// serializers) on the demo request.json: its own PNG decoding, raw uint8
// frames, actions bit-identical to HTTP; get_modality_config rebuilt as
// upstream's dataclass; the error cases on one socket; a wrong token.
func TestPythonZMQ(t *testing.T) {
	e := setup(t)
	py := pytest.Find(t, "zmq", "msgpack", "numpy")
	_, port, _ := net.SplitHostPort(e.zmqAddr)
	script := filepath.Join("testdata", "gr00t_zmq_client.py")
	req := filepath.Join(e.root, "testdata", "n17-tiny", "caseA", "request.json")
	base := []string{script, "--port", port, "--token", zmqToken}
	seeded := e.httpActions(t, e.droid, u64(7))
	dflt := e.httpActions(t, e.droid, nil)
	for _, enc := range []string{"npy", "msgpack_numpy"} {
		for _, form := range []string{"nested", "flat", "legacy"} {
			t.Run(enc+"/"+form, func(t *testing.T) {
				args := append(append([]string{}, base...), "--encoding", enc, "--request", req, "--form", form)
				want := seeded
				if form == "legacy" {
					want = dflt
				} else {
					args = append(args, "--seed", "7")
				}
				batch := 1
				if form == "nested" && enc == "msgpack_numpy" {
					batch = 2
					args = append(args, "--batch", "2")
				}
				out := pytest.Run(t, py, nil, append(args, "action")...)
				var got map[string]pyArray
				require.NoError(t, json.Unmarshal(out, &got), string(out))
				for _, g := range groups {
					key := g
					if form != "nested" {
						key = "action." + g
					}
					a, ok := got[key]
					require.True(t, ok, "%s in %v", key, got)
					d := len(want[g]) / 40
					assert.Equal(t, []int{batch, 40, d}, a.Shape, key)
					for b := range batch {
						sameBits(t, want[g], f32(a.Values[b*40*d:(b+1)*40*d]), fmt.Sprintf("%s[%d]", key, b))
					}
				}
			})
		}
	}
	t.Run("modality", func(t *testing.T) {
		for _, enc := range []string{"npy", "msgpack_numpy"} {
			out := pytest.Run(t, py, nil, append(append([]string{}, base...), "--encoding", enc, "modality")...)
			var mc map[string]map[string]any
			require.NoError(t, json.Unmarshal(out, &mc), string(out))
			assert.Equal(t, []any{-15.0, 0.0}, mc["video"]["delta_indices"])
			assert.Equal(t, []any{"eef_9d", "gripper_position", "joint_position"}, mc["state"]["modality_keys"])
			assert.Equal(t, []any{
				[]any{"RELATIVE", "EEF", "XYZ_ROT6D", "eef_9d"},
				[]any{"ABSOLUTE", "NON_EEF", "DEFAULT", "gripper_position"},
				[]any{"RELATIVE", "NON_EEF", "DEFAULT", "joint_position"},
			}, mc["action"]["action_configs"], enc)
		}
	})
	t.Run("errors", func(t *testing.T) {
		out := pytest.Run(t, py, nil, append(append([]string{}, base...), "--request", req, "errors")...)
		var cases []struct{ Case, Error string }
		require.NoError(t, json.Unmarshal(out, &cases), string(out))
		want := map[string]string{
			"wrong dtype":       "Server error: video.wrist_image_left: expected uint8 (B, 2, H, W, 3), got float32 (1, 1, 180, 320, 3)",
			"wrong rank":        "Server error: video.wrist_image_left: expected uint8 (B, 2, H, W, 3), got uint8 (2, 180, 320, 3)",
			"missing camera":    "Server error: video.wrist_image_left: missing camera",
			"NaN state":         "Server error: state.joint_position[0, 0, 0]: NaN is not finite",
			"unknown endpoint":  "Server error: Unknown endpoint: teleport",
			"garbage bytes":     "Server error: request: not a valid Isaac-GR00T policy request: msgpack:",
			"truncated msgpack": "Server error: request: not a valid Isaac-GR00T policy request: msgpack:",
			"npy bad header":    `Server error: data.observation.video.exterior_image_1_left: ndarray: .npy: header: descr: dtype "|O4" is not accepted`,
			"kill refused":      "Server error: kill: refused",
		}
		require.Len(t, cases, len(want))
		for _, c := range cases {
			assert.True(t, strings.HasPrefix(c.Error, want[c.Case]), "%s: %q", c.Case, c.Error)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		_, stderr, err := pytest.Output(t, py, nil, script, "--port", port, "--token", "nope", "ping")
		require.Error(t, err)
		assert.Contains(t, string(stderr), "RuntimeError: Server error: Unauthorized: Invalid API token")
	})
}

// TestPythonZMQSession runs upstream's client flow for real-time chunking
// over ZeroMQ: get_action(observation, options) twice in one session
// (options.session_id and the rtc_* options by upstream's names), then
// reset. The second chunk is seeded by the session's first (rtc.source
// "session") and is bit-identical to the same session flow over HTTP; the
// first has no chunk to seed it; reset answers {} as upstream's does.
func TestPythonZMQSession(t *testing.T) {
	e := setup(t)
	py := pytest.Find(t, "zmq", "msgpack", "numpy")
	_, port, _ := net.SplitHostPort(e.zmqAddr)
	req := filepath.Join(e.root, "testdata", "n17-tiny", "caseA", "request.json")
	out := pytest.Run(t, py, nil, filepath.Join("testdata", "gr00t_zmq_client.py"), "--port", port, "--token", zmqToken,
		"--request", req, "--seed", "7", "--session", "py-robot", "session")
	var got []json.RawMessage
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	require.Len(t, got, 3, string(out))
	assert.JSONEq(t, "{}", string(got[2]), "reset answers {}")

	var steps [2]struct {
		Action map[string]pyArray `json:"action"`
		Info   struct {
			SessionID string         `json:"session_id"`
			RTC       map[string]any `json:"rtc"`
		} `json:"info"`
	}
	for i := range steps {
		require.NoError(t, json.Unmarshal(got[i], &steps[i]), string(got[i]))
		assert.Equal(t, "py-robot", steps[i].Info.SessionID, "step %d", i)
	}
	assert.Equal(t, "no_chunk", steps[0].Info.RTC["skipped"], "the first chunk has no previous chunk: %v", steps[0].Info.RTC)
	assert.Equal(t, "session", steps[1].Info.RTC["source"], "%v", steps[1].Info.RTC)
	assert.NotContains(t, steps[1].Info.RTC, "skipped", "%v", steps[1].Info.RTC)
	assert.EqualValues(t, 12, steps[1].Info.RTC["overlap"])
	assert.EqualValues(t, 4, steps[1].Info.RTC["frozen"])

	// The same flow over HTTP, in another session: the same actions.
	opts := map[string]any{"action_horizon": 40, "rtc_overlap_steps": 12, "rtc_frozen_steps": 4, "rtc_ramp_rate": 6.0}
	for i, seed := range []uint64{7, 8} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(e.droid, &m))
		m["session"], m["options"] = "http-robot", opts
		b, err := json.Marshal(m)
		require.NoError(t, err)
		want := e.httpActions(t, b, u64(seed))
		for _, g := range groups {
			a, ok := steps[i].Action[g]
			require.True(t, ok, "%s in step %d", g, i)
			sameBits(t, want[g], f32(a.Values), fmt.Sprintf("step %d %s", i, g))
		}
	}
}

// TestPythonOpenPI runs the Python openpi client (websockets): actions
// bit-identical to HTTP, metadata, server_timing, the error cases (text
// frame naming the field, then 1011) and a wrong key (HTTP 401).
func TestPythonOpenPI(t *testing.T) {
	e := setup(t)
	py := pytest.Find(t, "websockets", "msgpack", "numpy")
	_, port, _ := net.SplitHostPort(e.openpiAddr)
	script := filepath.Join("testdata", "openpi_client.py")
	req := filepath.Join(e.root, "testdata", "n17-tiny", "caseA", "request.json")
	base := []string{script, "--port", port, "--api-key", openpiKey}
	want := e.httpActions(t, e.droid, u64(11))
	out := pytest.Run(t, py, nil, append(append([]string{}, base...), "--request", req, "--seed", "11", "--repeat", "2", "infer")...)
	var replies []struct {
		Actions      pyArray            `json:"actions"`
		ActionGroups map[string]pyArray `json:"action_groups"`
		ServerTiming map[string]float64 `json:"server_timing"`
		RequestID    string             `json:"request_id"`
	}
	require.NoError(t, json.Unmarshal(out, &replies), string(out))
	require.Len(t, replies, 2)
	for i, r := range replies {
		assert.Equal(t, []int{40, 17}, r.Actions.Shape)
		for _, g := range groups {
			sameBits(t, want[g], f32(r.ActionGroups[g].Values), g)
		}
		assert.Equal(t, f32(r.Actions.Values)[9], want["gripper_position"][0], "gripper after the 9 eef values")
		assert.NotEmpty(t, r.RequestID)
		_, prev := r.ServerTiming["prev_total_ms"]
		assert.Equal(t, i == 1, prev, "prev_total_ms from the second reply on")
	}

	out = pytest.Run(t, py, nil, append(append([]string{}, base...), "metadata")...)
	var md map[string]any
	require.NoError(t, json.Unmarshal(out, &md), string(out))
	assert.Equal(t, droidTag, md["default_embodiment"])

	out = pytest.Run(t, py, nil, append(append([]string{}, base...), "--request", req, "errors")...)
	var cases []struct {
		Case      string `json:"case"`
		Error     string `json:"error"`
		CloseCode *int   `json:"close_code"`
	}
	require.NoError(t, json.Unmarshal(out, &cases), string(out))
	wantErr := map[string]string{
		"wrong dtype":       "observation/wrist_image_left: expected uint8 (2, H, W, 3), got float32 (2, 180, 320, 3)",
		"wrong rank":        "observation/wrist_image_left: expected uint8 (2, H, W, 3), got uint8 (180, 320, 3)",
		"missing camera":    "observation/wrist_image_left: missing camera",
		"NaN state":         "observation/joint_position[0]: NaN is not finite",
		"missing prompt":    "prompt: missing",
		"garbage bytes":     "observation: not valid msgpack",
		"truncated msgpack": "observation: not valid msgpack",
		"bad key":           "HTTP 401",
	}
	require.Len(t, cases, len(wantErr))
	for _, c := range cases {
		assert.Contains(t, c.Error, wantErr[c.Case], c.Case)
		if c.Case != "bad key" {
			require.NotNil(t, c.CloseCode, c.Case)
			assert.Equal(t, 1011, *c.CloseCode, c.Case)
		}
	}
}
