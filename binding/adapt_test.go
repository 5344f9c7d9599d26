package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/device"
	_ "github.com/gr00tgw/gr00tgw/device/cpu"
	httpfront "github.com/gr00tgw/gr00tgw/frontend/http"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
	"github.com/gr00tgw/gr00tgw/service"
)

// repoRoot is the module root (one level up).
func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("..")
	require.NoError(t, err)
	return r
}

// pluginsDir returns a plugins_dir holding the packed DROID and LIBERO
// plugins (the shipped set).
func pluginsDir(t *testing.T, root string) string {
	t.Helper()
	return pluginsDirFor(t, root, "droid", "libero")
}

var (
	packMu   sync.Mutex
	packRoot string
	packed   = map[string]bool{}
)

// pluginsDirFor packs the plugin packages embodiments/<name> from source
// (plugintest.Pack: built once per process with the stock toolchain, the
// manifest deadline scaled by plugintest.TimeoutScale, because these tests
// check behaviour on a shared machine and under -race, not production
// latency) and returns a fresh plugins_dir holding copies of exactly those
// plugins (the test may change it). GR00TGW_TEST_PLUGINS points at a
// prepared directory of packed plugins instead.
func pluginsDirFor(t *testing.T, root string, names ...string) string {
	t.Helper()
	src := os.Getenv("GR00TGW_TEST_PLUGINS")
	if src == "" {
		packMu.Lock()
		if packRoot == "" {
			d, err := os.MkdirTemp("", "gr00tgw-adapt-plugins-")
			require.NoError(t, err)
			packRoot = d
		}
		for _, name := range names {
			if !packed[name] {
				_, err := plugintest.Pack(context.Background(), plugintest.Guest{Dir: filepath.Join(root, "embodiments", name)}, packRoot)
				require.NoError(t, err, "pack embodiments/%s", name)
				packed[name] = true
			}
		}
		packMu.Unlock()
		src = packRoot
	}
	dir := t.TempDir()
	for _, name := range names {
		require.NoError(t, os.CopyFS(filepath.Join(dir, name), os.DirFS(filepath.Join(src, name))))
	}
	return dir
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
	demoDir := filepath.Join(root, "testdata", "n17-tiny", "caseA")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	mp, metrics, err := httpfront.NewPrometheus()
	require.NoError(t, err)
	core, err := service.New(service.Options{Config: cfg, Logger: log, MeterProvider: mp})
	require.NoError(t, err)
	srv, err := httpfront.New(core, httpfront.Options{MeterProvider: mp, MetricsHandler: metrics})
	require.NoError(t, err)
	var deps *service.Deps
	require.NoError(t, core.Start(context.Background(), func(ctx context.Context) (*service.Deps, error) {
		d, err := Open(ctx, cfg, paths, log, mp)
		deps = d
		return d, err
	}))
	defer core.Shutdown(context.Background(), srv.Shutdown)

	raw, err := os.ReadFile(filepath.Join(demoDir, "request.json"))
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
	var got service.PredictResponse
	require.NoError(t, json.Unmarshal(b, &got))
	demo, err := service.LoadDemo(demoDir)
	require.NoError(t, err)
	assert.Equal(t, 469, got.SeqLen)
	assert.Equal(t, 8, got.PromptTokens)
	assert.Equal(t, 24, got.EmbodimentID)
	assert.Equal(t, "droid", got.Layout)
	assert.Equal(t, service.ImageReport{Frames: 2, ReceivedHW: [2]int{180, 320}, VitGridTHW: [3]int{1, 16, 28}}, got.Images["exterior_image_1_left"])
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
	var again service.PredictResponse
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

	// A state group missing is the client's error, naming the group.
	m = map[string]any{}
	require.NoError(t, json.Unmarshal(raw, &m))
	delete(m["state"].(map[string]any), "joint_position")
	body, _ = json.Marshal(m)
	st, b = post(body)
	assert.Equal(t, 400, st)
	assert.Contains(t, string(b), `"field":"state.joint_position"`)
	assert.Equal(t, 132, deps.Model.ActionDim)
	assert.Equal(t, 40, deps.Model.ActionHorizon)

	// Both shipped embodiments are served from the one checkpoint.
	require.True(t, core.WaitBound(context.Background()))
	var info struct {
		Embodiments []struct {
			Name, Plugin, Status string
			ID                   int
			Default              bool
			Layout               service.Layout
		} `json:"embodiments"`
	}
	ireq, _ := http.NewRequest("GET", "/info", nil)
	iresp, err := srv.App().Test(ireq, -1)
	require.NoError(t, err)
	ib, _ := io.ReadAll(iresp.Body)
	require.NoError(t, json.Unmarshal(ib, &info), string(ib))
	require.Len(t, info.Embodiments, 2, string(ib))
	assert.Equal(t, "libero_sim", info.Embodiments[0].Name)
	assert.Equal(t, "ok", info.Embodiments[0].Status)
	assert.Equal(t, 2, info.Embodiments[0].ID)
	assert.Equal(t, [3]int{1, 16, 16}, info.Embodiments[0].Layout.VitGridTHW)
	assert.Equal(t, processor.DROIDTag, info.Embodiments[1].Name)
	assert.Equal(t, "ok", info.Embodiments[1].Status)
	assert.True(t, info.Embodiments[1].Default)
	assert.Equal(t, [3]int{1, 16, 28}, info.Embodiments[1].Layout.VitGridTHW)
	assert.Equal(t, 51, info.Embodiments[1].Layout.MaxTextTokens)

	// Reload with nothing changed keeps both bindings.
	changes, err := core.Reload(context.Background())
	require.NoError(t, err)
	require.Len(t, changes, 2)
	for _, ch := range changes {
		assert.Equal(t, "unchanged", ch.Change, ch.Embodiment)
	}
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

// A default embodiment no plugin serves fails Open before the backend,
// naming the tags found.
func TestOpenUnknownDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugins")
	}
	root := repoRoot(t)
	cfg := config.Default()
	cfg.Embodiment = "no_such_robot"
	paths := Resolve(cfg, root)
	paths.Plugins = pluginsDir(t, root)
	_, err := Open(context.Background(), cfg, paths, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	require.ErrorContains(t, err, "no plugin in")
	assert.Contains(t, err.Error(), "oxe_droid_relative_eef_relative_joint")
	assert.Contains(t, err.Error(), "libero_sim")
	paths.Plugins = filepath.Join(t.TempDir(), "absent")
	_, err = Open(context.Background(), cfg, paths, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	require.Error(t, err)
}

// A configured embodiment no plugin serves is reported before the backend
// opens (the gateway refuses it later, once the model is up).
func TestOpenReportsUnservedBeforeBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugins")
	}
	root := repoRoot(t)
	cfg := config.Default()
	cfg.Embodiments = []string{"oxe_droid_relative_eef_relative_joint", "no_such_robot"}
	paths := Resolve(cfg, root)
	paths.Plugins = pluginsDir(t, root)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var atOpen string
	stop := errors.New("stop before the weights")
	_, err := OpenWith(context.Background(), cfg, paths, log, nil, func(context.Context, device.Options) (device.Backend, error) {
		atOpen = buf.String()
		return nil, stop
	})
	require.ErrorIs(t, err, stop)
	assert.Contains(t, atOpen, "embodiment will be refused: no plugin in plugins_dir serves it")
	assert.Contains(t, atOpen, "embodiment=no_such_robot")
	assert.NotContains(t, atOpen, "embodiment=oxe_droid_relative_eef_relative_joint plugins_dir")
}
