package schedule

import (
	"fmt"
)

// WorkerL1 is the allocatable L1 per core the megakernel runs with: the
// reference server opens the Blackhole p150 with worker_l1_size =
// 1,461,248 − 65,536 B (the 64 KiB cut leaves the kernel-config ring the
// megakernel binaries need) and reports it in /info's stage block.
const WorkerL1 = 1_395_712

// L1 model constants (bytes).
const (
	ActTile   = 2048      // bf16 activation tile
	AccTile   = 4096      // fp32 accumulator / residual tile
	CBReserve = 32 * 1024 // semaphores, CB headers, modulation/statistics vectors, small scratch
)

// L1Use is one core's modelled L1 need at its worst op.
type L1Use struct {
	Core  int
	Bytes int
	Op    string // name of the op that needs the most
}

// L1 models, for every compute core, the L1 bytes its worst op needs:
//
//   - weights: the group's stripe of one K tile row (cols × weight tile
//     bytes), double-buffered, because the hub multicasts whole stripes; an
//     op whose core owns more than 2 tile rows (the prologue) keeps its own
//     columns resident instead and streams activation rows;
//   - activations: the core's input row tiles (at most 2 resident, bf16
//     tiles, the whole K);
//   - outputs: one fp32 accumulator tile per output tile;
//   - always: the core's residual-stream tiles (fp32) and CBReserve;
//   - attention: its head's Q rows, its keys' K and V tiles (bf16) and the
//     fp32 score tiles and the partial output.
//
// wTile returns the weight tile bytes of a matmul (1088 for bfp8_b).
func (s *Schedule) L1(wTile func(*Matmul) int) []L1Use {
	out := make([]L1Use, Cores)
	for c := 0; c < Cores; c++ {
		base := CBReserve + len(s.Elem[c])*AccTile
		use := L1Use{Core: c, Bytes: base}
		try := func(b int, name string) {
			if b+base > use.Bytes {
				use.Bytes, use.Op = b+base, name
			}
		}
		for _, mm := range s.Matmuls() {
			ts := mm.Tiles[c]
			if len(ts) == 0 {
				continue
			}
			rows, cols := map[int]bool{}, map[int]bool{}
			for _, t := range ts {
				rows[t.M], cols[t.N] = true, true
			}
			g := c / Group
			cg := mm.Cols[g][1] - mm.Cols[g][0]
			w := 2 * cg * wTile(mm)
			if len(rows) > 2 {
				w += len(cols) * mm.Kt() * wTile(mm)
			}
			a := min(len(rows), 2) * mm.Kt() * ActTile
			try(w+a+len(ts)*AccTile, mm.Name)
		}
		for _, op := range s.Ops {
			if op.Kind != OpAttention {
				continue
			}
			for _, p := range op.Attn.Parts[c] {
				mt, dt := tiles(s.Dims.Rows), tiles(s.Dims.HeadDim)
				kt := p.K1 - p.K0
				b := mt*dt*ActTile + 2*kt*dt*ActTile + mt*kt*AccTile + mt*dt*AccTile
				try(b, fmt.Sprintf("attention.%d", op.Block))
			}
		}
		out[c] = use
	}
	return out
}

// Check verifies the schedule's invariants and returns the first violation:
//
//   - the core map is valid (see CoreMap.Validate);
//   - every output tile of every matmul, every residual-stream tile and
//     every Euler tile is produced by exactly one compute core;
//   - every weight column a core needs belongs to its own group, so the
//     core receives each weight tile from exactly one hub, the one serving
//     that column's bank;
//   - every head's key tiles are split into disjoint ways covering all
//     keys, each (head, way) on exactly one core;
//   - the modelled L1 need of every core fits WorkerL1 (wTile gives the
//     weight tile bytes; nil means bfp8_b, 1088).
func (s *Schedule) Check(wTile func(*Matmul) int) error {
	if err := s.Map.Validate(); err != nil {
		return err
	}
	if wTile == nil {
		wTile = func(*Matmul) int { return 1088 }
	}
	for _, mm := range s.Matmuls() {
		if err := exactlyOnce(mm.Name, mm.Mt(), mm.Nt(), mm.Tiles[:]); err != nil {
			return err
		}
		for c, ts := range mm.Tiles {
			hubs := s.Map.HubsReaching(s.Map.Compute[c])
			if len(hubs) != 1 {
				return fmt.Errorf("schedule: %s: core %d reached by hubs %v", mm.Name, c, hubs)
			}
			for _, t := range ts {
				g := mm.GroupOf(t.N)
				if g != c/Group {
					return fmt.Errorf("schedule: %s: core %d (group %d) makes column %d of group %d", mm.Name, c, c/Group, t.N, g)
				}
				if s.Map.HubOf[g] != hubs[0] {
					return fmt.Errorf("schedule: %s: column %d streams through hub %d, core %d hears hub %d", mm.Name, t.N, s.Map.HubOf[g], c, hubs[0])
				}
			}
		}
	}
	if err := exactlyOnce("residual", tiles(s.Dims.Rows), tiles(s.Dims.Width), s.Elem[:]); err != nil {
		return err
	}
	if err := exactlyOnce("euler", tiles(s.Dims.Rows-1), tiles(s.ActionDim), s.Euler[:]); err != nil {
		return err
	}
	for _, op := range s.Ops {
		if op.Kind != OpAttention {
			continue
		}
		kt := tiles(op.Attn.Keys)
		cover := make([][]int, s.Dims.Heads)
		for h := range cover {
			cover[h] = make([]int, kt)
		}
		seen := map[[2]int]int{}
		for _, ps := range op.Attn.Parts {
			for _, p := range ps {
				seen[[2]int{p.Head, p.Way}]++
				for k := p.K0; k < p.K1; k++ {
					cover[p.Head][k]++
				}
			}
		}
		for h := range cover {
			for k, n := range cover[h] {
				if n != 1 {
					return fmt.Errorf("schedule: attention.%d head %d key tile %d covered %d times", op.Block, h, k, n)
				}
			}
		}
		for hw, n := range seen {
			if n != 1 {
				return fmt.Errorf("schedule: attention.%d head %d way %d on %d cores", op.Block, hw[0], hw[1], n)
			}
		}
	}
	for _, u := range s.L1(wTile) {
		if u.Bytes > WorkerL1 {
			return fmt.Errorf("schedule: core %d needs %d B of L1 for %s, budget %d", u.Core, u.Bytes, u.Op, WorkerL1)
		}
	}
	return nil
}

func exactlyOnce(name string, mt, nt int, per [][]OutTile) error {
	n := make([]int, mt*nt)
	for c, ts := range per {
		for _, t := range ts {
			if t.M < 0 || t.M >= mt || t.N < 0 || t.N >= nt {
				return fmt.Errorf("schedule: %s: core %d tile %+v outside %dx%d", name, c, t, mt, nt)
			}
			n[t.M*nt+t.N]++
		}
	}
	for i, k := range n {
		if k != 1 {
			return fmt.Errorf("schedule: %s: tile (%d,%d) produced %d times", name, i/nt, i%nt, k)
		}
	}
	return nil
}
