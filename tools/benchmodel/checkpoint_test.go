package benchmodel

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/safetensors"
)

const tinyDir = "../../testdata/n17-tiny"

// TestWriteCheckpointTiny runs the real-size writer's code on the tiny
// checkpoint's plan (the real-size checkpoint is 6.3 GB: make bench-model
// writes it): the same tensor names, shapes and dtype as the tiny
// checkpoint, two shards and an index, the side files every shipped plugin
// needs, synth's values, and a checkpoint the CPU backend opens and
// predicts with (through RunStages, which make bench-model times).
func TestWriteCheckpointTiny(t *testing.T) {
	cfg, err := model.LoadConfig(tinyDir)
	require.NoError(t, err)
	cfgJSON, err := os.ReadFile(filepath.Join(tinyDir, model.ConfigFile))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, writeCheckpoint(dir, tinyDir, model.Plan(cfg), cfgJSON))
	require.Error(t, writeCheckpoint(dir, tinyDir, model.Plan(cfg), cfgJSON), "a non-empty directory is refused")
	assert.False(t, NeedsCheckpoint(dir))
	assert.True(t, NeedsCheckpoint(filepath.Join(dir, "absent")))
	bb, err := os.ReadFile(filepath.Join(tinyDir, model.BackboneConfigFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, model.BackboneConfigFile), bb, 0o644))

	for _, f := range sideFiles {
		want, err := os.ReadFile(filepath.Join(tinyDir, f))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, want, got, f)
	}
	shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	require.NoError(t, err)
	assert.Len(t, shards, CheckpointShards)

	ref, err := safetensors.Open(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	got, err := safetensors.Open(dir)
	require.NoError(t, err)
	assert.ElementsMatch(t, ref.Names(), got.Names())
	for _, n := range ref.Names() {
		ri, _ := ref.Info(n)
		gi, ok := got.Info(n)
		require.True(t, ok, n)
		assert.Equal(t, ri.Shape, gi.Shape, n)
		assert.Equal(t, safetensors.DType("BF16"), gi.DType, n)
	}
	const name = "action_head.model.transformer_blocks.0.ff.net.0.proj.weight"
	gi, _ := got.Info(name)
	vals, err := got.Float32(name)
	require.NoError(t, err)
	assert.Equal(t, synth(name, len(vals), fanIn(name, gi.Shape)), vals)

	run, err := RunStages(context.Background(), dir, filepath.Join(tinyDir, "caseA"), "", 2, 1)
	require.NoError(t, err)
	require.Len(t, run.Loads, 2)
	assert.Equal(t, min(run.Loads[0].Wall, run.Loads[1].Wall), run.Load.Wall)
	require.Len(t, run.ActionPred, cfg.ActionHorizon*cfg.MaxActionDim)
	for _, v := range run.ActionPred {
		require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
	}
	for _, s := range Stages {
		assert.Positive(t, run.Stages[s].Wall, s)
	}
	assert.Positive(t, run.Load.Wall)
}

// TestRealConfigJSON: the real-size config.json carries N1.7-3B's
// dimensions, and its plan (with the built-in Qwen3-VL backbone) is the
// real checkpoint's 6,288,032,000 bytes of BF16.
func TestRealConfigJSON(t *testing.T) {
	b, err := realConfigJSON(filepath.Join(tinyDir, model.ConfigFile))
	require.NoError(t, err)
	cfg, err := model.ParseConfig(b)
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	d := model.DefaultConfig()
	assert.Equal(t, d.DiT, cfg.DiT)
	assert.Equal(t, d.VLSelfAttention, cfg.VLSelfAttention)
	assert.Equal(t, d.SelectLayer, cfg.SelectLayer)
	var total int64
	for _, s := range model.Plan(cfg) {
		if s.Name != "lm_head.weight" {
			total += 2 * s.NumElements()
		}
	}
	assert.Equal(t, int64(6_288_032_000), total)
}

// TestPCC: 1 for equal and affine-related data, -1 for negated, the
// constant cases defined.
func TestPCC(t *testing.T) {
	a := []float32{1, 2, 3, 5}
	assert.InDelta(t, 1, PCC(a, a), 1e-12)
	assert.InDelta(t, 1, PCC(a, []float32{3, 5, 7, 11}), 1e-12)
	assert.InDelta(t, -1, PCC(a, []float32{-1, -2, -3, -5}), 1e-12)
	assert.Equal(t, 1.0, PCC([]float32{2, 2}, []float32{2, 2}))
	assert.Equal(t, 0.0, PCC([]float32{2, 2}, a[:2]))
	assert.Equal(t, 0.0, PCC(nil, nil))
}
