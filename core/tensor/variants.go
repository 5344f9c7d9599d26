package tensor

// Variant is one Kernels implementation usable on this CPU, by name.
type Variant struct {
	// Name identifies the implementation: "avx512", "avx512-bf16" (bf16
	// storage of bf16-exact weights, see DefaultBF16Weights), "avx2",
	// "avx2-bf16", "neon", "neon-bf16" (arm64), "portable".
	Name string
	// Kernels is the implementation; shared and safe for concurrent use.
	Kernels Kernels
}

// Variants lists every implementation the running CPU supports, fastest
// fp32 first, "portable" last. It is for tests, benchmarks and diagnostics
// (a --kernels flag via ByName); model code should call Default or
// DefaultBF16Weights. The returned slice is a copy.
func Variants() []Variant {
	return append([]Variant(nil), variants...)
}

var variants = []Variant{{Name: "portable", Kernels: Portable()}}
