// Package actionhead runs the GR00T N1.7 action head on the CPU: the VL
// adapter (vlln + vl_self_attention), the embodiment-conditioned state and
// action projectors, the AlternateVLDiT and the 4-step flow-matching Euler
// sampler (upstream Isaac-GR00T gr00t/model/gr00t_n1d7/gr00t_n1d7.py and
// gr00t/model/modules/dit.py, read at 626af89).
//
// A Model holds the packed weights and every quantity that depends only on
// the weights and the fixed timestep buckets (timestep embeddings, AdaLN
// modulation rows, output modulation, the action encoder's sinusoid term).
// It is immutable after Load and safe for concurrent use. Plans
// (AdapterPlan, DenoisePlan) own preallocated buffers for a maximum sequence
// length and are used by one goroutine at a time; a steady-state Run
// allocates nothing. Every matrix product goes through a tensor.Kernels.
package actionhead

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("actionhead: invalid config")

// Config is the action-head architecture. It is plain data; the zero value
// is invalid, DefaultConfig gives the real N1.7-3B sizes and ConfigFromJSON
// reads an upstream config.json.
type Config struct {
	BackboneDim int // backbone_embedding_dim: width of backbone features and the adapter (2048)
	Width       int // input_embedding_dim: DiT width (1536) = Heads·HeadDim
	Heads       int // diffusion_model_cfg.num_attention_heads (32)
	HeadDim     int // diffusion_model_cfg.attention_head_dim (48)
	Layers      int // diffusion_model_cfg.num_layers (32)
	OutputDim   int // diffusion_model_cfg.output_dim: proj_out_2 width (1024)
	HiddenSize  int // hidden_size: state-encoder / action-decoder hidden width (1024)

	VLLayers  int // vl_self_attention_cfg.num_layers (4)
	VLHeads   int // vl_self_attention_cfg.num_attention_heads (32)
	VLHeadDim int // vl_self_attention_cfg.attention_head_dim (64); VLHeads·VLHeadDim = BackboneDim
	VLFF      int // adapter feed-forward inner width (4·BackboneDim, diffusers FeedForward mult 4)
	FF        int // DiT feed-forward inner width (4·Width)

	MaxStateDim     int // max_state_dim (132)
	MaxActionDim    int // max_action_dim (132)
	Horizon         int // action_horizon (40)
	NumSteps        int // num_inference_timesteps (4)
	TimestepBuckets int // num_timestep_buckets (1000)
	AttendTextEvery int // attend_text_every_n_blocks (2)
	Embodiments     int // max_num_embodiments (32): slots of the category-specific weights
	MaxSeqLen       int // max_seq_len: rows of position_embedding (1024)
	TimestepInDim   int // diffusers Timesteps channels feeding linear_1 (256, fixed upstream)
}

// DefaultConfig returns the real GR00T N1.7-3B action-head sizes (the
// nvidia/GR00T-N1.7-3B config.json; upstream's class defaults differ, e.g.
// 16 DiT layers).
func DefaultConfig() Config {
	return Config{
		BackboneDim: 2048, Width: 1536, Heads: 32, HeadDim: 48, Layers: 32, OutputDim: 1024, HiddenSize: 1024,
		VLLayers: 4, VLHeads: 32, VLHeadDim: 64, VLFF: 8192, FF: 6144,
		MaxStateDim: 132, MaxActionDim: 132, Horizon: 40, NumSteps: 4, TimestepBuckets: 1000,
		AttendTextEvery: 2, Embodiments: 32, MaxSeqLen: 1024, TimestepInDim: 256,
	}
}

// rawConfig mirrors the config.json keys the action head reads. Pointers
// distinguish a missing key (keep the default) from an explicit value.
type rawConfig struct {
	BackboneEmbeddingDim   *int  `json:"backbone_embedding_dim"`
	HiddenSize             *int  `json:"hidden_size"`
	InputEmbeddingDim      *int  `json:"input_embedding_dim"`
	MaxStateDim            *int  `json:"max_state_dim"`
	MaxActionDim           *int  `json:"max_action_dim"`
	ActionHorizon          *int  `json:"action_horizon"`
	MaxNumEmbodiments      *int  `json:"max_num_embodiments"`
	MaxSeqLen              *int  `json:"max_seq_len"`
	StateHistoryLength     *int  `json:"state_history_length"`
	AddPosEmbed            *bool `json:"add_pos_embed"`
	UseVLLN                *bool `json:"use_vlln"`
	UseAlternateVLDiT      *bool `json:"use_alternate_vl_dit"`
	AttendTextEveryNBlocks *int  `json:"attend_text_every_n_blocks"`
	NumInferenceTimesteps  *int  `json:"num_inference_timesteps"`
	NumTimestepBuckets     *int  `json:"num_timestep_buckets"`
	DiT                    *struct {
		NumLayers               *int            `json:"num_layers"`
		NumAttentionHeads       *int            `json:"num_attention_heads"`
		AttentionHeadDim        *int            `json:"attention_head_dim"`
		OutputDim               *int            `json:"output_dim"`
		NormType                *string         `json:"norm_type"`
		InterleaveSelfAttention *bool           `json:"interleave_self_attention"`
		PositionalEmbeddings    json.RawMessage `json:"positional_embeddings"`
	} `json:"diffusion_model_cfg"`
	VL *struct {
		NumLayers            *int            `json:"num_layers"`
		NumAttentionHeads    *int            `json:"num_attention_heads"`
		AttentionHeadDim     *int            `json:"attention_head_dim"`
		PositionalEmbeddings json.RawMessage `json:"positional_embeddings"`
	} `json:"vl_self_attention_cfg"`
}

func setInt(dst *int, src *int) {
	if src != nil {
		*dst = *src
	}
}

func isNull(m json.RawMessage) bool { return string(m) == "null" }

// ConfigFromJSON reads the action-head part of an upstream GR00T N1.7
// config.json (Gr00tN1d7Config key names). Keys that are absent keep their
// DefaultConfig value. Features this package does not implement
// (use_vlln/add_pos_embed/use_alternate_vl_dit false, state history > 1,
// positional embeddings in the DiT or the adapter, a norm type other than
// ada_norm, non-interleaved self-attention) are rejected with an error
// wrapping ErrConfig rather than computed wrongly. The result is validated.
func ConfigFromJSON(data []byte) (Config, error) {
	var r rawConfig
	if err := json.Unmarshal(data, &r); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c := DefaultConfig()
	setInt(&c.BackboneDim, r.BackboneEmbeddingDim)
	setInt(&c.HiddenSize, r.HiddenSize)
	setInt(&c.Width, r.InputEmbeddingDim)
	setInt(&c.MaxStateDim, r.MaxStateDim)
	setInt(&c.MaxActionDim, r.MaxActionDim)
	setInt(&c.Horizon, r.ActionHorizon)
	setInt(&c.Embodiments, r.MaxNumEmbodiments)
	setInt(&c.MaxSeqLen, r.MaxSeqLen)
	setInt(&c.AttendTextEvery, r.AttendTextEveryNBlocks)
	setInt(&c.NumSteps, r.NumInferenceTimesteps)
	setInt(&c.TimestepBuckets, r.NumTimestepBuckets)
	unsupported := func(what string) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s is not supported", ErrConfig, what)
	}
	if r.StateHistoryLength != nil && *r.StateHistoryLength != 1 {
		return unsupported(fmt.Sprintf("state_history_length %d", *r.StateHistoryLength))
	}
	if r.AddPosEmbed != nil && !*r.AddPosEmbed {
		return unsupported("add_pos_embed false")
	}
	if r.UseVLLN != nil && !*r.UseVLLN {
		return unsupported("use_vlln false")
	}
	if r.UseAlternateVLDiT != nil && !*r.UseAlternateVLDiT {
		return unsupported("use_alternate_vl_dit false")
	}
	if d := r.DiT; d != nil {
		setInt(&c.Layers, d.NumLayers)
		setInt(&c.Heads, d.NumAttentionHeads)
		setInt(&c.HeadDim, d.AttentionHeadDim)
		setInt(&c.OutputDim, d.OutputDim)
		if d.NormType != nil && *d.NormType != "ada_norm" {
			return unsupported(fmt.Sprintf("diffusion_model_cfg.norm_type %q", *d.NormType))
		}
		if d.InterleaveSelfAttention != nil && !*d.InterleaveSelfAttention {
			return unsupported("diffusion_model_cfg.interleave_self_attention false")
		}
		if len(d.PositionalEmbeddings) != 0 && !isNull(d.PositionalEmbeddings) {
			return unsupported("diffusion_model_cfg.positional_embeddings " + string(d.PositionalEmbeddings))
		}
	}
	if v := r.VL; v != nil {
		setInt(&c.VLLayers, v.NumLayers)
		setInt(&c.VLHeads, v.NumAttentionHeads)
		setInt(&c.VLHeadDim, v.AttentionHeadDim)
		// Upstream's SelfAttentionTransformer adds sinusoidal position
		// embeddings when the key is absent; only an explicit null is the
		// architecture implemented here.
		if !isNull(v.PositionalEmbeddings) {
			what := "absent (upstream default: sinusoidal)"
			if len(v.PositionalEmbeddings) != 0 {
				what = string(v.PositionalEmbeddings)
			}
			return unsupported("vl_self_attention_cfg.positional_embeddings " + what)
		}
	}
	c.FF = 4 * c.Width
	c.VLFF = 4 * c.BackboneDim
	return c, c.Validate()
}

// maxDim bounds every configured size so that products of two sizes cannot
// overflow and a corrupt config cannot ask for absurd buffers.
const maxDim = 1 << 20

// Validate checks that every size is in [1, 2²⁰] and that the widths agree
// (Heads·HeadDim = Width, VLHeads·VLHeadDim = BackboneDim, Horizon ≤
// MaxSeqLen, timestep channels even).
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"backbone_embedding_dim", c.BackboneDim}, {"input_embedding_dim", c.Width},
		{"num_attention_heads", c.Heads}, {"attention_head_dim", c.HeadDim},
		{"num_layers", c.Layers}, {"output_dim", c.OutputDim}, {"hidden_size", c.HiddenSize},
		{"vl num_layers", c.VLLayers}, {"vl num_attention_heads", c.VLHeads},
		{"vl attention_head_dim", c.VLHeadDim}, {"vl ff", c.VLFF}, {"ff", c.FF},
		{"max_state_dim", c.MaxStateDim}, {"max_action_dim", c.MaxActionDim},
		{"action_horizon", c.Horizon}, {"num_inference_timesteps", c.NumSteps},
		{"num_timestep_buckets", c.TimestepBuckets}, {"attend_text_every_n_blocks", c.AttendTextEvery},
		{"max_num_embodiments", c.Embodiments}, {"max_seq_len", c.MaxSeqLen},
		{"timestep channels", c.TimestepInDim},
	} {
		if f.v <= 0 || f.v > maxDim {
			return fmt.Errorf("%w: %s = %d outside [1, %d]", ErrConfig, f.name, f.v, maxDim)
		}
	}
	switch {
	case c.Heads*c.HeadDim != c.Width:
		return fmt.Errorf("%w: DiT heads %d × head_dim %d != input_embedding_dim %d", ErrConfig, c.Heads, c.HeadDim, c.Width)
	case c.VLHeads*c.VLHeadDim != c.BackboneDim:
		return fmt.Errorf("%w: vl heads %d × head_dim %d != backbone_embedding_dim %d", ErrConfig, c.VLHeads, c.VLHeadDim, c.BackboneDim)
	case c.Horizon > c.MaxSeqLen:
		return fmt.Errorf("%w: action_horizon %d exceeds max_seq_len %d", ErrConfig, c.Horizon, c.MaxSeqLen)
	case c.Width%2 != 0 || c.TimestepInDim%2 != 0 || c.TimestepInDim < 4:
		return fmt.Errorf("%w: sinusoid widths %d and %d must be even (timestep ≥ 4)", ErrConfig, c.Width, c.TimestepInDim)
	}
	return nil
}

// BlockKind says what DiT block i attends to.
type BlockKind int

const (
	// SelfBlock: self-attention over the state and action tokens (odd i).
	SelfBlock BlockKind = iota
	// TextBlock: cross-attention to the valid non-image tokens
	// (even i, i mod 2·attend_text_every_n_blocks = 0).
	TextBlock
	// ImageBlock: cross-attention to the valid image tokens (other even i).
	ImageBlock
)

// Kind returns the kind of DiT block i (upstream AlternateVLDiT rule).
func (c Config) Kind(i int) BlockKind {
	switch {
	case i%2 == 1:
		return SelfBlock
	case i%(2*c.AttendTextEvery) == 0:
		return TextBlock
	default:
		return ImageBlock
	}
}

// Timestep returns the discrete bucket τ of Euler step k:
// int(k/NumSteps · TimestepBuckets), as upstream computes it in float64.
func (c Config) Timestep(k int) int {
	return int(float64(k) / float64(c.NumSteps) * float64(c.TimestepBuckets))
}

// Tokens is the number of DiT rows: the state token plus the horizon.
func (c Config) Tokens() int { return 1 + c.Horizon }
