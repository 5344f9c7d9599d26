package cpu

import (
	"context"
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/model/actionhead"
	"github.com/gr00tgw/gr00tgw/core/safetensors"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/kernels"
	"github.com/gr00tgw/gr00tgw/kernels/arena"
	"github.com/gr00tgw/gr00tgw/kernels/emu"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
)

// MixedDiT is the name of the dtype policy whose denoise transformer is the
// CPU emulation of the Tenstorrent megakernel (kernels/emu): bfp8_b
// weights packed into the DRAM arena, bf16 biases, fp32 activations and
// accumulation, executed core by core in the megakernel's tile order.
// Every other stage (and the action encoder/decoder) stays fp32.
const MixedDiT = "mixed_dit"

func init() {
	RegisterPolicy(MixedDiT, func() (Policy, error) {
		k := tensor.DefaultBF16Weights() // bit-identical to fp32 storage, half the bytes
		return Policy{Name: MixedDiT, Vision: k, LLM: k, Adapter: k, Denoise: k, DiT: loadMixedDiT}, nil
	})
}

// DiTSource is what a policy's DiT loader gets from Open: the open
// checkpoint (valid only during the call), its raw config.json, the parsed
// action-head configuration and the thread budget.
type DiTSource struct {
	Set        *safetensors.Set
	ConfigJSON []byte
	ActionHead actionhead.Config
	Threads    int
}

// DiTLoader builds a policy's denoise transformer and the facts it adds to
// Backend.Facts().Extra (under "stage"). The DiT is owned by the backend's
// single denoise plan (it is never called concurrently); when it
// implements io.Closer, Backend.Close closes it.
type DiTLoader func(ctx context.Context, src DiTSource) (actionhead.DiT, map[string]any, error)

// loadMixedDiT plans the megakernel schedule from the checkpoint's config,
// packs the mixed_dit (bfp8_b) arena from its DiT tensors and returns an
// emulation session with kernels.Facts (policy, arena dtype, size, digest,
// core map, L1) as its facts.
func loadMixedDiT(ctx context.Context, src DiTSource) (actionhead.DiT, map[string]any, error) {
	dims, err := schedule.FromConfig(src.ConfigJSON)
	if err != nil {
		return nil, nil, err
	}
	if err := matchDims(dims, src.ActionHead); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", MixedDiT, err)
	}
	dit, dig, err := emu.Load(ctx, arena.FromSafetensors(src.Set), dims, arena.MixedDiT(), src.Threads)
	if err != nil {
		return nil, nil, err
	}
	return dit.NewSession(), kernels.Facts(dit.Plan(), dig), nil
}

// matchDims refuses a checkpoint whose action-head configuration describes
// a transformer the megakernel schedule does not (it fixes the block
// pattern: odd blocks self-attend, text blocks at i mod 4 = 0).
func matchDims(d schedule.Dims, c actionhead.Config) error {
	switch {
	case d.Blocks != c.Layers, d.Width != c.Width, d.Heads != c.Heads, d.HeadDim != c.HeadDim,
		d.FF != c.FF, d.CrossDim != c.BackboneDim, d.OutDim != c.OutputDim, d.Rows != c.Tokens():
		return fmt.Errorf("schedule dims %+v disagree with the action head (layers %d, width %d, heads %d×%d, ff %d, backbone %d, out %d, tokens %d)",
			d, c.Layers, c.Width, c.Heads, c.HeadDim, c.FF, c.BackboneDim, c.OutputDim, c.Tokens())
	}
	for i := 0; i < c.Layers; i++ {
		want := map[schedule.BlockKind]actionhead.BlockKind{
			schedule.Self: actionhead.SelfBlock, schedule.CrossText: actionhead.TextBlock, schedule.CrossImage: actionhead.ImageBlock,
		}[schedule.Kind(i)]
		if c.Kind(i) != want {
			return fmt.Errorf("DiT block %d has kind %d in the config but %v in the megakernel schedule (attend_text_every_n_blocks %d, the schedule assumes 2)",
				i, c.Kind(i), schedule.Kind(i), c.AttendTextEvery)
		}
	}
	return nil
}
