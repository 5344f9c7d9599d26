package schedule

import (
	"fmt"
)

// Section says how often the megakernel streams a weight.
type Section uint8

// Sections of the arena, in stream order.
const (
	Prologue Section = iota // once per request: cross-attention K/V of the VL features
	Step                    // once per Euler step: every block, then the output layer
)

// String names the section.
func (s Section) String() string { return [...]string{"prologue", "step"}[s] }

// Act is the activation applied to a matmul's output (after the bias).
type Act uint8

// Activations.
const (
	ActNone Act = iota
	ActGELUTanh
)

// OutTile is one 32×32 output tile: tile row M (over tokens), tile column N
// (over output features).
type OutTile struct{ M, N int }

// Matmul is one y[M,N] = x[M,K]·Wᵀ + b of the DiT with W an nn.Linear
// weight [N, K]. Weight column tile n (output features 32n..32n+31) lives in
// the DRAM bank of the group whose column range holds n; that group's hub
// multicasts it to the group's 12 cores, and the group's cores produce every
// output tile of those columns.
type Matmul struct {
	Name    string  // tensor base name under action_head.model., e.g. "transformer_blocks.3.attn1.to_q"
	Block   int     // block index, -1 for the output layer
	Section Section // how often the weight is streamed
	M, K, N int     // activation rows, inner size, output features
	Act     Act
	// Cols[g] = [lo, hi): the weight column tiles of group (bank) g.
	Cols [Banks][2]int
	// Tiles[c] lists compute core c's output tiles in execution order.
	Tiles [Cores][]OutTile
}

// Mt, Kt and Nt are the tile counts of M, K and N (rounded up).
func (m *Matmul) Mt() int { return tiles(m.M) }

// Kt is the number of K tiles.
func (m *Matmul) Kt() int { return tiles(m.K) }

// Nt is the number of N tiles.
func (m *Matmul) Nt() int { return tiles(m.N) }

// GroupOf returns the group (bank) whose columns include tile column n.
func (m *Matmul) GroupOf(n int) int {
	for g, r := range m.Cols {
		if n >= r[0] && n < r[1] {
			return g
		}
	}
	return -1
}

// newMatmul distributes the N tiles over the 8 groups in contiguous,
// balanced ranges (the first Nt mod 8 groups get one more) and, inside a
// group, enumerates its output tiles row-major over (tile row, local column)
// and deals them round-robin to the group's 12 cores. With 2 tile rows and 6
// columns per group every core makes one tile; with 24 columns every core
// owns two whole columns; with many rows (the prologue) every core owns one
// column and every other row.
func newMatmul(name string, block int, sec Section, m, k, n int, act Act) *Matmul {
	mm := &Matmul{Name: name, Block: block, Section: sec, M: m, K: k, N: n, Act: act}
	nt, mt := mm.Nt(), mm.Mt()
	lo := 0
	for g := 0; g < Banks; g++ {
		c := nt / Banks
		if g < nt%Banks {
			c++
		}
		mm.Cols[g] = [2]int{lo, lo + c}
		cg := c
		for j := 0; j < mt*cg; j++ {
			core := g*Group + j%Group
			mm.Tiles[core] = append(mm.Tiles[core], OutTile{M: j / cg, N: lo + j%cg})
		}
		lo += c
	}
	return mm
}

// AttnPart is one share of one head's attention: the queries of every token
// against key tiles [K0, K1). Way 0 of a head merges the partial softmax
// results (running max, sum, weighted values) of the other ways.
type AttnPart struct {
	Head, Way, Ways int
	K0, K1          int // key tile range
}

// Attention is the per-head attention of one block.
type Attention struct {
	Block int
	Kind  BlockKind
	Keys  int // planned key count
	// Parts[c] lists compute core c's parts.
	Parts [Cores][]AttnPart
}

// MaxWays is how many ways one head's keys are split at most: 32 heads × 3
// fill the 96 compute cores.
const MaxWays = 3

func newAttention(d Dims, block int) *Attention {
	a := &Attention{Block: block, Kind: Kind(block), Keys: d.Keys(block)}
	kt := tiles(a.Keys)
	ways := min(MaxWays, kt)
	for h := 0; h < d.Heads; h++ {
		for w := 0; w < ways; w++ {
			core := (h*MaxWays + w) % Cores
			a.Parts[core] = append(a.Parts[core], AttnPart{Head: h, Way: w, Ways: ways, K0: w * kt / ways, K1: (w + 1) * kt / ways})
		}
	}
	return a
}

// OpKind is the kind of one schedule step.
type OpKind uint8

// Op kinds.
const (
	OpMatmul    OpKind = iota // Matmul (bias, activation, optional residual add)
	OpLayerNorm               // distributed LayerNorm of the residual stream, optionally AdaLN-modulated
	OpAttention               // per-head attention
	OpEuler                   // x ← x + dt·v over the action chunk
)

// Op is one step of the per-Euler-step program. Every op ends in a global
// barrier (the sync cores), so ops see all outputs of earlier ops.
type Op struct {
	Kind OpKind
	MM   *Matmul    // OpMatmul
	Attn *Attention // OpAttention
	// Residual: the matmul output is added into the residual stream z
	// (attention out-projection, FF down-projection).
	Residual bool
	// LayerNorm: Eps, and Mod names the matmul whose output holds the
	// modulation ("" = none). Block-local AdaLN gives (scale, shift); the
	// output layer's proj_out_1 gives (shift, scale): ShiftFirst.
	Eps        float32
	Mod        string
	ShiftFirst bool
	Block      int
}

// Schedule is the full per-core plan of the DiT megakernel for one Dims.
type Schedule struct {
	Dims     Dims
	Map      *CoreMap
	Prologue []*Matmul // cross-attention K/V projections, in stream order
	Ops      []Op      // one Euler step's DiT program, in execution order
	Euler    [Cores][]OutTile
	// Elem[c] lists the tiles of the residual stream [Rows, Width] core c
	// owns for LayerNorm and residual adds (the distribution of a Width-wide
	// matmul).
	Elem [Cores][]OutTile
	// ActionDim is the width of the Euler update's action chunk (132).
	ActionDim int
}

// Plan builds the schedule of d on the default core map.
func Plan(d Dims) (*Schedule, error) { return PlanOn(d, Default()) }

// PlanOn builds the schedule of d on core map m (e.g. one whose readers come
// from the device's optimal DRAM-bank assignment); m must pass Validate.
// The tile assignment depends only on group and rank, not on coordinates.
func PlanOn(d Dims, m *CoreMap) (*Schedule, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	s := &Schedule{Dims: d, Map: m, ActionDim: 132}
	D := d.Width
	bn := func(i int, leaf string) string { return fmt.Sprintf("transformer_blocks.%d.%s", i, leaf) }
	for i := 0; i < d.Blocks; i++ {
		if Kind(i) != Self {
			s.Prologue = append(s.Prologue,
				newMatmul(bn(i, "attn1.to_k"), i, Prologue, d.Keys(i), d.CrossDim, D, ActNone),
				newMatmul(bn(i, "attn1.to_v"), i, Prologue, d.Keys(i), d.CrossDim, D, ActNone))
		}
	}
	for i := 0; i < d.Blocks; i++ {
		ada := newMatmul(bn(i, "norm1.linear"), i, Step, 1, D, 2*D, ActNone)
		s.Ops = append(s.Ops,
			Op{Kind: OpMatmul, MM: ada, Block: i},
			Op{Kind: OpLayerNorm, Eps: 1e-5, Mod: ada.Name, Block: i},
			Op{Kind: OpMatmul, MM: newMatmul(bn(i, "attn1.to_q"), i, Step, d.Rows, D, D, ActNone), Block: i})
		if Kind(i) == Self {
			s.Ops = append(s.Ops,
				Op{Kind: OpMatmul, MM: newMatmul(bn(i, "attn1.to_k"), i, Step, d.Rows, D, D, ActNone), Block: i},
				Op{Kind: OpMatmul, MM: newMatmul(bn(i, "attn1.to_v"), i, Step, d.Rows, D, D, ActNone), Block: i})
		}
		s.Ops = append(s.Ops,
			Op{Kind: OpAttention, Attn: newAttention(d, i), Block: i},
			Op{Kind: OpMatmul, MM: newMatmul(bn(i, "attn1.to_out.0"), i, Step, d.Rows, D, D, ActNone), Residual: true, Block: i},
			Op{Kind: OpLayerNorm, Eps: 1e-5, Block: i},
			Op{Kind: OpMatmul, MM: newMatmul(bn(i, "ff.net.0.proj"), i, Step, d.Rows, D, d.FF, ActGELUTanh), Block: i},
			Op{Kind: OpMatmul, MM: newMatmul(bn(i, "ff.net.2"), i, Step, d.Rows, d.FF, D, ActNone), Residual: true, Block: i})
	}
	po1 := newMatmul("proj_out_1", -1, Step, 1, D, 2*D, ActNone)
	s.Ops = append(s.Ops,
		Op{Kind: OpMatmul, MM: po1, Block: -1},
		Op{Kind: OpLayerNorm, Eps: 1e-6, Mod: po1.Name, ShiftFirst: true, Block: -1},
		Op{Kind: OpMatmul, MM: newMatmul("proj_out_2", -1, Step, d.Rows, D, d.OutDim, ActNone), Block: -1})
	s.Elem = newMatmul("elem", -1, Step, d.Rows, D, D, ActNone).Tiles
	s.Euler = newMatmul("euler", -1, Step, d.Rows-1, 0, s.ActionDim, ActNone).Tiles
	return s, nil
}

// Matmuls returns every matmul in arena stream order: the prologue, then
// one step's ops.
func (s *Schedule) Matmuls() []*Matmul {
	out := append([]*Matmul(nil), s.Prologue...)
	for _, op := range s.Ops {
		if op.Kind == OpMatmul {
			out = append(out, op.MM)
		}
	}
	return out
}
