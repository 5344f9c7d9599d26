package tensor

import "math"

// PCC is the Pearson correlation of a and b, accumulated in float64: the
// fidelity figure the goldens, the warm-up gate and the benchmarks report.
// It returns NaN when the lengths differ or are zero, or when either side is
// constant. Pure; safe for concurrent use.
func PCC[T float32 | float64](a, b []T) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return math.NaN()
	}
	var ma, mb float64
	for i := range a {
		ma += float64(a[i])
		mb += float64(b[i])
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		da, db := float64(a[i])-ma, float64(b[i])-mb
		sab += da * db
		saa += da * da
		sbb += db * db
	}
	if saa == 0 || sbb == 0 {
		return math.NaN()
	}
	return sab / math.Sqrt(saa*sbb)
}
