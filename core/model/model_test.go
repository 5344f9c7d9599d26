package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gr00tgw/gr00tgw/core/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tinyDir = "../../testdata/n17-tiny"

// TestPlanRealInventory checks the plan against the real nvidia/GR00T-N1.7-3B
// snapshot (1,031 tensors, 6,910,361,856 bytes of BF16): the configuration
// implies 1,030 tensors and 6,288,032,000 bytes without lm_head.weight, the
// one stored tensor the model never reads (151,936 × 2,048).
func TestPlanRealInventory(t *testing.T) {
	cfg := DefaultConfig()
	require.NoError(t, cfg.Validate())
	plan := Plan(cfg)
	require.Len(t, plan, 1031)
	var bytes, lmBytes int64
	names := map[string]bool{}
	for _, s := range plan {
		require.False(t, names[s.Name], "duplicate %s", s.Name)
		names[s.Name] = true
		if s.Name == LMHeadName {
			lmBytes = 2 * s.NumElements()
			continue
		}
		bytes += 2 * s.NumElements()
	}
	assert.Equal(t, int64(6_288_032_000), bytes)
	assert.Equal(t, int64(622_329_856), lmBytes)
	assert.Equal(t, int64(6_910_361_856), bytes+lmBytes)
	// Spot checks of upstream's names and [out, in] shapes.
	want := map[string][]int{
		VisionPrefix + "blocks.23.attn.qkv.weight":                         {3072, 1024},
		VisionPrefix + "deepstack_merger_list.2.linear_fc2.weight":         {2048, 4096},
		LLMPrefix + "layers.15.self_attn.k_proj.weight":                    {1024, 2048},
		ActionHeadPrefix + "model.transformer_blocks.30.attn1.to_k.weight": {1536, 2048},
		ActionHeadPrefix + "model.transformer_blocks.31.attn1.to_k.weight": {1536, 1536},
		ActionHeadPrefix + "action_encoder.W2.W":                           {32, 3072, 1536},
		ActionHeadPrefix + "action_decoder.layer2.b":                       {32, 132},
	}
	for _, s := range plan {
		if w, ok := want[s.Name]; ok {
			assert.Equal(t, w, s.Shape, s.Name)
			delete(want, s.Name)
		}
	}
	assert.Empty(t, want)
}

func TestLoadConfigTiny(t *testing.T) {
	cfg, err := LoadConfig(tinyDir)
	require.NoError(t, err)
	assert.Equal(t, 4, cfg.SelectLayer)
	assert.Equal(t, []int{4, 2, 2}, cfg.Backbone.Text.MRoPESection)
	assert.Equal(t, []int{0, 1, 2}, cfg.Backbone.Vision.DeepstackVisualIndexes)
	assert.Equal(t, 32, cfg.Backbone.Vision.HiddenSize)
	assert.Equal(t, 16, cfg.Backbone.Vision.HeadDim())
	assert.Equal(t, 48, cfg.Backbone.Vision.GridSide())
	assert.Equal(t, 1536, cfg.Backbone.Vision.PatchDim())
	assert.Equal(t, 5e6, cfg.Backbone.Text.RopeTheta)
	assert.Equal(t, 1e-6, cfg.Backbone.Text.RMSNormEps)
	assert.Equal(t, 8, cfg.DiT.NumLayers)
	assert.Equal(t, 64, cfg.DiT.InnerDim())
	assert.Equal(t, 2, cfg.VLSelfAttention.NumLayers)
	assert.Equal(t, 151655, cfg.Backbone.ImageTokenID)
	assert.True(t, strings.HasSuffix(cfg.Backbone.Source, BackboneConfigFile))
}

func TestLoadConfigBuiltinBackbone(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"select_layer": 16}`), 0o644))
	cfg, err := LoadConfig(dir)
	require.NoError(t, err)
	assert.Equal(t, "builtin", cfg.Backbone.Source)
	assert.Equal(t, []int{24, 20, 20}, cfg.Backbone.Text.MRoPESection)
	assert.Equal(t, []int{5, 11, 17}, cfg.Backbone.Vision.DeepstackVisualIndexes)
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"select layer too big", func(c *Config) { c.SelectLayer = 29 }, "select_layer 29 outside [1, 28]"},
		{"mrope sum", func(c *Config) { c.Backbone.Text.MRoPESection = []int{24, 20, 10} }, "mrope_section [24 20 10] sums to 54, want head_dim/2 = 64"},
		{"gqa", func(c *Config) { c.Backbone.Text.NumKeyValueHeads = 3 }, "num_attention_heads 16 not divisible by num_key_value_heads 3"},
		{"dit width", func(c *Config) { c.InputEmbeddingDim = 1000 }, "diffusion_model_cfg width 32×48 = 1536 != input_embedding_dim 1000"},
		{"act", func(c *Config) { c.Backbone.Vision.HiddenAct = "relu" }, `hidden_act "relu" unsupported`},
		{"deepstack", func(c *Config) { c.Backbone.Vision.DeepstackVisualIndexes = []int{5, 30} }, "deepstack_visual_indexes[1] = 30 outside [0, 24)"},
		{"backbone dim", func(c *Config) { c.BackboneEmbeddingDim = 1024 }, "backbone_embedding_dim 1024 != text_config.hidden_size 2048"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseConfigBadJSON(t *testing.T) {
	_, err := ParseConfig([]byte(`{"select_layer": "x"}`))
	require.ErrorIs(t, err, ErrConfig)
	_, err = ParseBackboneConfig([]byte(`{"text_config": {"rope_scaling": 3}}`))
	require.ErrorIs(t, err, ErrConfig)
}

func TestOpenTiny(t *testing.T) {
	ck, err := Open(tinyDir)
	require.NoError(t, err)
	defer ck.Close()
	assert.Len(t, ck.Plan, 290+1) // + lm_head, absent from the file
	assert.Len(t, ck.Digest, 64)
	// Used parameters: everything but the final norm (32).
	var all int64
	for _, n := range ck.Set().Names() {
		info, _ := ck.Set().Info(n)
		all += info.NumElements()
	}
	assert.Equal(t, all-32, ck.Params)
	w, err := ck.Float32(VisionPrefix + "blocks.0.attn.qkv.weight")
	require.NoError(t, err)
	assert.Len(t, w, 96*32)
	_, err = ck.Float32("nope")
	assert.ErrorContains(t, err, "tensor[nope] is not in the plan")
	_, err = ck.Float32(LMHeadName)
	assert.ErrorContains(t, err, "not used")
}

// writeCheckpoint writes a tiny-config checkpoint dir whose tensors are
// those of plan after edit (BF16 zeros), returning the dir.
func writeCheckpoint(t *testing.T, edit func([]safetensors.TensorInfo) []safetensors.TensorInfo) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{ConfigFile, BackboneConfigFile} {
		b, err := os.ReadFile(filepath.Join(tinyDir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	cfg, err := LoadConfig(dir)
	require.NoError(t, err)
	var infos []safetensors.TensorInfo
	for _, s := range Plan(cfg) {
		if s.Used {
			infos = append(infos, safetensors.TensorInfo{Name: s.Name, DType: safetensors.BF16, Shape: slices.Clone(s.Shape)})
		}
	}
	infos = edit(infos)
	data := make([][]byte, len(infos))
	for i, in := range infos {
		data[i] = make([]byte, in.NumElements()*int64(in.DType.Bits())/8)
	}
	b, err := safetensors.Encode(infos, data, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, safetensors.SingleFile), b, 0o644))
	return dir
}

func TestOpenBadCheckpoints(t *testing.T) {
	drop := func(names ...string) func([]safetensors.TensorInfo) []safetensors.TensorInfo {
		return func(in []safetensors.TensorInfo) []safetensors.TensorInfo {
			return slices.DeleteFunc(in, func(t safetensors.TensorInfo) bool { return slices.Contains(names, t.Name) })
		}
	}
	qkv := VisionPrefix + "blocks.1.attn.qkv.weight"
	cases := []struct {
		name string
		edit func([]safetensors.TensorInfo) []safetensors.TensorInfo
		want string
	}{
		{"ok", func(in []safetensors.TensorInfo) []safetensors.TensorInfo { return in }, ""},
		{"missing", drop(qkv, ActionHeadPrefix+"vlln.bias"),
			"model: checkpoint mismatch: 2 tensors missing: [action_head.vlln.bias backbone.model.model.visual.blocks.1.attn.qkv.weight]"},
		{"wrong shape", func(in []safetensors.TensorInfo) []safetensors.TensorInfo {
			for i := range in {
				if in[i].Name == qkv {
					in[i].Shape = []int{32, 96}
				}
			}
			return in
		}, "model: checkpoint mismatch: 1 tensor with wrong shape: [backbone.model.model.visual.blocks.1.attn.qkv.weight [32 96] want [96 32]]"},
		{"int dtype", func(in []safetensors.TensorInfo) []safetensors.TensorInfo {
			in[0].DType = safetensors.I16
			return in
		}, "model: checkpoint mismatch: 1 tensor with a non-float dtype: [backbone.model.model.visual.patch_embed.proj.weight I16]"},
		{"unexpected + lm_head accepted", func(in []safetensors.TensorInfo) []safetensors.TensorInfo {
			return append(in,
				safetensors.TensorInfo{Name: "backbone.model.model.language_model.layers.4.mlp.up_proj.weight", DType: safetensors.BF16, Shape: []int{96, 32}},
				safetensors.TensorInfo{Name: LMHeadName, DType: safetensors.BF16, Shape: []int{151936, 32}},
				safetensors.TensorInfo{Name: LLMPrefix + "norm.weight", DType: safetensors.BF16, Shape: []int{32}},
			)
		}, "model: checkpoint mismatch: 1 tensor unexpected: [backbone.model.model.language_model.layers.4.mlp.up_proj.weight]"},
		{"all at once", func(in []safetensors.TensorInfo) []safetensors.TensorInfo {
			in = drop(qkv)(in)
			in[1].Shape = []int{33}
			return append(in, safetensors.TensorInfo{Name: "extra", DType: safetensors.F32, Shape: []int{1}})
		}, "model: checkpoint mismatch: 1 tensor missing: [backbone.model.model.visual.blocks.1.attn.qkv.weight]; 1 tensor with wrong shape: [backbone.model.model.visual.patch_embed.proj.bias [33] want [32]]; 1 tensor unexpected: [extra]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeCheckpoint(t, tc.edit)
			ck, err := Open(dir)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, ck.Close())
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrCheckpoint)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

func TestOpenCorruptFiles(t *testing.T) {
	ok := writeCheckpoint(t, func(in []safetensors.TensorInfo) []safetensors.TensorInfo { return in })
	st := filepath.Join(ok, safetensors.SingleFile)
	good, err := os.ReadFile(st)
	require.NoError(t, err)

	t.Run("truncated", func(t *testing.T) {
		require.NoError(t, os.WriteFile(st, good[:len(good)-10], 0o644))
		_, err := Open(ok)
		require.Error(t, err)
		assert.ErrorIs(t, err, safetensors.ErrHeader)
		assert.Contains(t, err.Error(), "model: checkpoint: safetensors: file[")
	})
	t.Run("bad header", func(t *testing.T) {
		bad := slices.Clone(good)
		n := binary.LittleEndian.Uint64(bad)
		bad[8+n/2] = '}' // corrupt the JSON in the middle
		require.NoError(t, os.WriteFile(st, bad, 0o644))
		_, err := Open(ok)
		require.Error(t, err)
		assert.ErrorIs(t, err, safetensors.ErrHeader)
	})
	t.Run("huge length", func(t *testing.T) {
		bad := slices.Clone(good)
		binary.LittleEndian.PutUint64(bad, math.MaxUint64/2)
		require.NoError(t, os.WriteFile(st, bad, 0o644))
		_, err := Open(ok)
		require.Error(t, err)
		assert.ErrorIs(t, err, safetensors.ErrHeader)
	})
	t.Run("no weights", func(t *testing.T) {
		require.NoError(t, os.Remove(st))
		_, err := Open(ok)
		require.Error(t, err)
		assert.True(t, errors.Is(err, safetensors.ErrNotFound), err.Error())
	})
}

func FuzzParseBackboneConfig(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(tinyDir, BackboneConfigFile))
	if err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"text_config":{"rope_scaling":{"mrope_section":[1,2,3]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		bc, err := ParseBackboneConfig(b)
		if err != nil {
			return
		}
		c := DefaultConfig()
		c.Backbone = bc
		if c.Validate() == nil {
			_ = Plan(c)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(tinyDir, ConfigFile))
	if err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"diffusion_model_cfg": {"num_layers": 3}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if c.Validate() == nil {
			_ = Plan(c)
		}
	})
}

func TestLoadConfigBadBackbone(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(tinyDir, ConfigFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, BackboneConfigFile),
		[]byte(`{"text_config": {"hidden_size": 32, "head_dim": 16, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 5, "intermediate_size": 96, "rope_scaling": {"mrope_section": [4, 2, 1]}}, "vision_config": {"hidden_size": 32, "num_heads": 2, "depth": 4, "intermediate_size": 128, "out_hidden_size": 32, "deepstack_visual_indexes": [0, 1, 2]}}`), 0o644))
	_, err = LoadConfig(dir)
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "mrope_section [4 2 1] sums to 7, want head_dim/2 = 8")
}

// TestOpenSharded: the tiny checkpoint split into two shards with an index
// opens, verifies and yields the same tensors; its digest differs from the
// single file's (it covers the index and both headers).
func TestOpenSharded(t *testing.T) {
	single, err := Open(tinyDir)
	require.NoError(t, err)
	defer single.Close()
	dir := t.TempDir()
	for _, f := range []string{ConfigFile, BackboneConfigFile} {
		b, err := os.ReadFile(filepath.Join(tinyDir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	names := single.Set().Names()
	weightMap := map[string]string{}
	for s, part := range [][]string{names[:len(names)/2], names[len(names)/2:]} {
		shard := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[s]
		var infos []safetensors.TensorInfo
		var data [][]byte
		for _, n := range part {
			info, _ := single.Set().Info(n)
			b, err := single.Set().Bytes(n)
			require.NoError(t, err)
			infos = append(infos, safetensors.TensorInfo{Name: n, DType: info.DType, Shape: info.Shape})
			data = append(data, b)
			weightMap[n] = shard
		}
		enc, err := safetensors.Encode(infos, data, nil)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, shard), enc, 0o644))
	}
	idx, err := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, safetensors.IndexFile), idx, 0o644))
	sharded, err := Open(dir)
	require.NoError(t, err)
	defer sharded.Close()
	assert.Equal(t, single.Params, sharded.Params)
	assert.NotEqual(t, single.Digest, sharded.Digest)
	a, err := single.Float32(VisionPrefix + "pos_embed.weight")
	require.NoError(t, err)
	b, err := sharded.Float32(VisionPrefix + "pos_embed.weight")
	require.NoError(t, err)
	assert.Equal(t, a, b)
}
