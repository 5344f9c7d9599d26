package actionhead

import "golang.org/x/sys/cpu"

var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dot4AVX2 returns the dot products of a0..a3 with b over n elements; n
// must be a positive multiple of 8. Implemented in dot_amd64.s.
//
//go:noescape
func dot4AVX2(a0, a1, a2, a3, b *float32, n int) (r0, r1, r2, r3 float32)

// dot4 returns the dot products of a0..a3 with the shared row b (each a_i
// at least len(b) long), with AVX2+FMA for the multiple-of-8 prefix.
func dot4(a0, a1, a2, a3, b []float32) (r0, r1, r2, r3 float32) {
	n := len(b)
	a0, a1, a2, a3 = a0[:n], a1[:n], a2[:n], a3[:n]
	n8 := 0
	if hasAVX2FMA && n >= 8 {
		n8 = n &^ 7
		r0, r1, r2, r3 = dot4AVX2(&a0[0], &a1[0], &a2[0], &a3[0], &b[0], n8)
	}
	for p := n8; p < n; p++ {
		x := b[p]
		r0 += a0[p] * x
		r1 += a1[p] * x
		r2 += a2[p] * x
		r3 += a3[p] * x
	}
	return r0, r1, r2, r3
}
