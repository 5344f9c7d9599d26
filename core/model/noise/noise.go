// Package noise reproduces PyTorch's CPU torch.randn bit for bit, so that a
// request that names a seed gets the same initial flow-matching noise as
// `torch.randn(shape, generator=torch.Generator().manual_seed(seed))` on an
// x86-64 CPU (PyTorch's AVX2 kernel; verified against Debian's torch 1.13).
//
// Algorithm (ATen CPUGeneratorImpl + normal_kernel): an MT19937 seeded with
// the seed's low 32 bits. For a float32 tensor of n ≥ 16 elements, every
// element first gets a uniform u = (r & 0xFFFFFF)·2⁻²⁴ from one 32-bit draw
// r; then each block of 16 becomes 8 Box–Muller pairs (radius from
// 1 − u[j], angle from u[j+8]; cos into j, sin into j+8). When n is not a
// multiple of 16, the last 16 elements are drawn again from the generator
// and transformed as one more block (overwriting the tail). For n < 16, each
// element is a double-precision Box–Muller sample (53-bit uniforms), the sine
// half cached for the next element, rounded to float32.
package noise

import "math"

// Randn fills dst with torch.randn(len(dst), generator=
// torch.Generator().manual_seed(seed)) as float32 on CPU. The shape does
// not matter, only the element count. It allocates nothing and is safe for
// concurrent use on distinct dst.
func Randn(dst []float32, seed uint64) {
	var g mt19937
	g.seed(seed)
	n := len(dst)
	if n < 16 {
		randnSmall(dst, &g)
		return
	}
	for i := range dst {
		dst[i] = uniform24(&g)
	}
	for i := 0; i+16 <= n; i += 16 {
		fill16(dst[i : i+16])
	}
	if n%16 != 0 {
		tail := dst[n-16:]
		for i := range tail {
			tail[i] = uniform24(&g)
		}
		fill16(tail)
	}
}

func uniform24(g *mt19937) float32 {
	return float32(float64(g.next()&0xFFFFFF) * (1.0 / (1 << 24)))
}

// fill16 is normal_fill_16_AVX2 with mean 0 and std 1.
func fill16(d []float32) {
	const twoPi = float32(2 * math.Pi)
	for j := 0; j < 8; j++ {
		u1 := 1 - d[j]
		u2 := d[j+8]
		radius := float32(math.Sqrt(float64(mul(-2, log256(u1)))))
		theta := mul(twoPi, u2)
		s, c := sincos256(theta)
		d[j] = mul(radius, c)
		d[j+8] = mul(radius, s)
	}
}

// randnSmall is ATen's per-element at::normal_distribution<double> path.
func randnSmall(dst []float32, g *mt19937) {
	var cached float64
	have := false
	for i := range dst {
		if have {
			dst[i] = float32(cached)
			have = false
			continue
		}
		u1 := uniform53(g)
		u2 := uniform53(g)
		r := math.Sqrt(-2 * math.Log1p(-u2))
		theta := 2 * math.Pi * u1
		cached, have = r*math.Sin(theta), true
		dst[i] = float32(r * math.Cos(theta))
	}
}

func uniform53(g *mt19937) float64 {
	hi := uint64(g.next())
	lo := uint64(g.next())
	v := hi<<32 | lo
	return float64(v&(1<<53-1)) * (1.0 / (1 << 53))
}
