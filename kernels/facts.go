package kernels

import (
	"github.com/gr00tgw/gr00tgw/kernels/arena"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
)

// Facts returns what the megakernel host side serves, for /info's "stage"
// block and the arena CLI: the dtype policy, the arena's dtype, size, page
// size, per-bank bytes and digest, the core map and the L1 budget. d is the
// digest of the packed arena ("" when it was not packed).
func Facts(pl *arena.Plan, d arena.Digest) map[string]any {
	s := pl.Sched
	worst := schedule.L1Use{}
	for _, u := range s.L1(func(mm *schedule.Matmul) int { return pl.Policy.WeightFormat(mm).Bytes() }) {
		if u.Bytes > worst.Bytes {
			worst = u
		}
	}
	return map[string]any{
		"served":         "stage2-megakernel (host side; CPU emulation)",
		"policy":         pl.Policy.Name,
		"mk_arena_dtype": pl.Policy.Weight.String(),
		"arena":          pl.Facts(d),
		"core_map":       s.Map.Summary(),
		"worker_l1_size": schedule.WorkerL1,
		"l1_worst_core": map[string]any{
			"core": worst.Core, "bytes": worst.Bytes, "op": worst.Op,
		},
		"dit": map[string]any{
			"blocks": s.Dims.Blocks, "width": s.Dims.Width, "heads": s.Dims.Heads, "head_dim": s.Dims.HeadDim,
			"ff": s.Dims.FF, "cross_dim": s.Dims.CrossDim, "out_dim": s.Dims.OutDim, "rows": s.Dims.Rows,
		},
	}
}
