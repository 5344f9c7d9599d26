package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/internal/inputsdir"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

const (
	runTiny  = "../../testdata/n17-tiny"
	runCaseA = runTiny + "/caseA"
)

func readGolden(t *testing.T, path string) []float32 {
	t.Helper()
	v, err := inputsdir.ReadFloat32s(path)
	require.NoError(t, err)
	return v
}

// droidPlugins packs the DROID plugin into a fresh plugins_dir.
func droidPlugins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, err := plugintest.Pack(context.Background(), plugintest.Guest{Dir: "../../embodiments/droid"}, dir)
	require.NoError(t, err)
	return dir
}

// TestNormalizeStateGolden: the request's raw DROID state through the
// plugin's pre (as /predict runs it) equals the golden state_normalized
// bit for bit.
func TestNormalizeStateGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(runCaseA, "request.json"))
	require.NoError(t, err)
	var req runRequest
	require.NoError(t, json.Unmarshal(b, &req))
	ctx := context.Background()
	emb, closeEmb, err := openRunPlugin(ctx, runFlags{weights: runTiny, plugins: droidPlugins(t)}, req.Embodiment)
	require.NoError(t, err)
	defer closeEmb(ctx)
	got, err := pluginState(ctx, emb, req.Embodiment, &req)
	require.NoError(t, err)
	want := readGolden(t, filepath.Join(runCaseA, "state_normalized.npy"))
	require.Len(t, got, 132)
	for i := range want {
		assert.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "dim %d: %v vs %v", i, got[i], want[i])
	}
	delete(req.State, "gripper_position")
	_, err = pluginState(ctx, emb, req.Embodiment, &req)
	assert.ErrorContains(t, err, "gripper_position")
}

// TestRunCaseA: `gr00tgw run` on case A's encoded inputs with the request's
// state and noise reproduces action_pred and writes the taps.
func TestRunCaseA(t *testing.T) {
	out := t.TempDir()
	err := runCmd(context.Background(), []string{"--weights-dir", runTiny, "--request", filepath.Join(runCaseA, "request.json"),
		"--inputs", runCaseA, "--out", out, "--taps"})
	require.NoError(t, err)
	got := readGolden(t, filepath.Join(out, "action_pred.npy"))
	want := readGolden(t, filepath.Join(runCaseA, "action_pred.npy"))
	require.Len(t, got, len(want))
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-4)
	}
	a, err := npy.ReadFile(filepath.Join(out, "action_pred_valid.npy"))
	require.NoError(t, err)
	assert.Equal(t, []int{40, 17}, a.Shape)
	for _, n := range []string{"vision_block_3", "llm_layer_0", "backbone_features", "adapter_out", "euler_x", "dit_out", "temb", "state_features", "pixel_values", "position_ids"} {
		a, err := npy.ReadFile(filepath.Join(out, n+".npy"))
		require.NoError(t, err, n)
		if g, err := npy.ReadFile(filepath.Join(runCaseA, n+".npy")); err == nil {
			assert.Equal(t, g.Shape, a.Shape, n)
		}
	}
	var timing map[string]float64
	b, err := os.ReadFile(filepath.Join(out, "timing.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &timing))
	for _, k := range []string{"preprocess", "load", "load_warmup", "vision", "llm", "adapter", "denoise", "decode", "total"} {
		assert.Contains(t, timing, k)
	}
	if _, err := os.Stat("/proc/self/status"); err == nil {
		for _, k := range []string{"rss_after_load_mib", "rss_peak_after_load_mib", "rss_peak_mib"} {
			assert.Greater(t, timing[k], 0.0, k)
		}
	}
	assert.Less(t, timing["load"], timing["total"])
}

// TestRunMixedDiT: `gr00tgw run --policy mixed_dit` serves case A through
// the megakernel emulation: action_pred within PCC 0.999 of the golden,
// facts.json names the policy and the arena.
func TestRunMixedDiT(t *testing.T) {
	out := t.TempDir()
	err := runCmd(context.Background(), []string{"--weights-dir", runTiny, "--request", filepath.Join(runCaseA, "request.json"),
		"--inputs", runCaseA, "--out", out, "--policy", "mixed_dit"})
	require.NoError(t, err)
	got := readGolden(t, filepath.Join(out, "action_pred.npy"))
	want := readGolden(t, filepath.Join(runCaseA, "action_pred.npy"))
	require.Len(t, got, len(want))
	var sab, saa, sbb, ma, mb float64
	for i := range want {
		ma += float64(got[i]) / float64(len(want))
		mb += float64(want[i]) / float64(len(want))
	}
	for i := range want {
		x, y := float64(got[i])-ma, float64(want[i])-mb
		sab, saa, sbb = sab+x*y, saa+x*x, sbb+y*y
	}
	assert.GreaterOrEqual(t, sab/math.Sqrt(saa*sbb), 0.999)
	var facts struct {
		Policy string `json:"policy"`
		Extra  struct {
			Stage struct {
				ArenaDType string         `json:"mk_arena_dtype"`
				Arena      map[string]any `json:"arena"`
			} `json:"stage"`
		} `json:"extra"`
	}
	b, err := os.ReadFile(filepath.Join(out, "facts.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &facts))
	assert.Equal(t, "mixed_dit", facts.Policy)
	assert.Equal(t, "bfloat8_b", facts.Extra.Stage.ArenaDType)
	assert.Len(t, facts.Extra.Stage.Arena["digest_sha256"], 64)
	err = runCmd(context.Background(), []string{"--weights-dir", runTiny, "--inputs", runCaseA, "--out", t.TempDir(), "--policy", "int4"})
	assert.ErrorContains(t, err, "dtype policy[int4] not available")
}

// TestRunRequestEndToEnd: the /predict body alone (PNG frames,
// instruction, raw state, noise) through core/processor and the model
// reproduces the golden action_pred and the golden model inputs.
func TestRunRequestEndToEnd(t *testing.T) {
	out := t.TempDir()
	err := runCmd(context.Background(), []string{"--weights-dir", runTiny, "--request", filepath.Join(runCaseA, "request.json"),
		"--out", out, "--taps"})
	require.NoError(t, err)
	got := readGolden(t, filepath.Join(out, "action_pred.npy"))
	want := readGolden(t, filepath.Join(runCaseA, "action_pred.npy"))
	worst := 0.0
	for i := range want {
		worst = max(worst, math.Abs(float64(got[i]-want[i])))
	}
	t.Logf("request → action_pred max|d| %.3g", worst)
	assert.LessOrEqual(t, worst, 1e-4)
	for _, n := range []string{"input_ids", "position_ids", "image_grid_thw"} {
		a, err := npy.ReadFile(filepath.Join(out, n+".npy"))
		require.NoError(t, err)
		g, err := npy.ReadFile(filepath.Join(runCaseA, n+".npy"))
		require.NoError(t, err)
		assert.Equal(t, g.Shape, a.Shape, n)
		assert.Equal(t, g.Data, a.Data, n)
	}
	checkActionsJSON(t, out)
}

// checkActionsJSON compares the decoded actions `gr00tgw run` wrote through
// the DROID plugin with the golden decoded actions (1e-5, the plugin issue's
// tolerance). make test builds build/plugins before the tests run; a bare
// `go test` without it only checks that run still succeeded.
func checkActionsJSON(t *testing.T, out string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("..", "..", "build", "plugins", "droid", "plugin.yaml")); err != nil {
		t.Log("build/plugins not built (make plugins): actions.json not checked")
		return
	}
	var got, want struct {
		Actions map[string][][]float64 `json:"actions"`
	}
	b, err := os.ReadFile(filepath.Join(out, "actions.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	b, err = os.ReadFile(filepath.Join(runCaseA, "actions.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &want))
	require.Len(t, got.Actions, len(want.Actions))
	for k, rows := range want.Actions {
		require.Len(t, got.Actions[k], len(rows), k)
		for i := range rows {
			for j := range rows[i] {
				require.InDelta(t, rows[i][j], got.Actions[k][i][j], 1e-5, "%s[%d][%d]", k, i, j)
			}
		}
	}
}

func TestRunUsage(t *testing.T) {
	err := runCmd(context.Background(), []string{"--request", "x.json"})
	assert.ErrorIs(t, err, errUsage)
	err = runCmd(context.Background(), []string{"--out", t.TempDir()})
	assert.ErrorIs(t, err, errUsage)
}

// TestRunStateNoiseFlags: --state and --noise files override the inputs
// dir; a wrong-length state is rejected with the backend's error.
func TestRunStateNoiseFlags(t *testing.T) {
	out := t.TempDir()
	err := runCmd(context.Background(), []string{"--weights-dir", runTiny, "--inputs", runCaseA, "--out", out,
		"--state", filepath.Join(runCaseA, "state_normalized.npy"), "--noise", filepath.Join(runCaseA, "noise.npy"), "--embodiment", "24"})
	require.NoError(t, err)
	got := readGolden(t, filepath.Join(out, "action_pred.npy"))
	want := readGolden(t, filepath.Join(runCaseA, "action_pred.npy"))
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-4)
	}
	bad := filepath.Join(t.TempDir(), "s.npy")
	require.NoError(t, npy.WriteFile(bad, []int{17}, make([]float32, 17)))
	err = runCmd(context.Background(), []string{"--weights-dir", runTiny, "--inputs", runCaseA, "--out", t.TempDir(), "--state", bad})
	assert.ErrorContains(t, err, "state has 17 values, want 132")
	err = runCmd(context.Background(), []string{"--weights-dir", runTiny, "--inputs", runCaseA, "--out", t.TempDir(), "--embodiment", "nope"})
	assert.ErrorContains(t, err, "embodiment_id.json has no entry for embodiment nope")
}
