package model

import (
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/safetensors"
)

// Checkpoint tensor-name prefixes (upstream layout, as stored in
// nvidia/GR00T-N1.7-3B's safetensors).
const (
	VisionPrefix     = "backbone.model.model.visual."
	LLMPrefix        = "backbone.model.model.language_model."
	ActionHeadPrefix = "action_head."
	// LMHeadName is the tied output projection real checkpoints carry; it is
	// never used.
	LMHeadName = "lm_head.weight"
)

// TensorSpec is one tensor a checkpoint for a Config holds.
type TensorSpec struct {
	Name  string
	Shape []int
	// Used is false for tensors a checkpoint may carry but inference never
	// reads (the final text norm, lm_head): the loader checks their shape
	// when present and never requires them.
	Used bool
}

// NumElements is the product of the shape.
func (t TensorSpec) NumElements() int64 { return safetensors.NumElements(t.Shape) }

// Plan derives the complete tensor list of a checkpoint for cfg: the vision
// tower, the select_layer kept decoder layers, the action head, and the
// unused final norm and lm_head (Used false). The order is stable: backbone
// vision, language model, action head, lm_head.
func Plan(cfg Config) []TensorSpec {
	var p []TensorSpec
	add := func(name string, shape ...int) { p = append(p, TensorSpec{Name: name, Shape: shape, Used: true}) }
	lin := func(name string, out, in int) { add(name+".weight", out, in); add(name+".bias", out) }
	ln := func(name string, d int) { add(name+".weight", d); add(name+".bias", d) }

	v := cfg.Backbone.Vision
	vp := VisionPrefix
	add(vp+"patch_embed.proj.weight", v.HiddenSize, v.InChannels, v.TemporalPatchSize, v.PatchSize, v.PatchSize)
	add(vp+"patch_embed.proj.bias", v.HiddenSize)
	add(vp+"pos_embed.weight", v.NumPositionEmbeddings, v.HiddenSize)
	for i := 0; i < v.Depth; i++ {
		b := fmt.Sprintf("%sblocks.%d.", vp, i)
		ln(b+"norm1", v.HiddenSize)
		ln(b+"norm2", v.HiddenSize)
		lin(b+"attn.qkv", 3*v.HiddenSize, v.HiddenSize)
		lin(b+"attn.proj", v.HiddenSize, v.HiddenSize)
		lin(b+"mlp.linear_fc1", v.IntermediateSize, v.HiddenSize)
		lin(b+"mlp.linear_fc2", v.HiddenSize, v.IntermediateSize)
	}
	md := v.MergeDim()
	ln(vp+"merger.norm", v.HiddenSize)
	lin(vp+"merger.linear_fc1", md, md)
	lin(vp+"merger.linear_fc2", v.OutHiddenSize, md)
	for k := range v.DeepstackVisualIndexes {
		b := fmt.Sprintf("%sdeepstack_merger_list.%d.", vp, k)
		ln(b+"norm", md)
		lin(b+"linear_fc1", md, md)
		lin(b+"linear_fc2", v.OutHiddenSize, md)
	}

	t := cfg.Backbone.Text
	lp := LLMPrefix
	add(lp+"embed_tokens.weight", t.VocabSize, t.HiddenSize)
	for i := 0; i < cfg.SelectLayer; i++ {
		b := fmt.Sprintf("%slayers.%d.", lp, i)
		add(b+"input_layernorm.weight", t.HiddenSize)
		add(b+"post_attention_layernorm.weight", t.HiddenSize)
		add(b+"self_attn.q_proj.weight", t.NumAttentionHeads*t.HeadDim, t.HiddenSize)
		add(b+"self_attn.k_proj.weight", t.NumKeyValueHeads*t.HeadDim, t.HiddenSize)
		add(b+"self_attn.v_proj.weight", t.NumKeyValueHeads*t.HeadDim, t.HiddenSize)
		add(b+"self_attn.o_proj.weight", t.HiddenSize, t.NumAttentionHeads*t.HeadDim)
		add(b+"self_attn.q_norm.weight", t.HeadDim)
		add(b+"self_attn.k_norm.weight", t.HeadDim)
		add(b+"mlp.gate_proj.weight", t.IntermediateSize, t.HiddenSize)
		add(b+"mlp.up_proj.weight", t.IntermediateSize, t.HiddenSize)
		add(b+"mlp.down_proj.weight", t.HiddenSize, t.IntermediateSize)
	}
	p = append(p, TensorSpec{Name: lp + "norm.weight", Shape: []int{t.HiddenSize}})

	ap := ActionHeadPrefix
	bd := cfg.BackboneEmbeddingDim
	ln(ap+"vlln", bd)
	sa := cfg.VLSelfAttention.InnerDim()
	for i := 0; i < cfg.VLSelfAttention.NumLayers; i++ {
		b := fmt.Sprintf("%svl_self_attention.transformer_blocks.%d.", ap, i)
		ln(b+"norm1", bd)
		ln(b+"norm3", bd)
		lin(b+"attn1.to_q", sa, bd)
		lin(b+"attn1.to_k", sa, bd)
		lin(b+"attn1.to_v", sa, bd)
		lin(b+"attn1.to_out.0", bd, sa)
		lin(b+"ff.net.0.proj", 4*bd, bd)
		lin(b+"ff.net.2", bd, 4*bd)
	}
	d := cfg.InputEmbeddingDim
	lin(ap+"model.timestep_encoder.timestep_embedder.linear_1", d, 256)
	lin(ap+"model.timestep_encoder.timestep_embedder.linear_2", d, d)
	for i := 0; i < cfg.DiT.NumLayers; i++ {
		b := fmt.Sprintf("%smodel.transformer_blocks.%d.", ap, i)
		kv := d
		if i%2 == 0 {
			kv = bd // cross-attention to the VL features
		}
		lin(b+"norm1.linear", 2*d, d)
		lin(b+"attn1.to_q", d, d)
		lin(b+"attn1.to_k", d, kv)
		lin(b+"attn1.to_v", d, kv)
		lin(b+"attn1.to_out.0", d, d)
		lin(b+"ff.net.0.proj", 4*d, d)
		lin(b+"ff.net.2", d, 4*d)
	}
	lin(ap+"model.proj_out_1", 2*d, d)
	lin(ap+"model.proj_out_2", cfg.DiT.OutputDim, d)
	e, h := cfg.MaxNumEmbodiments, cfg.HiddenSize
	cat := func(name string, in, out int) { add(name+".W", e, in, out); add(name+".b", e, out) }
	cat(ap+"state_encoder.layer1", cfg.MaxStateDim, h)
	cat(ap+"state_encoder.layer2", h, d)
	cat(ap+"action_encoder.W1", cfg.MaxActionDim, d)
	cat(ap+"action_encoder.W2", 2*d, d)
	cat(ap+"action_encoder.W3", d, d)
	cat(ap+"action_decoder.layer1", h, h)
	cat(ap+"action_decoder.layer2", h, cfg.MaxActionDim)
	add(ap+"position_embedding.weight", cfg.MaxSeqLen, d)

	p = append(p, TensorSpec{Name: LMHeadName, Shape: []int{t.VocabSize, t.HiddenSize}})
	return p
}

// optionalExtra lists tensors some checkpoints carry that inference never
// reads and whose shape does not follow from the config (training-only
// parameters). The loader accepts them silently.
var optionalExtra = map[string]bool{
	ActionHeadPrefix + "dropout_prob_by_embodiment": true,
}
