// Package benchmodel builds real-size pieces of GR00T N1.7 from the
// product's own packages (core/model/backbone, core/model/actionhead) with
// deterministic synthetic weights, and times them the way `make
// bench-model` compares them with Debian's PyTorch: one ViT block over the
// DROID patch rows and one step of the 32-block DiT.
//
// Synthetic weights are bf16-representable (as every weight widened from a
// real BF16 checkpoint is), so tensor.DefaultBF16Weights stores them in
// bf16 losslessly. Building is deterministic: the same name always yields
// the same values.
package benchmodel

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// synth returns n deterministic values for tensor name: uniform with
// variance 1/fanIn (fanIn ≤ 0: around 1 ± 0.1, for norm weights), rounded
// to bf16. Chunks of synthChunk values have their own PCG stream (seeded
// by the name's hash and the chunk index) and are filled in parallel.
func synth(name string, n, fanIn int) []float32 {
	out := make([]float32, n)
	chunks := (n + synthChunk - 1) / synthChunk
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(chunks, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ci := int(next.Add(1) - 1)
				if ci >= chunks {
					return
				}
				fillChunk(out[ci*synthChunk:min((ci+1)*synthChunk, n)], name, fanIn, ci)
			}
		}()
	}
	wg.Wait()
	return out
}

// synthRange returns chunk ci of synth(name, n, fanIn) (a fresh slice of at
// most synthChunk values).
func synthRange(name string, n, fanIn, ci int) []float32 {
	part := make([]float32, min((ci+1)*synthChunk, n)-ci*synthChunk)
	fillChunk(part, name, fanIn, ci)
	return part
}

// fillChunk fills part with the values of chunk ci of name's stream.
func fillChunk(part []float32, name string, fanIn, ci int) {
	h := fnv.New64a()
	h.Write([]byte(name))
	seed := h.Sum64()
	a, c := float32(1), float32(0)
	if fanIn > 0 {
		a = float32(math.Sqrt(3 / float64(fanIn)))
	} else {
		a, c = 0.1*float32(math.Sqrt(3)), 1
	}
	rng := rand.NewPCG(seed, uint64(ci))
	for i := range part {
		u := float32(rng.Uint64()>>40)*(2.0/(1<<24)) - 1
		part[i] = roundBF16(c + a*u)
	}
}

const synthChunk = 1 << 18

// roundBF16 rounds v to the nearest bf16 value (ties to even).
func roundBF16(v float32) float32 {
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// isNorm reports whether a 1-D tensor is a norm gain (synthesised around 1).
func isNorm(name string) bool {
	return strings.Contains(name, "norm") && strings.HasSuffix(name, ".weight") || strings.HasSuffix(name, "vlln.weight")
}

// fanIn of a tensor of the given shape: the last axis of a matrix, the
// input axis of a [E, in, out] category weight, 0 for norm gains.
func fanIn(name string, shape []int) int {
	switch {
	case len(shape) == 1 && isNorm(name):
		return 0
	case len(shape) == 1:
		return max(shape[0], 1) * 64 // biases: small
	case len(shape) == 3 && strings.HasSuffix(name, ".W"):
		return shape[1]
	}
	n := 1
	for _, d := range shape[1:] {
		n *= d
	}
	return n
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// shapeError is returned for a name the synthetic checkpoint does not hold.
func shapeError(name string) error {
	return fmt.Errorf("benchmodel: tensor[%s]: not in the synthetic checkpoint", name)
}
