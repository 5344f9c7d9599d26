package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// The fixture cases in testdata/cases are generated from the caseA goldens:
//
//	go test ./embodiments/droid -run TestCases -update
//
// and verified by TestCases and by
//
//	gr00tgw plugin verify build/plugins/droid/droid.wasm --cases embodiments/droid/testdata/cases --checkpoint testdata/n17-tiny
var update = flag.Bool("update", false, "rewrite testdata/cases from the goldens")

const casesDir = "testdata/cases"

func writeCases(t *testing.T) {
	c := loadCaseA(t)
	state := map[string]any{}
	nested := map[string]any{}
	for _, g := range groups {
		state[g.key] = c.state[g.key]
		nested[g.key] = [][]float64{c.state[g.key]}
	}
	cams := map[string]any{}
	for _, k := range cameras {
		cams[k] = map[string]int{"frames": 2, "height": 180, "width": 320}
	}
	pred := make([][]float32, 40)
	for k := range pred {
		pred[k] = c.actionPred[k*132 : (k+1)*132]
	}
	acts := map[string][][]float64{}
	for _, g := range groups {
		w := c.want[g.key]
		for k := 0; k < 40; k++ {
			acts[g.key] = append(acts[g.key], w[k*g.dim:(k+1)*g.dim])
		}
	}
	ins := "Put the blue block in the green bowl"
	with := func(m map[string]any, k string, v any) map[string]any {
		o := map[string]any{}
		for kk, vv := range m {
			o[kk] = vv
		}
		if v == nil {
			delete(o, k)
		} else {
			o[k] = v
		}
		return o
	}
	type obj = map[string]any
	cases := []obj{
		{"name": "caseA pre (golden state_normalized)", "stage": "pre",
			"input": obj{"embodiment": Tag, "instruction": ins, "state": state, "cameras": cams},
			"want":  obj{"state": c.wantState, "tolerance": 0}},
		{"name": "caseA pre, nested [[D]] state", "stage": "pre",
			"input": obj{"instruction": ins, "state": nested, "cameras": cams},
			"want":  obj{"state": c.wantState, "tolerance": 0}},
		{"name": "caseA post (golden actions)", "stage": "post",
			"input": obj{"action_pred": pred, "state": state},
			"want":  obj{"actions": acts, "tolerance": 1e-5}},
		{"name": "eef_9d with 8 values", "stage": "pre",
			"input": obj{"instruction": ins, "state": with(state, "eef_9d", c.state["eef_9d"][:8]), "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_state", "field": "state.eef_9d"}}},
		{"name": "missing joint_position", "stage": "pre",
			"input": obj{"instruction": ins, "state": with(state, "joint_position", nil), "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_state", "field": "state.joint_position"}}},
		{"name": "unknown state group", "stage": "pre",
			"input": obj{"instruction": ins, "state": with(state, "base_velocity", []float64{0}), "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_state", "field": "state.base_velocity"}}},
		{"name": "two timesteps", "stage": "pre",
			"input": obj{"instruction": ins, "state": with(state, "gripper_position", [][]float64{{0.1}, {0.2}}), "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_state", "field": "state.gripper_position"}}},
		{"name": "missing wrist camera", "stage": "pre",
			"input": obj{"instruction": ins, "state": state, "cameras": with(cams, "wrist_image_left", nil)},
			"want":  obj{"error": obj{"code": "invalid_camera", "field": "images.wrist_image_left"}}},
		{"name": "three frames", "stage": "pre",
			"input": obj{"instruction": ins, "state": state, "cameras": with(cams, "exterior_image_1_left", obj{"frames": 3, "height": 180, "width": 320})},
			"want":  obj{"error": obj{"code": "invalid_camera", "field": "images.exterior_image_1_left"}}},
		{"name": "4:3 frame", "stage": "pre",
			"input": obj{"instruction": ins, "state": state, "cameras": with(cams, "exterior_image_1_left", obj{"frames": 2, "height": 480, "width": 640})},
			"want":  obj{"error": obj{"code": "invalid_camera", "field": "images.exterior_image_1_left"}}},
		{"name": "empty instruction", "stage": "pre",
			"input": obj{"instruction": "", "state": state, "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_instruction", "field": "instruction"}}},
		{"name": "other embodiment", "stage": "pre",
			"input": obj{"embodiment": "libero_sim", "instruction": ins, "state": state, "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_embodiment", "field": "embodiment"}}},
		{"name": "bad state_dtype", "stage": "pre",
			"input": obj{"instruction": ins, "state_dtype": "float16", "state": state, "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_state", "field": "state_dtype"}}},
		{"name": "post with a short chunk", "stage": "post",
			"input": obj{"action_pred": pred[:10], "state": state},
			"want":  obj{"error": obj{"code": "invalid_action", "field": "action_pred"}}},
		{"name": "eef_9d with a zero rot6d vector", "stage": "pre",
			"input": obj{"instruction": ins, "state": with(state, "eef_9d", []float64{0.1, 0.2, 0.3, 0, 0, 0, 0, 1, 0}), "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_state", "field": "state.eef_9d"}}},
		{"name": "eef_9d with parallel rot6d vectors", "stage": "pre",
			"input": obj{"instruction": ins, "state": with(state, "eef_9d", []float64{0.1, 0.2, 0.3, 1, 0, 0, 1, 0, 0}), "cameras": cams},
			"want":  obj{"error": obj{"code": "invalid_state", "field": "state.eef_9d"}}},
	}
	require.NoError(t, os.MkdirAll(casesDir, 0o755))
	old, _ := filepath.Glob(filepath.Join(casesDir, "*.json"))
	for _, f := range old {
		require.NoError(t, os.Remove(f))
	}
	for i, cs := range cases {
		b, err := json.MarshalIndent(cs, "", " ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(casesDir, fmt.Sprintf("%02d.json", i)), append(b, '\n'), 0o644))
	}
}

// TestCases runs the fixture cases through the real droid.wasm with the
// plugintest harness (the same path as `gr00tgw plugin verify`).
func TestCases(t *testing.T) {
	if *update {
		writeCases(t)
	}
	wasm := plugintest.BuildGuest(t, ".")
	dir := t.TempDir()
	b, err := os.ReadFile(wasm)
	require.NoError(t, err)
	tmpl, err := os.ReadFile(plugins.ManifestFile)
	require.NoError(t, err)
	m, err := plugins.ParseManifestTemplate(tmpl)
	require.NoError(t, err)
	require.NoError(t, plugins.Complete(context.Background(), m, b))
	require.NoError(t, plugins.WritePluginDir(dir, m, b))
	rep, err := plugintest.Verify(context.Background(), filepath.Join(dir, "droid.wasm"), plugintest.VerifyOptions{
		CasesDir: casesDir, CheckpointDir: goldenDir,
		HostOptions: plugintest.DefaultOptions(t),
	})
	require.NoError(t, err)
	require.Len(t, rep.Cases, 16)
	for _, c := range rep.Cases {
		require.NoError(t, c.Err, "%s (%s)", c.Name, c.File)
	}
}
