package arena

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/gr00tgw/gr00tgw/kernels/schedule"
	"github.com/gr00tgw/gr00tgw/kernels/tile"
)

// Synthetic is a WeightSource of deterministic random DiT weights with the
// shapes of Dims: every tensor is generated on demand from (Seed, name), so
// a real-size source costs no memory until a tensor is asked for. Weights
// are N(0, 1/K) (fan-in scaled), biases N(0, 0.02²), all rounded to bf16 like
// the real checkpoint. Safe for concurrent use.
type Synthetic struct {
	Dims schedule.Dims
	Seed uint64
}

// Shape returns the shape of a DiT tensor, or an error for a name outside
// the DiT.
func (s Synthetic) Shape(name string) ([]int, error) {
	d := s.Dims
	leaf, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return nil, fmt.Errorf("synthetic: %s: not a DiT tensor", name)
	}
	isBias := strings.HasSuffix(leaf, ".bias")
	leaf = strings.TrimSuffix(strings.TrimSuffix(leaf, ".bias"), ".weight")
	var n, k int
	block := -1
	if rest, ok := strings.CutPrefix(leaf, "transformer_blocks."); ok {
		if _, err := fmt.Sscanf(rest, "%d.", &block); err != nil {
			return nil, fmt.Errorf("synthetic: %s: %w", name, err)
		}
		leaf = rest[strings.IndexByte(rest, '.')+1:]
		if block >= d.Blocks {
			return nil, fmt.Errorf("synthetic: %s: block %d of %d", name, block, d.Blocks)
		}
	}
	switch leaf {
	case "norm1.linear", "proj_out_1":
		n, k = 2*d.Width, d.Width
	case "attn1.to_q", "attn1.to_out.0":
		n, k = d.Width, d.Width
	case "attn1.to_k", "attn1.to_v":
		n, k = d.Width, d.Width
		if schedule.Kind(block) != schedule.Self {
			k = d.CrossDim
		}
	case "ff.net.0.proj":
		n, k = d.FF, d.Width
	case "ff.net.2":
		n, k = d.Width, d.FF
	case "proj_out_2":
		n, k = d.OutDim, d.Width
	default:
		return nil, fmt.Errorf("synthetic: %s: unknown DiT tensor", name)
	}
	if isBias {
		return []int{n}, nil
	}
	return []int{n, k}, nil
}

// Tensor implements WeightSource.
func (s Synthetic) Tensor(name string) ([]int, []float32, error) {
	shape, err := s.Shape(name)
	if err != nil {
		return nil, nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(s.Seed, h.Sum64()))
	n := 1
	for _, v := range shape {
		n *= v
	}
	sd := 0.02
	if len(shape) == 2 {
		sd = 1 / math.Sqrt(float64(shape[1]))
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = tile.FromBF16(tile.ToBF16(float32(rng.NormFloat64() * sd)))
	}
	return shape, data, nil
}
