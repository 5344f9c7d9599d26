package actionhead

// DiT is an alternative implementation of the denoise stage's diffusion
// transformer (the 32 AdaLN blocks plus the output layer), for example the
// CPU emulation of the bfp8_b megakernel (kernels/emu). A DenoisePlan uses
// its own fp32 blocks unless UseDiT installed one.
//
// The plan calls PrepareCross once per Run, before the first Euler step,
// then Forward once per step. An implementation is owned by one plan and is
// never called concurrently; it must not retain the slices it is given.
type DiT interface {
	// PrepareCross computes whatever depends only on the request's VL
	// features: vl [S, BackboneDim] (the adapter output), imageMask [S]
	// true at image tokens, attnMask [S] false at padding (nil: all
	// valid). Text cross blocks attend to the valid non-image tokens,
	// image blocks to the valid image tokens.
	PrepareCross(vl []float32, S int, imageMask, attnMask []bool) error
	// Forward runs the transformer for one Euler step: dst [Tokens,
	// OutputDim] = proj_out_2(output layer(blocks(x))), x [Tokens, Width]
	// the DiT input (state token then action tokens, x is not modified),
	// temb [Width] the step's timestep embedding.
	Forward(dst, x, temb []float32) error
}

// UseDiT makes the following Runs compute the transformer with d instead of
// the model's fp32 blocks; nil restores the fp32 blocks. The plan then
// owns d: it must not be used by anything else while the plan lives. The
// state encoder, action encoder/decoder and the Euler update stay on the
// plan's own kernels, so only the transformer's numerics change.
func (p *DenoisePlan) UseDiT(d DiT) { p.alt = d }

// DiT returns the transformer installed by UseDiT, or nil when the plan
// runs the model's fp32 blocks.
func (p *DenoisePlan) DiT() DiT { return p.alt }

// Temb returns the timestep embedding of Euler step s ([Width], shared with
// the model: read only), or nil when s is outside [0, NumSteps).
func (m *Model) Temb(s int) []float32 {
	if s < 0 || s >= len(m.temb) {
		return nil
	}
	return m.temb[s]
}
