// Package model describes a GR00T N1.7 checkpoint: its configuration
// (config.json plus the Qwen3-VL backbone architecture), the complete list of
// tensors that configuration implies (the weights plan), and a loader that
// checks a safetensors checkpoint against that plan before anything is
// computed. The forward passes live in the subpackages backbone (vision tower
// and language model) and actionhead.
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ConfigFile and BackboneConfigFile are the names of the checkpoint's
// configuration files.
const (
	ConfigFile         = "config.json"
	BackboneConfigFile = "backbone_config.json"
)

// ErrConfig is wrapped by every configuration validation error.
var ErrConfig = errors.New("model: invalid config")

// DiTConfig is config.json's diffusion_model_cfg (the action head's DiT).
type DiTConfig struct {
	NumLayers               int     `json:"num_layers"`
	NumAttentionHeads       int     `json:"num_attention_heads"`
	AttentionHeadDim        int     `json:"attention_head_dim"`
	OutputDim               int     `json:"output_dim"`
	NormType                string  `json:"norm_type"`
	InterleaveSelfAttention bool    `json:"interleave_self_attention"`
	PositionalEmbeddings    *string `json:"positional_embeddings"`
}

// InnerDim is the DiT width (heads × head_dim).
func (d DiTConfig) InnerDim() int { return d.NumAttentionHeads * d.AttentionHeadDim }

// SelfAttentionConfig is config.json's vl_self_attention_cfg (the adapter
// between the backbone and the DiT).
type SelfAttentionConfig struct {
	NumLayers            int     `json:"num_layers"`
	NumAttentionHeads    int     `json:"num_attention_heads"`
	AttentionHeadDim     int     `json:"attention_head_dim"`
	PositionalEmbeddings *string `json:"positional_embeddings"`
}

// InnerDim is the adapter attention width (heads × head_dim).
func (s SelfAttentionConfig) InnerDim() int { return s.NumAttentionHeads * s.AttentionHeadDim }

// VisionConfig is the Qwen3-VL vision tower architecture (HF
// Qwen3VLConfig.vision_config).
type VisionConfig struct {
	Depth                  int    `json:"depth"`
	HiddenSize             int    `json:"hidden_size"`
	NumHeads               int    `json:"num_heads"`
	IntermediateSize       int    `json:"intermediate_size"`
	PatchSize              int    `json:"patch_size"`
	TemporalPatchSize      int    `json:"temporal_patch_size"`
	SpatialMergeSize       int    `json:"spatial_merge_size"`
	InChannels             int    `json:"in_channels"`
	NumPositionEmbeddings  int    `json:"num_position_embeddings"`
	OutHiddenSize          int    `json:"out_hidden_size"`
	DeepstackVisualIndexes []int  `json:"deepstack_visual_indexes"`
	HiddenAct              string `json:"hidden_act"`
}

// HeadDim is hidden_size / num_heads.
func (v VisionConfig) HeadDim() int { return v.HiddenSize / v.NumHeads }

// PatchDim is the length of one flattened patch (in_channels · temporal · p · p).
func (v VisionConfig) PatchDim() int {
	return v.InChannels * v.TemporalPatchSize * v.PatchSize * v.PatchSize
}

// MergeDim is the width of one merged 2×2 block (hidden · merge²).
func (v VisionConfig) MergeDim() int { return v.HiddenSize * v.SpatialMergeSize * v.SpatialMergeSize }

// GridSide is the side of the square learned position table.
func (v VisionConfig) GridSide() int {
	s := 0
	for s*s < v.NumPositionEmbeddings {
		s++
	}
	return s
}

// TextConfig is the Qwen3 language model architecture (HF
// Qwen3VLConfig.text_config). NumHiddenLayers is the base model's depth;
// GR00T keeps only Config.SelectLayer of them.
type TextConfig struct {
	HiddenSize        int     `json:"hidden_size"`
	NumHiddenLayers   int     `json:"num_hidden_layers"`
	NumAttentionHeads int     `json:"num_attention_heads"`
	NumKeyValueHeads  int     `json:"num_key_value_heads"`
	HeadDim           int     `json:"head_dim"`
	IntermediateSize  int     `json:"intermediate_size"`
	RMSNormEps        float64 `json:"rms_norm_eps"`
	RopeTheta         float64 `json:"rope_theta"`
	VocabSize         int     `json:"vocab_size"`
	// MRoPESection is rope_scaling.mrope_section: the number of frequency
	// slots given to the t, h and w components (sums to head_dim/2).
	MRoPESection []int `json:"-"`
	// MRoPEInterleaved is rope_scaling.mrope_interleaved (Qwen3-VL: true).
	MRoPEInterleaved bool `json:"-"`
}

// BackboneConfig is the Qwen3-VL architecture GR00T's backbone uses.
type BackboneConfig struct {
	Vision VisionConfig
	Text   TextConfig
	// ImageTokenID is the id of <|image_pad|> (151655).
	ImageTokenID int
	// Source says where the values came from: "builtin" (Cosmos-Reason2-2B)
	// or the path of a backbone_config.json.
	Source string
}

// Config is a GR00T N1.7 model configuration: config.json (upstream
// Gr00tN1d7Config key names) plus the backbone architecture. It is plain
// data, safe to copy and to share read-only.
type Config struct {
	SelectLayer            int                 `json:"select_layer"`
	BackboneEmbeddingDim   int                 `json:"backbone_embedding_dim"`
	HiddenSize             int                 `json:"hidden_size"`
	InputEmbeddingDim      int                 `json:"input_embedding_dim"`
	MaxStateDim            int                 `json:"max_state_dim"`
	MaxActionDim           int                 `json:"max_action_dim"`
	ActionHorizon          int                 `json:"action_horizon"`
	MaxNumEmbodiments      int                 `json:"max_num_embodiments"`
	MaxSeqLen              int                 `json:"max_seq_len"`
	StateHistoryLength     int                 `json:"state_history_length"`
	AddPosEmbed            bool                `json:"add_pos_embed"`
	UseVLLN                bool                `json:"use_vlln"`
	UseAlternateVLDiT      bool                `json:"use_alternate_vl_dit"`
	AttendTextEveryNBlocks int                 `json:"attend_text_every_n_blocks"`
	DiT                    DiTConfig           `json:"diffusion_model_cfg"`
	VLSelfAttention        SelfAttentionConfig `json:"vl_self_attention_cfg"`
	NumInferenceTimesteps  int                 `json:"num_inference_timesteps"`
	NumTimestepBuckets     int                 `json:"num_timestep_buckets"`
	UsePercentiles         bool                `json:"use_percentiles"`
	ModelName              string              `json:"model_name"`
	ModelType              string              `json:"model_type"`

	Backbone BackboneConfig `json:"-"`
}

// DefaultBackbone returns the built-in Cosmos-Reason2-2B (Qwen3-VL-2B)
// backbone architecture (nvidia/Cosmos-Reason2-2B's config.json, which a
// GR00T checkpoint does not carry: upstream loads it from that repository).
func DefaultBackbone() BackboneConfig {
	return BackboneConfig{
		Vision: VisionConfig{
			Depth: 24, HiddenSize: 1024, NumHeads: 16, IntermediateSize: 4096,
			PatchSize: 16, TemporalPatchSize: 2, SpatialMergeSize: 2, InChannels: 3,
			NumPositionEmbeddings: 2304, OutHiddenSize: 2048,
			DeepstackVisualIndexes: []int{5, 11, 17}, HiddenAct: "gelu_pytorch_tanh",
		},
		Text: TextConfig{
			HiddenSize: 2048, NumHiddenLayers: 28, NumAttentionHeads: 16, NumKeyValueHeads: 8,
			HeadDim: 128, IntermediateSize: 6144, RMSNormEps: 1e-6, RopeTheta: 5e6,
			VocabSize: 151936, MRoPESection: []int{24, 20, 20}, MRoPEInterleaved: true,
		},
		ImageTokenID: 151655,
		Source:       "builtin",
	}
}

// DefaultConfig returns the real GR00T N1.7-3B configuration (the
// nvidia/GR00T-N1.7-3B config.json) with
// the built-in backbone.
func DefaultConfig() Config {
	return Config{
		SelectLayer: 16, BackboneEmbeddingDim: 2048, HiddenSize: 1024, InputEmbeddingDim: 1536,
		MaxStateDim: 132, MaxActionDim: 132, ActionHorizon: 40, MaxNumEmbodiments: 32,
		MaxSeqLen: 1024, StateHistoryLength: 1, AddPosEmbed: true, UseVLLN: true,
		UseAlternateVLDiT: true, AttendTextEveryNBlocks: 2,
		DiT: DiTConfig{NumLayers: 32, NumAttentionHeads: 32, AttentionHeadDim: 48, OutputDim: 1024,
			NormType: "ada_norm", InterleaveSelfAttention: true},
		VLSelfAttention:       SelfAttentionConfig{NumLayers: 4, NumAttentionHeads: 32, AttentionHeadDim: 64},
		NumInferenceTimesteps: 4, NumTimestepBuckets: 1000, UsePercentiles: true,
		ModelName: "nvidia/Cosmos-Reason2-2B", ModelType: "Gr00tN1d7",
		Backbone: DefaultBackbone(),
	}
}

// LoadConfig reads dir/config.json over DefaultConfig (keys absent from the
// file keep their default) and the backbone architecture from
// dir/backbone_config.json when present (else the built-in one), then
// validates the result.
func LoadConfig(dir string) (Config, error) {
	b, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return Config{}, fmt.Errorf("model: config: %w", err)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return Config{}, err
	}
	bp := filepath.Join(dir, BackboneConfigFile)
	if bb, err := os.ReadFile(bp); err == nil {
		bc, err := ParseBackboneConfig(bb)
		if err != nil {
			return Config{}, fmt.Errorf("%w (%s)", err, bp)
		}
		bc.Source = bp
		cfg.Backbone = bc
	} else if !errors.Is(err, os.ErrNotExist) {
		return Config{}, fmt.Errorf("model: backbone config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ParseConfig decodes config.json bytes over DefaultConfig. It does not
// validate (the backbone may still be replaced); call Validate.
func ParseConfig(b []byte) (Config, error) {
	cfg := DefaultConfig()
	if err := json.Unmarshal(b, &cfg); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", ErrConfig, ConfigFile, err)
	}
	return cfg, nil
}

type hfQwen3VL struct {
	ImageTokenID *int            `json:"image_token_id"`
	VisionConfig json.RawMessage `json:"vision_config"`
	TextConfig   json.RawMessage `json:"text_config"`
}

type hfRopeScaling struct {
	RopeScaling *struct {
		MRoPESection     []int `json:"mrope_section"`
		MRoPEInterleaved *bool `json:"mrope_interleaved"`
	} `json:"rope_scaling"`
}

// ParseBackboneConfig decodes a Hugging Face Qwen3VLConfig (vision_config,
// text_config with rope_scaling.mrope_section) over DefaultBackbone: keys
// absent from the file keep the built-in value. It does not validate.
func ParseBackboneConfig(b []byte) (BackboneConfig, error) {
	bc := DefaultBackbone()
	var raw hfQwen3VL
	if err := json.Unmarshal(b, &raw); err != nil {
		return BackboneConfig{}, fmt.Errorf("%w: %s: %w", ErrConfig, BackboneConfigFile, err)
	}
	if raw.ImageTokenID != nil {
		bc.ImageTokenID = *raw.ImageTokenID
	}
	if len(raw.VisionConfig) > 0 {
		if err := json.Unmarshal(raw.VisionConfig, &bc.Vision); err != nil {
			return BackboneConfig{}, fmt.Errorf("%w: %s: vision_config: %w", ErrConfig, BackboneConfigFile, err)
		}
	}
	if len(raw.TextConfig) > 0 {
		if err := json.Unmarshal(raw.TextConfig, &bc.Text); err != nil {
			return BackboneConfig{}, fmt.Errorf("%w: %s: text_config: %w", ErrConfig, BackboneConfigFile, err)
		}
		var rs hfRopeScaling
		if err := json.Unmarshal(raw.TextConfig, &rs); err != nil {
			return BackboneConfig{}, fmt.Errorf("%w: %s: text_config.rope_scaling: %w", ErrConfig, BackboneConfigFile, err)
		}
		if r := rs.RopeScaling; r != nil {
			if r.MRoPESection != nil {
				bc.Text.MRoPESection = r.MRoPESection
			}
			if r.MRoPEInterleaved != nil {
				bc.Text.MRoPEInterleaved = *r.MRoPEInterleaved
			}
		}
	}
	return bc, nil
}

// Validate checks every structural invariant the forward passes rely on and
// reports all violations in one error wrapping ErrConfig.
func (c *Config) Validate() error {
	var bad []string
	req := func(ok bool, format string, a ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, a...))
		}
	}
	// Every size is bounded so that a hostile config cannot make the plan
	// or the buffers explode; the real model is far inside these bounds.
	pos := func(name string, v int) { req(v > 0 && v <= 1<<20, "%s = %d outside [1, 1048576]", name, v) }
	v, t := c.Backbone.Vision, c.Backbone.Text

	pos("vision_config.depth", v.Depth)
	req(v.Depth <= 1024, "vision_config.depth %d exceeds 1024", v.Depth)
	req(t.NumHiddenLayers <= 1024, "text_config.num_hidden_layers %d exceeds 1024", t.NumHiddenLayers)
	req(c.DiT.NumLayers <= 1024 && c.VLSelfAttention.NumLayers <= 1024, "action head layer counts exceed 1024")
	req(len(v.DeepstackVisualIndexes) <= 64, "%d deepstack indexes exceed 64", len(v.DeepstackVisualIndexes))
	pos("vision_config.hidden_size", v.HiddenSize)
	pos("vision_config.num_heads", v.NumHeads)
	pos("vision_config.intermediate_size", v.IntermediateSize)
	pos("vision_config.patch_size", v.PatchSize)
	pos("vision_config.temporal_patch_size", v.TemporalPatchSize)
	pos("vision_config.spatial_merge_size", v.SpatialMergeSize)
	pos("vision_config.in_channels", v.InChannels)
	pos("vision_config.num_position_embeddings", v.NumPositionEmbeddings)
	pos("vision_config.out_hidden_size", v.OutHiddenSize)
	if v.NumHeads > 0 {
		req(v.HiddenSize%v.NumHeads == 0, "vision_config.hidden_size %d not divisible by num_heads %d", v.HiddenSize, v.NumHeads)
		req(v.HeadDim()%4 == 0, "vision head_dim %d must be a multiple of 4 (2-D rotary)", v.HeadDim())
	}
	if v.NumPositionEmbeddings > 0 {
		s := v.GridSide()
		req(s*s == v.NumPositionEmbeddings, "vision_config.num_position_embeddings %d is not a square", v.NumPositionEmbeddings)
	}
	req(v.HiddenAct == "gelu_pytorch_tanh", "vision_config.hidden_act %q unsupported (want gelu_pytorch_tanh)", v.HiddenAct)
	for i, d := range v.DeepstackVisualIndexes {
		req(d >= 0 && d < v.Depth, "vision_config.deepstack_visual_indexes[%d] = %d outside [0, %d)", i, d, v.Depth)
		if i > 0 {
			req(d > v.DeepstackVisualIndexes[i-1], "vision_config.deepstack_visual_indexes %v must increase", v.DeepstackVisualIndexes)
		}
	}

	pos("text_config.hidden_size", t.HiddenSize)
	pos("text_config.num_hidden_layers", t.NumHiddenLayers)
	pos("text_config.num_attention_heads", t.NumAttentionHeads)
	pos("text_config.num_key_value_heads", t.NumKeyValueHeads)
	pos("text_config.head_dim", t.HeadDim)
	pos("text_config.intermediate_size", t.IntermediateSize)
	pos("text_config.vocab_size", t.VocabSize)
	req(t.RMSNormEps > 0, "text_config.rms_norm_eps = %g must be positive", t.RMSNormEps)
	req(t.RopeTheta > 0, "text_config.rope_theta = %g must be positive", t.RopeTheta)
	if t.NumKeyValueHeads > 0 {
		req(t.NumAttentionHeads%t.NumKeyValueHeads == 0, "text_config.num_attention_heads %d not divisible by num_key_value_heads %d", t.NumAttentionHeads, t.NumKeyValueHeads)
	}
	req(t.HeadDim%2 == 0, "text_config.head_dim %d must be even", t.HeadDim)
	sum := 0
	for _, s := range t.MRoPESection {
		req(s >= 0, "text_config.rope_scaling.mrope_section %v has a negative entry", t.MRoPESection)
		sum += s
	}
	req(len(t.MRoPESection) == 3, "text_config.rope_scaling.mrope_section %v must have 3 entries (t, h, w)", t.MRoPESection)
	req(sum == t.HeadDim/2, "text_config.rope_scaling.mrope_section %v sums to %d, want head_dim/2 = %d", t.MRoPESection, sum, t.HeadDim/2)
	req(t.MRoPEInterleaved, "text_config.rope_scaling.mrope_interleaved must be true (Qwen3-VL)")
	req(v.OutHiddenSize == t.HiddenSize, "vision_config.out_hidden_size %d != text_config.hidden_size %d", v.OutHiddenSize, t.HiddenSize)
	req(c.Backbone.ImageTokenID >= 0 && c.Backbone.ImageTokenID < t.VocabSize, "image_token_id %d outside vocab %d", c.Backbone.ImageTokenID, t.VocabSize)

	req(c.SelectLayer > 0 && c.SelectLayer <= t.NumHiddenLayers, "select_layer %d outside [1, %d]", c.SelectLayer, t.NumHiddenLayers)
	req(len(v.DeepstackVisualIndexes) <= c.SelectLayer, "%d deepstack features but only select_layer = %d decoder layers kept", len(v.DeepstackVisualIndexes), c.SelectLayer)
	req(c.BackboneEmbeddingDim == t.HiddenSize, "backbone_embedding_dim %d != text_config.hidden_size %d", c.BackboneEmbeddingDim, t.HiddenSize)
	pos("hidden_size", c.HiddenSize)
	pos("input_embedding_dim", c.InputEmbeddingDim)
	pos("max_state_dim", c.MaxStateDim)
	pos("max_action_dim", c.MaxActionDim)
	pos("action_horizon", c.ActionHorizon)
	pos("max_num_embodiments", c.MaxNumEmbodiments)
	pos("max_seq_len", c.MaxSeqLen)
	pos("num_inference_timesteps", c.NumInferenceTimesteps)
	pos("num_timestep_buckets", c.NumTimestepBuckets)
	pos("attend_text_every_n_blocks", c.AttendTextEveryNBlocks)
	req(c.StateHistoryLength == 1, "state_history_length %d unsupported (want 1)", c.StateHistoryLength)
	req(c.ActionHorizon <= c.MaxSeqLen, "action_horizon %d exceeds max_seq_len %d", c.ActionHorizon, c.MaxSeqLen)
	pos("diffusion_model_cfg.num_layers", c.DiT.NumLayers)
	pos("diffusion_model_cfg.num_attention_heads", c.DiT.NumAttentionHeads)
	pos("diffusion_model_cfg.attention_head_dim", c.DiT.AttentionHeadDim)
	pos("diffusion_model_cfg.output_dim", c.DiT.OutputDim)
	req(c.DiT.InnerDim() == c.InputEmbeddingDim, "diffusion_model_cfg width %d×%d = %d != input_embedding_dim %d", c.DiT.NumAttentionHeads, c.DiT.AttentionHeadDim, c.DiT.InnerDim(), c.InputEmbeddingDim)
	req(c.DiT.OutputDim == c.HiddenSize, "diffusion_model_cfg.output_dim %d != hidden_size %d", c.DiT.OutputDim, c.HiddenSize)
	req(c.DiT.NormType == "ada_norm", "diffusion_model_cfg.norm_type %q unsupported (want ada_norm)", c.DiT.NormType)
	req(c.DiT.PositionalEmbeddings == nil, "diffusion_model_cfg.positional_embeddings %q unsupported (want null)", deref(c.DiT.PositionalEmbeddings))
	req(c.UseAlternateVLDiT && c.DiT.InterleaveSelfAttention, "only the alternate VL DiT with interleaved self-attention is supported")
	pos("vl_self_attention_cfg.num_layers", c.VLSelfAttention.NumLayers)
	pos("vl_self_attention_cfg.num_attention_heads", c.VLSelfAttention.NumAttentionHeads)
	pos("vl_self_attention_cfg.attention_head_dim", c.VLSelfAttention.AttentionHeadDim)
	req(c.VLSelfAttention.InnerDim() == c.BackboneEmbeddingDim, "vl_self_attention_cfg width %d != backbone_embedding_dim %d", c.VLSelfAttention.InnerDim(), c.BackboneEmbeddingDim)
	req(c.VLSelfAttention.PositionalEmbeddings == nil, "vl_self_attention_cfg.positional_embeddings %q unsupported (want null)", deref(c.VLSelfAttention.PositionalEmbeddings))
	req(c.UseVLLN, "use_vlln = false unsupported")
	req(c.AddPosEmbed, "add_pos_embed = false unsupported")

	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(bad, "; "))
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
