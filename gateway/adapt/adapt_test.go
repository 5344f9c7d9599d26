package adapt

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	_ "github.com/gr00tgw/gr00tgw/device/cpu"
	"github.com/gr00tgw/gr00tgw/gateway"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// repoRoot is the module root (two levels up).
func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../..")
	require.NoError(t, err)
	return r
}

// pluginsDir returns a directory holding the packed DROID plugin.
func pluginsDir(t *testing.T, root string) string {
	t.Helper()
	return pluginsDirFor(t, root, "droid")
}

var (
	packMu   sync.Mutex
	packRoot string
	packed   = map[string]bool{}
)

// pluginsDirFor packs the plugin package embodiments/<name> from source
// (plugintest.Pack: built once per process with the stock toolchain, the
// manifest deadline scaled by plugintest.TimeoutScale, because these tests
// check behaviour on a shared machine and under -race, not production
// latency) into one per-process directory, and returns that directory.
// GR00TGW_TEST_PLUGINS points at a prepared directory instead.
func pluginsDirFor(t *testing.T, root, name string) string {
	t.Helper()
	if d := os.Getenv("GR00TGW_TEST_PLUGINS"); d != "" {
		return d
	}
	packMu.Lock()
	defer packMu.Unlock()
	if packRoot == "" {
		d, err := os.MkdirTemp("", "gr00tgw-adapt-plugins-")
		require.NoError(t, err)
		packRoot = d
	}
	if !packed[name] {
		_, err := plugintest.Pack(context.Background(), plugintest.Guest{Dir: filepath.Join(root, "embodiments", name)}, packRoot)
		require.NoError(t, err, "pack embodiments/%s", name)
		packed[name] = true
	}
	return packRoot
}

func TestMain(m *testing.M) {
	code := m.Run()
	if packRoot != "" {
		os.RemoveAll(packRoot)
	}
	os.Exit(code)
}

// TestServeTinyCheckpoint runs the real pipeline — core/processor,
// the DROID wasm plugin, the CPU backend on the n17-tiny checkpoint — behind
// the gateway: boot with the golden-gated warm-up, then POST the case-A
// request and compare the actions with the PyTorch golden.
func TestServeTinyCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin and opens the CPU backend")
	}
	root := repoRoot(t)
	cfg := config.Default()
	cfg.Threads = 2
	cfg.WarmupRuns = 1
	paths := Resolve(cfg, root)
	paths.Plugins = pluginsDir(t, root)
	require.Equal(t, filepath.Join(root, "testdata", "n17-tiny", "caseA"), paths.Demo)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	mp, metrics, err := gateway.NewPrometheus()
	require.NoError(t, err)
	srv, err := gateway.New(gateway.Options{Config: cfg, Logger: log, MeterProvider: mp, MetricsHandler: metrics})
	require.NoError(t, err)
	var deps *gateway.Deps
	require.NoError(t, srv.Start(context.Background(), func(ctx context.Context) (*gateway.Deps, error) {
		d, err := Open(ctx, cfg, paths, log, mp)
		deps = d
		return d, err
	}))
	defer srv.Shutdown(context.Background())

	raw, err := os.ReadFile(filepath.Join(paths.Demo, "request.json"))
	require.NoError(t, err)
	post := func(body []byte) (int, []byte) {
		req, _ := http.NewRequest("POST", "/predict", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.App().Test(req, -1)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	st, b := post(raw)
	require.Equal(t, 200, st, string(b))
	var got gateway.PredictResponse
	require.NoError(t, json.Unmarshal(b, &got))
	demo, err := gateway.LoadDemo(paths.Demo)
	require.NoError(t, err)
	assert.Equal(t, 469, got.SeqLen)
	assert.Equal(t, 8, got.PromptTokens)
	assert.Equal(t, 24, got.EmbodimentID)
	assert.Equal(t, "droid", got.Layout)
	assert.Nil(t, deps.Model.Extra, "caseA's golden is the PyTorch reference, no regression note")
	assert.Equal(t, gateway.ImageReport{Frames: 2, ReceivedHW: [2]int{180, 320}, VitGridTHW: [3]int{1, 16, 28}}, got.Images["exterior_image_1_left"])
	for g, want := range demo.Golden {
		var a, w []float64
		for i := range want {
			a = append(a, got.Actions[g][i]...)
			w = append(w, want[i]...)
		}
		require.Len(t, a, len(w), g)
		maxd := 0.0
		for i := range a {
			if d := a[i] - w[i]; d > maxd || -d > maxd {
				maxd = max(d, -d)
			}
		}
		assert.Less(t, maxd, 1e-3, "group %s max|d|", g)
	}

	// A second call reuses the recycled pixel buffer and gives the same bits.
	st, b2 := post(raw)
	require.Equal(t, 200, st)
	var again gateway.PredictResponse
	require.NoError(t, json.Unmarshal(b2, &again))
	assert.Equal(t, got.Actions, again.Actions)

	// Client errors of the real components keep their fields.
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	m["instruction"] = strings.Repeat("block ", 80)
	body, _ := json.Marshal(m)
	st, b = post(body)
	assert.Equal(t, 400, st)
	assert.Contains(t, string(b), `"field":"instruction"`)
	assert.Contains(t, string(b), "L_max")

	// A guest validation error keeps the plugin's code and field (400).
	_, err = deps.Embodiment.Pre(context.Background(), &gateway.PreInput{
		Embodiment: deps.Embodiment.Describe().Name, Instruction: "x", StateDtype: "float32",
		State:   map[string][]float64{"eef_9d": make([]float64, 9), "gripper_position": {0}},
		Cameras: []gateway.CameraImages{{Key: "exterior_image_1_left", Frames: 2, Height: 180, Width: 320}, {Key: "wrist_image_left", Frames: 2, Height: 180, Width: 320}},
	})
	var he *gateway.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, 400, he.Status)
	assert.Equal(t, "invalid_state", he.Code)
	assert.Equal(t, "state.joint_position", he.Field)
	info := deps.Embodiment.Describe()
	assert.Equal(t, "droid", info.Plugin)
	assert.Equal(t, []int{-15, 0}, info.VideoDeltaIndices)
	assert.Equal(t, 132, deps.Model.ActionDim)
	assert.Equal(t, 40, deps.Model.ActionHorizon)

	// Reload swaps the plugin set; requests keep working on the new one.
	require.NoError(t, srv.Reload(context.Background()))
	st, _ = post(raw)
	require.Equal(t, 200, st)

	// The plugin host's metrics reach /metrics.
	req, _ := http.NewRequest("GET", "/metrics", nil)
	resp, err := srv.App().Test(req, -1)
	require.NoError(t, err)
	mb, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(mb), `gateway_plugin_host_calls_total{outcome="ok",plugin="droid",stage="post"} 4`)
	assert.Contains(t, string(mb), `gateway_plugin_pool_in_use{plugin="droid"} 0`)
}

func TestOpenEmbodimentSelection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin")
	}
	dir := pluginsDir(t, repoRoot(t))
	_, err := OpenEmbodiment(context.Background(), dir, "no_such_robot")
	require.ErrorIs(t, err, plugins.ErrUnknownEmbodiment)
	assert.Contains(t, err.Error(), "oxe_droid_relative_eef_relative_joint")
	_, err = OpenEmbodiment(context.Background(), filepath.Join(t.TempDir(), "absent"), "x")
	require.Error(t, err)
}
