package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/device"
	httpfront "github.com/gr00tgw/gr00tgw/frontend/http"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/service"
)

const liberoTag = "libero_sim"

// goldenText is the note the libero demo golden carries.
const goldenText = "regression golden recorded by gr00tgw itself (CPU backend, fp32) on the n17-tiny random weights; " +
	"no independent reference exists for libero_sim, so the warm-up gate proves reproducibility, not fidelity"

// liberoGolden is demo/actions.json's layout (that of n17-tiny/caseA).
type liberoGolden struct {
	// Golden says what the file is (reported by /info as demo_golden).
	Golden        string                 `json:"golden"`
	Actions       map[string][][]float64 `json:"actions"`
	ActionHorizon int                    `json:"action_horizon"`
	ActionKeys    []string               `json:"action_keys"`
	Embodiment    string                 `json:"embodiment"`
	EmbodimentID  int                    `json:"embodiment_id"`
}

// TestServeLibero serves the second embodiment end to end — the libero
// wasm plugin (slot 2, 2 cameras × 1 frame at 256×256, 7 absolute groups,
// horizon 16) on the CPU backend with the n17-tiny weights — and compares
// the demo's actions with the regression golden gr00tgw itself recorded
// (testdata/n17-tiny/demo/libero_sim/README.md). With GR00TGW_UPDATE_GOLDEN=1
// it boots without the warm-up gate and rewrites that golden instead.
func TestServeLibero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin and opens the CPU backend")
	}
	update := os.Getenv("GR00TGW_UPDATE_GOLDEN") == "1"
	root := repoRoot(t)
	cfg := config.Default()
	cfg.Threads = 2
	cfg.WarmupRuns = 1
	if update {
		cfg.WarmupRuns = 0
	}
	cfg.Embodiment = liberoTag
	paths := Resolve(cfg, root)
	paths.Plugins = pluginsDirFor(t, root, "libero")
	demoDir := filepath.Join(paths.Weights, "demo", liberoTag)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	core, err := service.New(service.Options{Config: cfg, Logger: log})
	require.NoError(t, err)
	srv, err := httpfront.New(core, httpfront.Options{})
	require.NoError(t, err)
	var deps *service.Deps
	require.NoError(t, core.Start(context.Background(), func(ctx context.Context) (*service.Deps, error) {
		d, err := Open(ctx, cfg, paths, log, nil)
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

	keys := []string{"x", "y", "z", "roll", "pitch", "yaw", "gripper"}
	assert.Equal(t, keys, got.ActionKeys)
	assert.Equal(t, 16, got.ActionHorizon)
	assert.Equal(t, 2, got.EmbodimentID)
	assert.Equal(t, liberoTag, got.Embodiment)
	assert.Equal(t, "libero", got.Layout)
	assert.Equal(t, "seed", got.NoiseSource)
	for _, k := range keys {
		assert.Equal(t, 1, got.ActionDims[k], k)
		require.Len(t, got.Actions[k], 16, k)
		for _, row := range got.Actions[k] {
			require.Len(t, row, 1, k)
			require.False(t, math.IsNaN(row[0]) || math.IsInf(row[0], 0), k)
		}
	}
	for _, cam := range []string{"image", "wrist_image"} {
		assert.Equal(t, service.ImageReport{Frames: 1, ReceivedHW: [2]int{256, 256}, VitGridTHW: [3]int{1, 16, 16}}, got.Images[cam], cam)
	}
	// 2 images × 64 merged tokens; far inside the CPU layout's 512.
	assert.Less(t, got.SeqLen, 200)
	assert.Equal(t, 132, deps.Model.ActionDim)
	assert.Equal(t, 40, deps.Model.ActionHorizon, "the model denoises config.json's horizon")

	goldenPath := filepath.Join(demoDir, "actions.json")
	if update {
		out, err := json.MarshalIndent(liberoGolden{
			Golden:  goldenText,
			Actions: got.Actions, ActionHorizon: got.ActionHorizon, ActionKeys: got.ActionKeys,
			Embodiment: got.Embodiment, EmbodimentID: got.EmbodimentID,
		}, "", " ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(goldenPath, append(out, '\n'), 0o644))
		t.Logf("wrote %s", goldenPath)
	}
	gb, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	var golden liberoGolden
	require.NoError(t, json.Unmarshal(gb, &golden))
	assert.Equal(t, keys, golden.ActionKeys)
	assert.Equal(t, 16, golden.ActionHorizon)
	assert.Equal(t, goldenText, golden.Golden)
	assert.Equal(t, 2, golden.EmbodimentID)
	for _, k := range keys {
		require.Len(t, golden.Actions[k], 16, k)
		for i, row := range golden.Actions[k] {
			assert.InDelta(t, row[0], got.Actions[k][i][0], 1e-5, "%s[%d]", k, i)
		}
	}

	// Deterministic: a second call gives the same bits. It also asks for
	// the normalised chunk, gated by its own golden: many of the tiny
	// model's actions saturate at the statistics' bounds, the normalised
	// values do not.
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	m["return_normalized"] = true
	body, err := json.Marshal(m)
	require.NoError(t, err)
	st, b2 := post(body)
	require.Equal(t, 200, st)
	var again service.PredictResponse
	require.NoError(t, json.Unmarshal(b2, &again))
	assert.Equal(t, got.Actions, again.Actions)
	require.Len(t, again.ActionPredValidHD, 16)
	require.Len(t, again.ActionPredValidHD[0], 7)
	validPath := filepath.Join(demoDir, "action_pred_valid.json")
	type validGolden struct {
		ActionPredValid [][]float64 `json:"action_pred_valid"`
	}
	if update {
		out, err := json.MarshalIndent(validGolden{again.ActionPredValidHD}, "", " ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(validPath, append(out, '\n'), 0o644))
	}
	vb, err := os.ReadFile(validPath)
	require.NoError(t, err)
	var vg validGolden
	require.NoError(t, json.Unmarshal(vb, &vg))
	require.Len(t, vg.ActionPredValid, 16)
	for i, row := range vg.ActionPredValid {
		require.Len(t, row, 7)
		for j := range row {
			assert.InDelta(t, row[j], again.ActionPredValidHD[i][j], 1e-5, "action_pred_valid[%d][%d]", i, j)
		}
	}

	// The model-space chunk is the model's 40 steps; the valid slice is
	// its first 16 rows × 7 columns.
	require.Len(t, again.ActionPredNormalized, 40)
	for i := range 16 {
		require.Len(t, again.ActionPredNormalized[i], 132)
		assert.Equal(t, again.ActionPredNormalized[i][:7], again.ActionPredValidHD[i], "row %d", i)
	}

	// /info reports the model's noise shape, the embodiment's horizon.
	ireq, _ := http.NewRequest("GET", "/info", nil)
	iresp, err := srv.App().Test(ireq, -1)
	require.NoError(t, err)
	ib, _ := io.ReadAll(iresp.Body)
	var info struct {
		Noise struct {
			Shape []int `json:"shape"`
		} `json:"noise"`
		Task struct {
			ActionHorizon int `json:"action_horizon"`
		} `json:"task"`
		Inputs struct {
			LMax int `json:"L_max"`
		} `json:"inputs"`
		Embodiments []struct {
			Name string
			Demo struct {
				Source string
				Golden bool
				Note   string
			}
		} `json:"embodiments"`
	}
	require.NoError(t, json.Unmarshal(ib, &info))
	assert.Equal(t, []int{40, 132}, info.Noise.Shape)
	assert.Equal(t, 16, info.Task.ActionHorizon)
	assert.Equal(t, 51, info.Inputs.LMax)
	require.Len(t, info.Embodiments, 1)
	assert.Equal(t, demoDir, info.Embodiments[0].Demo.Source)
	if !update { // Open read the note before this run rewrote the file
		assert.True(t, info.Embodiments[0].Demo.Golden)
		assert.Equal(t, goldenText, info.Embodiments[0].Demo.Note)
	}

	// Explicit noise covers the model's chunk [40, 132] (or [1, 40, 132]):
	// 200, 16-step actions, bit-identical on repeat.
	noise := make([][]float64, 40)
	for i := range noise {
		noise[i] = make([]float64, 132)
		for j := range noise[i] {
			noise[i][j] = math.Sin(float64(i*132+j) * 0.61)
		}
	}
	var noisy []service.PredictResponse
	for _, n := range []any{noise, [][][]float64{noise}} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		delete(m, "seed")
		m["noise"] = n
		m["return_normalized"] = true
		body, err := json.Marshal(m)
		require.NoError(t, err)
		st, b := post(body)
		require.Equal(t, 200, st, string(b))
		var pr service.PredictResponse
		require.NoError(t, json.Unmarshal(b, &pr))
		assert.Equal(t, "client", pr.NoiseSource)
		assert.Equal(t, 16, pr.ActionHorizon)
		for _, k := range keys {
			require.Len(t, pr.Actions[k], 16, k)
		}
		require.Len(t, pr.ActionPredNormalized, 40)
		noisy = append(noisy, pr)
	}
	assert.Equal(t, noisy[0].Actions, noisy[1].Actions, "same noise, same actions")
	assert.Equal(t, noisy[0].ActionPredNormalized, noisy[1].ActionPredNormalized)
	assert.NotEqual(t, again.ActionPredNormalized, noisy[0].ActionPredNormalized, "the noise reaches the model")

	// Libero-specific client errors name their field.
	droidRaw, err := os.ReadFile(filepath.Join(root, "testdata", "n17-tiny", "caseA", "request.json"))
	require.NoError(t, err)
	var droidReq map[string]any
	require.NoError(t, json.Unmarshal(droidRaw, &droidReq))
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		f(m)
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return out
	}
	for _, tc := range []struct {
		name, field string
		body        []byte
	}{
		{"droid state", `"field":"state.`, mutate(func(m map[string]any) {
			m["state"] = map[string]any{"eef_9d": make([]float64, 9), "gripper_position": []float64{0}, "joint_position": make([]float64, 7)}
		})},
		{"gripper width", `"field":"state.gripper"`, mutate(func(m map[string]any) {
			m["state"].(map[string]any)["gripper"] = []float64{0.03}
		})},
		{"droid cameras", `"field":"images.`, mutate(func(m map[string]any) {
			imgs := m["images"].(map[string]any)
			m["images"] = map[string]any{"exterior_image_1_left": imgs["image"], "wrist_image_left": imgs["wrist_image"]}
		})},
		{"two frames", `"field":"images.image"`, mutate(func(m map[string]any) {
			im := m["images"].(map[string]any)["image"].([]any)
			m["images"].(map[string]any)["image"] = []any{im[0], im[0]}
		})},
		{"16:9 frame", `"field":"images.wrist_image[0]"`, mutate(func(m map[string]any) {
			m["images"].(map[string]any)["wrist_image"] = droidReq["images"].(map[string]any)["wrist_image_left"].([]any)[1:]
		})},
		{"droid embodiment", `"field":"embodiment"`, mutate(func(m map[string]any) {
			m["embodiment"] = processor.DROIDTag
		})},
		{"horizon-shaped noise", `"field":"noise"`, mutate(func(m map[string]any) {
			delete(m, "seed")
			n := make([][]float64, 16)
			for i := range n {
				n[i] = make([]float64, 132)
			}
			m["noise"] = n
		})},
	} {
		st, b := post(tc.body)
		t.Logf("%s: %d %s", tc.name, st, b)
		assert.Equal(t, 400, st, "%s: %s", tc.name, b)
		assert.Contains(t, string(b), tc.field, tc.name)
	}
}

// liberoDescription is the libero plugin's gw_describe as the checks see it.
func liberoDescription() plugins.Description {
	d := plugins.Description{Name: "libero", Version: "1.0.0", Embodiment: liberoTag, ProjectorSlot: 2, ActionHorizon: 16,
		MaxStateDim: 132, MaxActionDim: 132,
		Language: abi.Language{Key: "annotation.human.action.task_description"},
		Layout:   abi.Layout{Name: "libero", VitGridTHW: [3]int{1, 16, 16}, LMax: 51}}
	for _, c := range []string{"image", "wrist_image"} {
		d.Cameras = append(d.Cameras, abi.Camera{Key: c, DeltaIndices: []int{0}, Height: 256, Width: 256})
	}
	for _, k := range []string{"x", "y", "z", "roll", "pitch", "yaw", "gripper"} {
		dim := 1
		if k == "gripper" {
			dim = 2
		}
		d.State = append(d.State, abi.StateGroup{Key: k, Dim: dim, DeltaIndices: []int{0}})
		d.Actions = append(d.Actions, abi.ActionGroup{Key: k, Dim: 1, Rep: abi.RepAbsolute, Type: abi.TypeNonEEF, Format: abi.FormatDefault})
	}
	return d
}

// TestCheckServed: every way a plugin can disagree with the checkpoint
// is refused with the disagreement named; the agreeing plugin gets its
// aligned processor config.
func TestCheckServed(t *testing.T) {
	ck, err := ReadCheckpoint(filepath.Join(repoRoot(t), "testdata", "n17-tiny"))
	require.NoError(t, err)
	swap := func(a []abi.ActionGroup) { a[0], a[1] = a[1], a[0] }
	for _, tc := range []struct {
		name    string
		edit    func(*plugins.Description)
		wantErr string
	}{
		{"ok", func(*plugins.Description) {}, ""},
		{"slot", func(d *plugins.Description) { d.ProjectorSlot = 3 }, "projector slot 2, the plugin declares 3"},
		{"slot range", func(d *plugins.Description) { d.ProjectorSlot = 32 }, "outside the checkpoint's 32 slots"},
		{"unknown tag", func(d *plugins.Description) { d.Embodiment = "new_embodiment"; d.ProjectorSlot = 10 }, "no entry for it"},
		{"no slot entry", func(d *plugins.Description) { d.Embodiment = "no_such_robot" }, "embodiment_id.json has no entry"},
		{"state width", func(d *plugins.Description) { d.State[6].Dim = 1 }, "state.gripper has width 2, the plugin's state group 1"},
		{"state order", func(d *plugins.Description) { d.State[0], d.State[1] = d.State[1], d.State[0] }, "state keys [y x z"},
		{"state frames", func(d *plugins.Description) { d.State[0].DeltaIndices = []int{-1, 0} }, "state.x frame offsets"},
		{"action width", func(d *plugins.Description) { d.Actions[0].Dim = 2 }, "action.x has width 1"},
		{"action order", func(d *plugins.Description) { swap(d.Actions) }, "action keys [y x"},
		{"relative", func(d *plugins.Description) { d.Actions[0].Rep = abi.RepRelative; d.Actions[0].StateKey = "x" }, "action.x is RELATIVE/NON_EEF/DEFAULT"},
		{"eef", func(d *plugins.Description) { d.Actions[0].Type = abi.TypeEEF }, "processor_config.json says ABSOLUTE/NON_EEF/DEFAULT"},
		{"horizon", func(d *plugins.Description) { d.ActionHorizon = 40 }, "action horizon 40, processor_config.json 16"},
		{"model horizon", func(d *plugins.Description) { d.ActionHorizon = 41 }, "outside the model's 40"},
		{"max dims", func(d *plugins.Description) { d.MaxStateDim = 64 }, "max_state_dim/max_action_dim 64/132"},
		{"camera order", func(d *plugins.Description) { d.Cameras[0], d.Cameras[1] = d.Cameras[1], d.Cameras[0] }, "plugin cameras"},
		{"frames", func(d *plugins.Description) { d.Cameras[1].DeltaIndices = []int{-15, 0} }, "frame offsets"},
		{"grid", func(d *plugins.Description) { d.Layout.VitGridTHW = [3]int{1, 16, 28} }, "gives grid"},
		{"frame size", func(d *plugins.Description) { d.Cameras[0].Width = 320 }, "gives grid"},
		{"language", func(d *plugins.Description) { d.Language.Key = "annotation.language.language_instruction" }, "language key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := liberoDescription()
			tc.edit(&d)
			c, err := checkServed(&d, ck)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), "plugin libero 1.0.0 vs checkpoint")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, image.Grid{T: 1, H: 16, W: 16}, c.RequireGrid)
			assert.Equal(t, 51, c.MaxTextTokens)
			assert.Equal(t, 16, c.ActionHorizon)
		})
	}

	// A mean/std state encoding is beyond the plugin contract.
	dir := tinyCheckpointCopy(t)
	pc, err := os.ReadFile(filepath.Join(dir, "processor_config.json"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(pc, &doc))
	doc["processor_kwargs"].(map[string]any)["modality_configs"].(map[string]any)[liberoTag].(map[string]any)["state"].(map[string]any)["mean_std_embedding_keys"] = []string{"x"}
	pc, _ = json.Marshal(doc)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "processor_config.json"), pc, 0o644))
	ck2, err := ReadCheckpoint(dir)
	require.NoError(t, err)
	d := liberoDescription()
	_, err = checkServed(&d, ck2)
	assert.ErrorContains(t, err, "mean/std")
}

// tinyCheckpointCopy is a writable copy of n17-tiny's side files with the
// weights linked, for tests that edit the side files.
func tinyCheckpointCopy(t *testing.T) string {
	t.Helper()
	src := filepath.Join(repoRoot(t), "testdata", "n17-tiny")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "backbone_config.json", "processor_config.json", "statistics.json", "embodiment_id.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	require.NoError(t, os.Symlink(filepath.Join(src, "model.safetensors"), filepath.Join(dir, "model.safetensors")))
	require.NoError(t, os.Symlink(filepath.Join(src, "caseA"), filepath.Join(dir, "caseA")))
	return dir
}

// TestOpenLiberoOnDROIDCheckpoint: the libero plugin cannot be the default
// embodiment of a checkpoint without libero_sim statistics; Open fails
// naming the embodiment, before the backend, and leaves nothing open.
// With DROID as the default the same checkpoint serves, and libero_sim is
// refused with its reason.
func TestOpenLiberoOnDROIDCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin")
	}
	root := repoRoot(t)
	dir := tinyCheckpointCopy(t)
	var stats map[string]json.RawMessage
	b, err := os.ReadFile(filepath.Join(dir, "statistics.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &stats))
	delete(stats, liberoTag)
	b, _ = json.Marshal(stats)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "statistics.json"), b, 0o644))

	cfg := config.Default()
	cfg.Embodiment = liberoTag
	cfg.WarmupRuns = 0
	cfg.WeightsDir = dir
	paths := Resolve(cfg, root)
	paths.Plugins = pluginsDir(t, root)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err = Open(context.Background(), cfg, paths, log, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "default embodiment "+liberoTag)
	assert.Contains(t, err.Error(), "statistics")

	cfg = config.Default()
	cfg.Threads = 2
	cfg.WeightsDir = dir
	core, err := service.New(service.Options{Config: cfg, Logger: log})
	require.NoError(t, err)
	srv, err := httpfront.New(core, httpfront.Options{})
	require.NoError(t, err)
	require.NoError(t, core.Start(context.Background(), func(ctx context.Context) (*service.Deps, error) {
		return Open(ctx, cfg, paths, log, nil)
	}))
	defer core.Shutdown(context.Background(), srv.Shutdown)
	require.True(t, core.WaitBound(context.Background()))
	req, _ := http.NewRequest("GET", "/info", nil)
	resp, err := srv.App().Test(req, -1)
	require.NoError(t, err)
	ib, _ := io.ReadAll(resp.Body)
	var info struct {
		Embodiments []struct{ Name, Status string } `json:"embodiments"`
	}
	require.NoError(t, json.Unmarshal(ib, &info))
	require.Len(t, info.Embodiments, 2)
	assert.Equal(t, liberoTag, info.Embodiments[0].Name)
	assert.Contains(t, info.Embodiments[0].Status, "statistics")
	assert.Equal(t, "ok", info.Embodiments[1].Status)
}

// A layout the backend cannot run is refused at bind time, naming the limit.
func TestCheckLayout(t *testing.T) {
	ck, err := ReadCheckpoint(filepath.Join(repoRoot(t), "testdata", "n17-tiny"))
	require.NoError(t, err)
	d := liberoDescription()
	pc, err := checkServed(&d, ck)
	require.NoError(t, err)
	for _, tc := range []struct {
		f       device.Facts
		wantErr string
	}{
		{device.Facts{MaxImages: 4, MaxPatches: 1792, MaxSeqLen: 512}, ""},
		{device.Facts{}, ""},
		{device.Facts{MaxImages: 1}, "2 images per request, the backend serves at most 1"},
		{device.Facts{MaxPatches: 300}, "512 patch rows, the backend serves at most 300"},
		{device.Facts{MaxSeqLen: 100}, "needs at least 132 prompt tokens"},
	} {
		c := pc
		c.MaxSeqLen = tc.f.MaxSeqLen
		err := checkLayout(&c, &d, tc.f)
		if tc.wantErr == "" {
			assert.NoError(t, err)
			continue
		}
		assert.ErrorContains(t, err, tc.wantErr)
	}
}

// A checkpoint with no demo of its own (a real snapshot, say) is served
// with the plugins' shipped demo observations: warm-up checks finiteness
// and repeat determinism (no golden belongs to this checkpoint).
func TestServeWithPluginDemos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugins and opens the CPU backend")
	}
	root := repoRoot(t)
	dir := tinyCheckpointCopy(t)
	require.NoError(t, os.Remove(filepath.Join(dir, "caseA")))
	cfg := config.Default()
	cfg.Threads = 2
	cfg.WeightsDir = dir
	cfg.GoldenDir = "-" // a golden computed on this machine would be used instead
	paths := Resolve(cfg, root)
	pd := pluginsDir(t, root)
	for _, n := range []string{"droid", "libero"} {
		// As gwplugin-pack ships them (plugintest.Pack does not).
		src := filepath.Join(root, "embodiments", n, "testdata", "demo", "request.json")
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(pd, n, "demo"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(pd, n, "demo", "request.json"), b, 0o644))
	}
	paths.Plugins = pd
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	core, err := service.New(service.Options{Config: cfg, Logger: log})
	require.NoError(t, err)
	srv, err := httpfront.New(core, httpfront.Options{})
	require.NoError(t, err)
	require.NoError(t, core.Start(context.Background(), func(ctx context.Context) (*service.Deps, error) {
		return Open(ctx, cfg, paths, log, nil)
	}))
	defer core.Shutdown(context.Background(), srv.Shutdown)
	require.True(t, core.WaitBound(context.Background()))
	req, _ := http.NewRequest("GET", "/info", nil)
	resp, err := srv.App().Test(req, -1)
	require.NoError(t, err)
	ib, _ := io.ReadAll(resp.Body)
	var info struct {
		Embodiments []struct {
			Name, Status string
			Warmup       struct{ Check string }
			Demo         struct {
				Source string
				Golden bool
			}
		} `json:"embodiments"`
	}
	require.NoError(t, json.Unmarshal(ib, &info))
	require.Len(t, info.Embodiments, 2, string(ib))
	for _, e := range info.Embodiments {
		assert.Equal(t, "ok", e.Status, e.Name)
		assert.Equal(t, "determinism", e.Warmup.Check, e.Name)
		assert.False(t, e.Demo.Golden, e.Name)
		assert.Contains(t, e.Demo.Source, pd, e.Name)
	}
}
