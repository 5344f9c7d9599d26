package actionhead

import "fmt"

// TensorShapes returns every tensor Load reads for c, by name without
// Prefix, with its shape: the VL adapter, the timestep encoder, the DiT
// blocks and output projections, the category-specific state/action
// encoders and decoder ([Embodiments, in, out] weights) and the position
// embedding. Synthetic checkpoints (benchmarks, shape tests) are generated
// from it; core/model.Plan lists the same tensors from the checkpoint
// config (TestTensorShapesMatchPlan in core/model keeps the two equal).
func (c Config) TensorShapes() map[string][]int {
	m := map[string][]int{}
	lin := func(name string, out, in int) {
		m[name+".weight"] = []int{out, in}
		m[name+".bias"] = []int{out}
	}
	cat := func(name string, in, out int) {
		m[name+".W"] = []int{c.Embodiments, in, out}
		m[name+".b"] = []int{c.Embodiments, out}
	}
	Bd, W := c.BackboneDim, c.Width
	m["vlln.weight"], m["vlln.bias"] = []int{Bd}, []int{Bd}
	for i := range c.VLLayers {
		p := fmt.Sprintf("vl_self_attention.transformer_blocks.%d.", i)
		for _, n := range []string{"norm1", "norm3"} {
			m[p+n+".weight"], m[p+n+".bias"] = []int{Bd}, []int{Bd}
		}
		inner := c.VLHeads * c.VLHeadDim
		for _, n := range []string{"to_q", "to_k", "to_v"} {
			lin(p+"attn1."+n, inner, Bd)
		}
		lin(p+"attn1.to_out.0", Bd, inner)
		lin(p+"ff.net.0.proj", c.VLFF, Bd)
		lin(p+"ff.net.2", Bd, c.VLFF)
	}
	lin("model.timestep_encoder.timestep_embedder.linear_1", W, c.TimestepInDim)
	lin("model.timestep_encoder.timestep_embedder.linear_2", W, W)
	for i := range c.Layers {
		p := fmt.Sprintf("model.transformer_blocks.%d.", i)
		kv := W
		if c.Kind(i) != SelfBlock {
			kv = Bd
		}
		lin(p+"norm1.linear", 2*W, W)
		lin(p+"attn1.to_q", W, W)
		lin(p+"attn1.to_k", W, kv)
		lin(p+"attn1.to_v", W, kv)
		lin(p+"attn1.to_out.0", W, W)
		lin(p+"ff.net.0.proj", c.FF, W)
		lin(p+"ff.net.2", W, c.FF)
	}
	lin("model.proj_out_1", 2*W, W)
	lin("model.proj_out_2", c.OutputDim, W)
	cat("state_encoder.layer1", c.MaxStateDim, c.HiddenSize)
	cat("state_encoder.layer2", c.HiddenSize, W)
	cat("action_encoder.W1", c.MaxActionDim, W)
	cat("action_encoder.W2", 2*W, W)
	cat("action_encoder.W3", W, W)
	cat("action_decoder.layer1", c.OutputDim, c.HiddenSize)
	cat("action_decoder.layer2", c.HiddenSize, c.MaxActionDim)
	m["position_embedding.weight"] = []int{c.MaxSeqLen, W}
	return m
}
