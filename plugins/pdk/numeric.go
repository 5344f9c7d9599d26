package pdk

import "math"

// The helpers below reproduce the reference pipeline's numpy arithmetic
// exactly (float32 arrays combined with float64 statistics), so plugins
// match upstream bit for bit where the reference does. Every intermediate
// rounding is written as an explicit conversion, which also stops the Go
// compiler from fusing a multiply and an add into an FMA on platforms that
// have one.

// IsClose reports numpy.isclose(hi, lo) with the default tolerances:
// |hi − lo| ≤ 1e-8 + 1e-5·|lo|.
func IsClose(hi, lo float64) bool {
	return math.Abs(hi-lo) <= 1e-8+1e-5*math.Abs(lo)
}

// NormalizeMinMax32 maps raw float32 values to [−1, 1] as upstream's
// normalize_values_minmax does for a float32 state: v = (x − lo)/(hi − lo)
// in float64 stored to float32, then 2·v − 1 in float32; dims where lo and
// hi are close (IsClose) give 0. With clip, the result is clipped to
// [−1, 1] (clip_outliers). dst, x, lo and hi must have equal lengths.
func NormalizeMinMax32(dst []float32, x []float32, lo, hi []float64, clip bool) {
	for i := range dst {
		if IsClose(hi[i], lo[i]) {
			dst[i] = 0
			continue
		}
		v := float32((float64(x[i]) - lo[i]) / (hi[i] - lo[i]))
		n := float32(float32(2*v) - 1)
		if clip {
			n = clip32(n)
		}
		dst[i] = n
	}
}

// NormalizeMinMax64 is NormalizeMinMax32 for a float64 state: the whole
// computation stays in float64 and the result is rounded to float32 once
// (the model input is float32).
func NormalizeMinMax64(dst []float32, x []float64, lo, hi []float64, clip bool) {
	for i := range dst {
		if IsClose(hi[i], lo[i]) {
			dst[i] = 0
			continue
		}
		v := (x[i] - lo[i]) / (hi[i] - lo[i])
		n := float64(2*v) - 1
		if clip {
			n = math.Max(-1, math.Min(1, n))
		}
		dst[i] = float32(n)
	}
}

// UnnormalizeMinMax inverts min-max normalisation as upstream's
// unnormalize_values_minmax does for a float32 chunk and float64 bounds:
// (clip(x, −1, 1) + 1)/2 in float32, then ·(hi − lo) + lo in float64.
func UnnormalizeMinMax(x float32, lo, hi float64) float64 {
	t := float32(float32(clip32(x)+1) / 2)
	return float64(float64(t)*(hi-lo)) + lo
}

func clip32(x float32) float32 {
	if x < -1 {
		return -1
	}
	if x > 1 {
		return 1
	}
	return x
}

// Mat3 is a row-major 3×3 matrix.
type Mat3 [9]float64

// Mul returns m·n (each entry ((a·b + c·d) + e·f), as numpy's matmul of
// 3×3 float64 matrices sums). Unrolled: loop back-edges are expensive in
// guests run with close-on-context-done (RATIONALE.md, "Deadlines:
// load-time stop checks, not close-on-context-done").
func (m *Mat3) Mul(n *Mat3) Mat3 {
	return Mat3{
		float64(float64(m[0]*n[0])+float64(m[1]*n[3])) + float64(m[2]*n[6]),
		float64(float64(m[0]*n[1])+float64(m[1]*n[4])) + float64(m[2]*n[7]),
		float64(float64(m[0]*n[2])+float64(m[1]*n[5])) + float64(m[2]*n[8]),
		float64(float64(m[3]*n[0])+float64(m[4]*n[3])) + float64(m[5]*n[6]),
		float64(float64(m[3]*n[1])+float64(m[4]*n[4])) + float64(m[5]*n[7]),
		float64(float64(m[3]*n[2])+float64(m[4]*n[5])) + float64(m[5]*n[8]),
		float64(float64(m[6]*n[0])+float64(m[7]*n[3])) + float64(m[8]*n[6]),
		float64(float64(m[6]*n[1])+float64(m[7]*n[4])) + float64(m[8]*n[7]),
		float64(float64(m[6]*n[2])+float64(m[7]*n[5])) + float64(m[8]*n[8]),
	}
}

// Apply returns m·v.
func (m *Mat3) Apply(v [3]float64) [3]float64 {
	return [3]float64{
		float64(float64(m[0]*v[0])+float64(m[1]*v[1])) + float64(m[2]*v[2]),
		float64(float64(m[3]*v[0])+float64(m[4]*v[1])) + float64(m[5]*v[2]),
		float64(float64(m[6]*v[0])+float64(m[7]*v[1])) + float64(m[8]*v[2]),
	}
}

// Rot6DToMat64 decodes a rot6d vector (the first two rows of a rotation
// matrix, row-major) by Gram-Schmidt in float64: r1 = a/|a|,
// r2 = normalise(b − (r1·b)·r1), r3 = r1 × r2; rows (r1, r2, r3).
func Rot6DToMat64(d []float64) Mat3 {
	a := [3]float64{d[0], d[1], d[2]}
	b := [3]float64{d[3], d[4], d[5]}
	na := math.Sqrt(float64(float64(a[0]*a[0])+float64(a[1]*a[1])) + float64(a[2]*a[2]))
	r1 := [3]float64{a[0] / na, a[1] / na, a[2] / na}
	dot := float64(float64(r1[0]*b[0])+float64(r1[1]*b[1])) + float64(r1[2]*b[2])
	r2 := [3]float64{b[0] - float64(dot*r1[0]), b[1] - float64(dot*r1[1]), b[2] - float64(dot*r1[2])}
	nb := math.Sqrt(float64(float64(r2[0]*r2[0])+float64(r2[1]*r2[1])) + float64(r2[2]*r2[2]))
	r2 = [3]float64{r2[0] / nb, r2[1] / nb, r2[2] / nb}
	r3 := [3]float64{
		float64(r1[1]*r2[2]) - float64(r1[2]*r2[1]),
		float64(r1[2]*r2[0]) - float64(r1[0]*r2[2]),
		float64(r1[0]*r2[1]) - float64(r1[1]*r2[0]),
	}
	return Mat3{r1[0], r1[1], r1[2], r2[0], r2[1], r2[2], r3[0], r3[1], r3[2]}
}

// Rot6DToMat32 is Rot6DToMat64 with every step in float32 (the reference
// decodes a float32 state this way); the result is widened to float64.
func Rot6DToMat32(d []float32) Mat3 {
	a := [3]float32{d[0], d[1], d[2]}
	b := [3]float32{d[3], d[4], d[5]}
	na := sqrt32(float32(float32(float32(a[0]*a[0])+float32(a[1]*a[1])) + float32(a[2]*a[2])))
	r1 := [3]float32{a[0] / na, a[1] / na, a[2] / na}
	dot := float32(float32(float32(r1[0]*b[0])+float32(r1[1]*b[1])) + float32(r1[2]*b[2]))
	r2 := [3]float32{b[0] - float32(dot*r1[0]), b[1] - float32(dot*r1[1]), b[2] - float32(dot*r1[2])}
	nb := sqrt32(float32(float32(float32(r2[0]*r2[0])+float32(r2[1]*r2[1])) + float32(r2[2]*r2[2])))
	r2 = [3]float32{r2[0] / nb, r2[1] / nb, r2[2] / nb}
	r3 := [3]float32{
		float32(r1[1]*r2[2]) - float32(r1[2]*r2[1]),
		float32(r1[2]*r2[0]) - float32(r1[0]*r2[2]),
		float32(r1[0]*r2[1]) - float32(r1[1]*r2[0]),
	}
	return Mat3{float64(r1[0]), float64(r1[1]), float64(r1[2]), float64(r2[0]), float64(r2[1]), float64(r2[2]),
		float64(r3[0]), float64(r3[1]), float64(r3[2])}
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// QuatFromMat returns the unit quaternion (x, y, z, w) of a rotation
// matrix with scipy's Rotation.from_matrix method (largest of the diagonal
// and the trace chooses the stable branch, then normalise).
func QuatFromMat(m *Mat3) [4]float64 {
	t := float64(m[0]+m[4]) + m[8]
	c, best := 0, m[0] // numpy argmax over (m00, m11, m22, trace): the first maximum wins
	if m[4] > best {
		c, best = 1, m[4]
	}
	if m[8] > best {
		c, best = 2, m[8]
	}
	if t > best {
		c = 3
	}
	// The branch for diagonal i (j, k the next two, cyclically) is
	// q[i] = 1 − t + 2·m_ii, q[j] = m_ji + m_ij, q[k] = m_ki + m_ik,
	// w = m_kj − m_jk; written out per case (no computed indices).
	var x, y, z, w float64
	switch c {
	case 0:
		x, y, z, w = float64(1-t)+float64(2*m[0]), m[3]+m[1], m[6]+m[2], m[7]-m[5]
	case 1:
		x, y, z, w = m[1]+m[3], float64(1-t)+float64(2*m[4]), m[7]+m[5], m[2]-m[6]
	case 2:
		x, y, z, w = m[2]+m[6], m[5]+m[7], float64(1-t)+float64(2*m[8]), m[3]-m[1]
	default:
		x, y, z, w = m[7]-m[5], m[2]-m[6], m[3]-m[1], 1+t
	}
	n := math.Sqrt(float64(float64(float64(x*x)+float64(y*y))+float64(z*z)) + float64(w*w))
	return [4]float64{x / n, y / n, z / n, w / n}
}

// MatFromQuat returns the rotation matrix of a unit quaternion (x, y, z,
// w) with scipy's Rotation.as_matrix formula.
func MatFromQuat(q [4]float64) Mat3 {
	x, y, z, w := q[0], q[1], q[2], q[3]
	x2, y2, z2, w2 := x*x, y*y, z*z, w*w
	xy, zw, xz, yw, yz, xw := x*y, z*w, x*z, y*w, y*z, x*w
	return Mat3{
		float64(float64(x2-y2)-z2) + w2, 2 * float64(xy-zw), 2 * float64(xz+yw),
		2 * float64(xy+zw), float64(float64(-x2+y2)-z2) + w2, 2 * float64(yz-xw),
		2 * float64(xz-yw), 2 * float64(yz+xw), float64(float64(-x2-y2)+z2) + w2,
	}
}

// QuatRoundTrip returns MatFromQuat(QuatFromMat(m)): the reference passes
// every rotation through scipy's Rotation, which re-orthonormalises it.
func QuatRoundTrip(m *Mat3) Mat3 { return MatFromQuat(QuatFromMat(m)) }

// AllFinite reports whether no value is NaN or ±Inf.
func AllFinite(v []float64) bool {
	// x − x is +0 for every finite x and NaN for ±Inf and NaN; the flags
	// are combined without branches (each one a dispatch-loop trip in a
	// wasm guest).
	var bad uint8
	for _, x := range v {
		bad |= b2u8(x-x != 0)
	}
	return bad == 0
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
