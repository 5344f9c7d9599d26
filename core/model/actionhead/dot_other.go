//go:build !amd64

package actionhead

// dot4 returns the dot products of a0..a3 with the shared row b (each a_i
// at least len(b) long).
func dot4(a0, a1, a2, a3, b []float32) (r0, r1, r2, r3 float32) {
	n := len(b)
	a0, a1, a2, a3 = a0[:n], a1[:n], a2[:n], a3[:n]
	for p, x := range b {
		r0 += a0[p] * x
		r1 += a1[p] * x
		r2 += a2[p] * x
		r3 += a3[p] * x
	}
	return r0, r1, r2, r3
}
