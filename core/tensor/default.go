package tensor

import (
	"errors"
	"fmt"
	"strings"
)

// Default returns the fastest fp32 Kernels implementation for the CPU the
// process runs on, chosen once at start-up from its features
// (golang.org/x/sys/cpu): "avx512" (6×64 AVX-512F micro-kernel), else
// "avx2" (6×16 AVX2+FMA), else "portable"; on arm64 "neon" (12×8 ASIMD).
// Weights are stored in fp32. The
// returned value is shared and safe for concurrent use.
func Default() Kernels { return defaultKernels }

// DefaultBF16Weights returns the fastest implementation that stores every
// weight whose values are all exactly representable in bf16 — any weight
// widened from a bf16 checkpoint — as bf16 panels, half the bytes of fp32,
// and widens them to fp32 on the fly. The stored values, the fp32 products
// and their summation order are Default's, so results are bit-identical to
// Default's; only the bytes streamed from memory halve (the DiT's 41-row
// GEMMs are bound by them). A weight with any non-bf16 value is stored in
// fp32. It is Default where no SIMD path exists. Safe for concurrent use.
func DefaultBF16Weights() Kernels { return defaultBF16Kernels }

var (
	defaultKernels     = Portable()
	defaultBF16Kernels = defaultKernels
)

// ErrUnknownKernels is returned by ByName for a name that is not an
// implementation on this CPU.
var ErrUnknownKernels = errors.New("tensor: unknown kernels")

// ByName returns the implementation called name ("portable", "avx512",
// "avx512-bf16", "avx2", ... — see Variants) if this CPU supports it, for a
// configuration option or flag. "default" and "" mean Default.
func ByName(name string) (Kernels, error) {
	switch name {
	case "", "default":
		return Default(), nil
	}
	var have []string
	for _, v := range variants {
		if v.Name == name {
			return v.Kernels, nil
		}
		have = append(have, v.Name)
	}
	return nil, fmt.Errorf("%w: kernels[%s] (this CPU has %s)", ErrUnknownKernels, name, strings.Join(have, ", "))
}
