package noise

import "math"

// log256 and sincos256 re-state, lane by lane in float32, the Cephes-style
// approximations of avx_mathfun.h (log256_ps, sincos256_ps) that PyTorch's
// AVX2 normal_fill_16_AVX2 uses, including where GCC (floating-point
// contraction on, -mfma) fuses a product with the following addition: the
// first product of each a·b + c·d pair in statement order becomes an FMA.
// This contraction pattern reproduces Debian's torch 1.13 bit for bit.

func f32bits(x float32) uint32 { return math.Float32bits(x) }
func f32from(b uint32) float32 { return math.Float32frombits(b) }

// mul is a float32 product, rounded (the conversion keeps Go from fusing it).
func mul(a, b float32) float32 { return float32(a * b) }

// fma32 is the float32 fused multiply-add a·b + c with one rounding. The
// product is exact in float64; the sum's rounding error is recovered with
// TwoSum so that a float64 result lying exactly on a float32 rounding tie
// is moved off it in the direction of the exact value (no double rounding).
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	cf := float64(c)
	s := p + cf
	bb := s - p
	e := (p - (s - bb)) + (cf - bb)
	if e != 0 {
		r := float32(s)
		var n float32
		if float64(r) < s {
			n = math.Nextafter32(r, float32(math.Inf(1)))
		} else {
			n = math.Nextafter32(r, float32(math.Inf(-1)))
		}
		if (float64(r)+float64(n))/2 == s {
			s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
		}
	}
	return float32(s)
}

// log256 is log256_ps for 0 < x ≤ 1 (the caller passes 1 − u).
func log256(x float32) float32 {
	if x <= 0 {
		return float32(math.NaN())
	}
	const minNormPos = 0x00800000
	if f32bits(x) < minNormPos {
		x = f32from(minNormPos)
	}
	b := f32bits(x)
	emm0 := int32(b >> 23)
	b &^= 0x7f800000  // inv_mant_mask: keep sign and mantissa
	b |= f32bits(0.5) // exponent of 0.5: x ∈ [0.5, 1)
	x = f32from(b)
	emm0 -= 0x7f
	e := float32(emm0) + 1
	var tmp float32
	if x < 0.707106781186547524 {
		tmp = x
		e = e - 1
	}
	x = x - 1
	x = x + tmp
	z := mul(x, x)
	y := float32(7.0376836292e-2)
	for _, p := range [...]float32{-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
		1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1} {
		y = fma32(y, x, p)
	}
	y = mul(y, x)
	y = fma32(y, z, mul(e, -2.12194440e-4)) // y·z + e·q1
	y = fma32(z, -0.5, y)                   // y − z·0.5
	x = x + y
	x = fma32(e, 0.693359375, x) // x + e·q2
	return x
}

// sincos256 is sincos256_ps.
func sincos256(x float32) (s, c float32) {
	signSin := f32bits(x) & 0x80000000
	x = f32from(f32bits(x) &^ 0x80000000)
	y := mul(x, 1.27323954473516) // 4/π
	emm2 := int32(y)              // truncation, as _mm256_cvttps_epi32
	emm2 = (emm2 + 1) &^ 1
	y = float32(emm2)
	emm4 := emm2
	swapSin := uint32(emm2&4) << 29
	polySel := emm2&2 == 0
	// Extended-precision range reduction: x = ((x − y·DP1) − y·DP2) − y·DP3.
	x = fma32(y, -0.78515625, x)
	x = fma32(y, -2.4187564849853515625e-4, x)
	x = fma32(y, -3.77489497744594108e-8, x)
	emm4 -= 2
	signCos := uint32(^emm4&4) << 29
	signSin ^= swapSin
	z := mul(x, x)
	yc := fma32(2.443315711809948e-005, z, -1.388731625493765e-003)
	yc = fma32(yc, z, 4.166664568298827e-002)
	yc = mul(yc, z)
	yc = fma32(yc, z, -mul(z, 0.5)) // y·z − z·0.5
	yc = yc + 1
	ys := fma32(-1.9515295891e-4, z, 8.3321608736e-3)
	ys = fma32(ys, z, -1.6666654611e-1)
	ys = mul(ys, z)
	ys = fma32(ys, x, x)
	var sinV, cosV float32
	if polySel {
		sinV, cosV = ys, yc
	} else {
		sinV, cosV = yc, ys
	}
	return f32from(f32bits(sinV) ^ signSin), f32from(f32bits(cosV) ^ signCos)
}
