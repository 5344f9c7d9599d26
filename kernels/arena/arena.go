// Package arena plans and packs the DiT megakernel's DRAM weight arena: every
// DiT matmul weight as 32×32 tiles (bfp8_b under the mixed_dit policy), in
// the order the megakernel streams them, interleaved over the 8 DRAM banks
// so that each bank's reader core streams only the columns its compute group
// needs, one contiguous run per op.
//
// Layout. The arena is one DRAM-interleaved buffer of PageSize-byte pages
// (page i in bank i mod 8, tt-metal's interleaved addressing). It is a
// sequence of segments; a segment holds, for each bank g, the bytes of the
// columns group g computes, padded to the same number of pages in every
// bank, so segment pages form rows of 8 (one page per bank). Segments, in
// stream order: the prologue (for each cross-attention block: its K/V bias
// page, to_k, to_v), then one Euler step (for each block: a bias page, then
// norm1.linear, to_q, [to_k, to_v for self blocks], to_out.0, ff.net.0.proj,
// ff.net.2; then the output layer's bias page, proj_out_1, proj_out_2).
// Inside a weight segment a bank's bytes are the tiles of Wᵀ ([K, N], the
// matmul's B operand) for k-tile 0..Kt−1, and inside each k-tile the group's
// column tiles in order: one "stripe" per k-tile, which the hub multicasts.
// Tiles never straddle a page. A bias page holds, per matmul and column tile,
// the 32 bias values in the bias format (64 B for bf16).
//
// PageSize is 6 weight tiles (6,528 B for bfp8_b): with the real N1.7 shapes
// a group's stripe is 6 tiles (to_q/k/v/out, ff.net.2, proj_out_2 at 4), 12
// (norm1.linear, proj_out_1) or 24 (ff.net.0.proj), so every stripe is a
// whole number of pages; a page is one NoC read ≥ 1.5 KB (DRAM request-rate
// limit) and ≤ 16 KB (one burst), and a multiple of the 64 B DRAM alignment.
package arena

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/gr00tgw/gr00tgw/kernels/schedule"
	"github.com/gr00tgw/gr00tgw/kernels/tile"
)

// Prefix is the checkpoint name prefix of the DiT tensors.
const Prefix = "action_head.model."

// DRAMAlign is the Blackhole DRAM alignment every page size must respect.
const DRAMAlign = 64

// StripeTiles is the number of weight tiles in one page.
const StripeTiles = 6

// WeightSource yields checkpoint tensors by full name as float32 (bf16
// checkpoints widen exactly). Implementations may load lazily; the planner
// calls Tensor once per tensor it packs and does not retain data.
type WeightSource interface {
	Tensor(name string) (shape []int, data []float32, err error)
}

// Policy says in which format each DiT tensor is stored.
type Policy struct {
	Name string
	// Weight is the format of every matmul weight unless overridden.
	Weight tile.Format
	// Bias is the format of the biases: BF16 or Float32.
	Bias tile.Format
	// Override maps a tensor leaf ("attn1.to_q", "norm1.linear",
	// "proj_out_1", …) to a weight format.
	Override map[string]tile.Format
	// Tile tunes the block-float packer.
	Tile tile.Options
}

// MixedDiT is the served policy: DiT matmul weights bfp8_b, everything else
// (biases) bf16.
func MixedDiT() Policy { return Policy{Name: "mixed_dit", Weight: tile.Bfp8b, Bias: tile.BF16} }

// BF16 stores every weight and bias as bf16 tiles (the arena's bf16 option).
func BF16() Policy { return Policy{Name: "bf16", Weight: tile.BF16, Bias: tile.BF16} }

// FP32 stores everything in float32 (exact; for differential tests).
func FP32() Policy { return Policy{Name: "fp32", Weight: tile.Float32, Bias: tile.Float32} }

// PolicyByName returns one of the named policies above.
func PolicyByName(name string) (Policy, error) {
	switch name {
	case "mixed_dit", "bfp8_b", "auto", "":
		return MixedDiT(), nil
	case "bf16":
		return BF16(), nil
	case "fp32":
		return FP32(), nil
	}
	return Policy{}, fmt.Errorf("arena: unknown policy %q (want mixed_dit, bf16 or fp32)", name)
}

// WeightFormat returns the format of matmul mm's weight.
func (p Policy) WeightFormat(mm *schedule.Matmul) tile.Format {
	for leaf, f := range p.Override {
		if strings.HasSuffix(mm.Name, leaf) {
			return f
		}
	}
	return p.Weight
}

// SegKind distinguishes weight and bias segments.
type SegKind uint8

// Segment kinds.
const (
	SegWeight SegKind = iota
	SegBias
)

// Segment is one op's (or one block's biases') share of the arena.
type Segment struct {
	Name    string
	Kind    SegKind
	Section schedule.Section
	Format  tile.Format
	// MMs is the matmul of a weight segment, or the matmuls whose biases a
	// bias segment holds, in order.
	MMs []*schedule.Matmul
	// FirstPage is the global index of the segment's first page (bank 0).
	FirstPage int
	// PagesPerBank is the segment's page count in every bank.
	PagesPerBank int
	// Used is the payload (unpadded) bytes of each bank.
	Used [schedule.Banks]int
	// biasOff[i] is the byte offset of MMs[i]'s biases inside each bank's
	// part of a bias segment.
	biasOff []int
}

// Plan is a complete arena layout. It is immutable after Build.
type Plan struct {
	Policy   Policy
	Sched    *schedule.Schedule
	PageSize int
	Pages    int   // total pages (a multiple of 8)
	Size     int64 // Pages·PageSize bytes
	Segments []*Segment
	// BankUsed is the payload bytes of each bank; BankAlloc the allocated
	// bytes (equal in every bank by construction).
	BankUsed  [schedule.Banks]int64
	BankAlloc int64
	// PrologueBytes and StepBytes split Size by section: the bytes streamed
	// once per request and once per Euler step.
	PrologueBytes, StepBytes int64
	weightSeg                map[string]*Segment // by matmul name
	biasSeg                  map[string]*Segment
	biasIdx                  map[string]int
}

// Build lays out the arena of schedule s under policy p.
func Build(s *schedule.Schedule, p Policy) (*Plan, error) {
	if p.Bias != tile.BF16 && p.Bias != tile.Float32 {
		return nil, fmt.Errorf("arena: policy %s: bias format %s unsupported", p.Name, p.Bias)
	}
	pl := &Plan{Policy: p, Sched: s, weightSeg: map[string]*Segment{}, biasSeg: map[string]*Segment{}, biasIdx: map[string]int{}}
	maxTile := 0
	for _, mm := range s.Matmuls() {
		maxTile = max(maxTile, p.WeightFormat(mm).Bytes())
	}
	pl.PageSize = StripeTiles * maxTile
	if pl.PageSize%DRAMAlign != 0 {
		return nil, fmt.Errorf("arena: page size %d not a multiple of %d", pl.PageSize, DRAMAlign)
	}
	// group the stream: bias segment, then weights, per block and section
	type run struct {
		name string
		sec  schedule.Section
		mms  []*schedule.Matmul
	}
	var runs []run
	add := func(name string, sec schedule.Section, mm *schedule.Matmul) {
		if n := len(runs); n > 0 && runs[n-1].name == name && runs[n-1].sec == sec {
			runs[n-1].mms = append(runs[n-1].mms, mm)
			return
		}
		runs = append(runs, run{name, sec, []*schedule.Matmul{mm}})
	}
	for _, mm := range s.Matmuls() {
		name := "output"
		if mm.Block >= 0 {
			name = fmt.Sprintf("transformer_blocks.%d", mm.Block)
		}
		add(name, mm.Section, mm)
	}
	page := 0
	for _, r := range runs {
		b := &Segment{Name: r.name + "." + r.sec.String() + ".bias", Kind: SegBias, Section: r.sec, Format: p.Bias, MMs: r.mms, FirstPage: page}
		off := 0
		for i, mm := range r.mms {
			b.biasOff = append(b.biasOff, off)
			pl.biasSeg[mm.Name], pl.biasIdx[mm.Name] = b, i
			for g := 0; g < schedule.Banks; g++ {
				b.Used[g] += (mm.Cols[g][1] - mm.Cols[g][0]) * 32 * elemBytes(p.Bias)
			}
			off += maxCols(mm) * 32 * elemBytes(p.Bias)
		}
		b.PagesPerBank = ceilDiv(off, pl.PageSize)
		page += b.PagesPerBank * schedule.Banks
		pl.Segments = append(pl.Segments, b)
		for _, mm := range r.mms {
			f := p.WeightFormat(mm)
			w := &Segment{Name: mm.Name, Kind: SegWeight, Section: r.sec, Format: f, MMs: []*schedule.Matmul{mm}, FirstPage: page}
			tpp := pl.PageSize / f.Bytes()
			for g := 0; g < schedule.Banks; g++ {
				cg := mm.Cols[g][1] - mm.Cols[g][0]
				w.Used[g] = cg * mm.Kt() * f.Bytes()
				w.PagesPerBank = max(w.PagesPerBank, ceilDiv(cg*mm.Kt(), tpp))
			}
			page += w.PagesPerBank * schedule.Banks
			pl.Segments = append(pl.Segments, w)
			pl.weightSeg[mm.Name] = w
		}
	}
	pl.Pages = page
	pl.Size = int64(page) * int64(pl.PageSize)
	pl.BankAlloc = pl.Size / schedule.Banks
	for _, sg := range pl.Segments {
		for g, u := range sg.Used {
			pl.BankUsed[g] += int64(u)
		}
		n := int64(sg.PagesPerBank) * schedule.Banks * int64(pl.PageSize)
		if sg.Section == schedule.Prologue {
			pl.PrologueBytes += n
		} else {
			pl.StepBytes += n
		}
	}
	return pl, nil
}

// Imbalance returns (max − min)/max of the per-bank payload bytes.
func (pl *Plan) Imbalance() float64 {
	lo, hi := pl.BankUsed[0], pl.BankUsed[0]
	for _, u := range pl.BankUsed {
		lo, hi = min(lo, u), max(hi, u)
	}
	if hi == 0 {
		return 0
	}
	return float64(hi-lo) / float64(hi)
}

// WeightSegment returns the segment holding mm's weight (looked up by
// name, so a matmul of another schedule of the same Dims — e.g. one planned
// for other key counts — finds its weights too).
func (pl *Plan) WeightSegment(mm *schedule.Matmul) *Segment { return pl.weightSeg[mm.Name] }

// PageOffset returns the byte offset in the arena buffer of page j (0-based
// inside the segment) of bank g's share of sg.
func (pl *Plan) PageOffset(sg *Segment, g, j int) int64 {
	return int64(sg.FirstPage+j*schedule.Banks+g) * int64(pl.PageSize)
}

// WeightTileOffset returns where tile (kt, n) of mm's Wᵀ lies in the arena
// buffer, and its size.
func (pl *Plan) WeightTileOffset(mm *schedule.Matmul, kt, n int) (off int64, size int) {
	sg := pl.weightSeg[mm.Name]
	g := mm.GroupOf(n)
	lo, hi := mm.Cols[g][0], mm.Cols[g][1]
	idx := kt*(hi-lo) + n - lo
	tb := sg.Format.Bytes()
	tpp := pl.PageSize / tb
	return pl.PageOffset(sg, g, idx/tpp) + int64(idx%tpp*tb), tb
}

// BiasOffset returns where the 32 biases of mm's column tile n lie, and
// their size in bytes.
func (pl *Plan) BiasOffset(mm *schedule.Matmul, n int) (off int64, size int) {
	sg := pl.biasSeg[mm.Name]
	g := mm.GroupOf(n)
	eb := 32 * elemBytes(sg.Format)
	o := sg.biasOff[pl.biasIdx[mm.Name]] + (n-mm.Cols[g][0])*eb
	return pl.PageOffset(sg, g, o/pl.PageSize) + int64(o%pl.PageSize), eb
}

// Digest is the SHA-256 of the packed arena bytes (hex).
type Digest string

// Facts summarises the plan for /info and the CLI.
func (pl *Plan) Facts(d Digest) map[string]any {
	used := make([]int64, schedule.Banks)
	copy(used, pl.BankUsed[:])
	return map[string]any{
		"policy":           pl.Policy.Name,
		"arena_dtype":      pl.Policy.Weight.String(),
		"arena_bytes":      pl.Size,
		"page_size":        pl.PageSize,
		"pages":            pl.Pages,
		"prologue_bytes":   pl.PrologueBytes,
		"step_bytes":       pl.StepBytes,
		"bank_used_bytes":  used,
		"bank_alloc_bytes": pl.BankAlloc,
		"bank_imbalance":   pl.Imbalance(),
		"segments":         len(pl.Segments),
		"digest_sha256":    string(d),
	}
}

func elemBytes(f tile.Format) int {
	if f == tile.Float32 {
		return 4
	}
	return 2
}

func maxCols(mm *schedule.Matmul) int {
	m := 0
	for _, r := range mm.Cols {
		m = max(m, r[1]-r[0])
	}
	return m
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func hexSum(h [sha256.Size]byte) Digest { return Digest(hex.EncodeToString(h[:])) }
