package main

import "math"

// The relative-eef composition of one action step, written with scalar
// locals. It performs exactly the floating-point operations of
// pdk.Rot6DToMat64, pdk.QuatRoundTrip, Mat3.Mul and Mat3.Apply, in the same
// order, so results are bit-identical to them (TestEEFStepMatchesHelpers);
// it exists for speed: Go keeps arrays of more than one element in memory,
// and in wasm guests every non-inlined call and every memory round trip is
// several times dearer than natively. Products are wrapped in explicit
// conversions so that no platform fuses a multiply-add.

// eefStep composes one step: rs/ts are the state rotation and translation,
// rel the un-normalised relative action (xyz, rot6d); out receives xyz and
// the first two rows of the composed rotation as float32.
func eefStep(rs *[9]float64, ts *[3]float64, rel *[9]float64, out []float32) {
	_ = out[8]
	s0, s1, s2, s3, s4, s5, s6, s7, s8 := rs[0], rs[1], rs[2], rs[3], rs[4], rs[5], rs[6], rs[7], rs[8]

	// Rot6DToMat64(rel[3:]): Gram-Schmidt.
	a0, a1, a2 := rel[3], rel[4], rel[5]
	b0, b1, b2 := rel[6], rel[7], rel[8]
	na := math.Sqrt(float64(float64(a0*a0)+float64(a1*a1)) + float64(a2*a2))
	u0, u1, u2 := a0/na, a1/na, a2/na
	dot := float64(float64(u0*b0)+float64(u1*b1)) + float64(u2*b2)
	v0, v1, v2 := b0-float64(dot*u0), b1-float64(dot*u1), b2-float64(dot*u2)
	nb := math.Sqrt(float64(float64(v0*v0)+float64(v1*v1)) + float64(v2*v2))
	v0, v1, v2 = v0/nb, v1/nb, v2/nb
	w0 := float64(u1*v2) - float64(u2*v1)
	w1 := float64(u2*v0) - float64(u0*v2)
	w2 := float64(u0*v1) - float64(u1*v0)

	// QuatRoundTrip of the relative rotation.
	r0, r1, r2, r3, r4, r5, r6, r7, r8 := quatRoundTrip(u0, u1, u2, v0, v1, v2, w0, w1, w2)

	// ra = rs·rr, then its round trip (only the first two rows are output).
	m0 := float64(float64(s0*r0)+float64(s1*r3)) + float64(s2*r6)
	m1 := float64(float64(s0*r1)+float64(s1*r4)) + float64(s2*r7)
	m2 := float64(float64(s0*r2)+float64(s1*r5)) + float64(s2*r8)
	m3 := float64(float64(s3*r0)+float64(s4*r3)) + float64(s5*r6)
	m4 := float64(float64(s3*r1)+float64(s4*r4)) + float64(s5*r7)
	m5 := float64(float64(s3*r2)+float64(s4*r5)) + float64(s5*r8)
	m6 := float64(float64(s6*r0)+float64(s7*r3)) + float64(s8*r6)
	m7 := float64(float64(s6*r1)+float64(s7*r4)) + float64(s8*r7)
	m8 := float64(float64(s6*r2)+float64(s7*r5)) + float64(s8*r8)
	c0, c1, c2, c3, c4, c5, _, _, _ := quatRoundTrip(m0, m1, m2, m3, m4, m5, m6, m7, m8)

	// ta = rs·rel[:3] + ts.
	x, y, z := rel[0], rel[1], rel[2]
	t0 := float64(float64(s0*x)+float64(s1*y)) + float64(s2*z)
	t1 := float64(float64(s3*x)+float64(s4*y)) + float64(s5*z)
	t2 := float64(float64(s6*x)+float64(s7*y)) + float64(s8*z)
	out[0], out[1], out[2] = float32(t0+ts[0]), float32(t1+ts[1]), float32(t2+ts[2])
	out[3], out[4], out[5] = float32(c0), float32(c1), float32(c2)
	out[6], out[7], out[8] = float32(c3), float32(c4), float32(c5)
}

// quatRoundTrip is pdk.MatFromQuat(pdk.QuatFromMat(m)) on a row-major
// matrix passed as scalars (scipy's from_matrix branch choice, then
// as_matrix).
func quatRoundTrip(m0, m1, m2, m3, m4, m5, m6, m7, m8 float64) (r0, r1, r2, r3, r4, r5, r6, r7, r8 float64) {
	tr := float64(m0+m4) + m8
	// numpy argmax over (m0, m4, m8, tr): the first maximum wins.
	c, best := 0, m0
	if m4 > best {
		c, best = 1, m4
	}
	if m8 > best {
		c, best = 2, m8
	}
	if tr > best {
		c = 3
	}
	var q0, q1, q2, q3 float64
	switch c {
	case 0: // i, j, k = 0, 1, 2
		q0 = float64(1-tr) + float64(2*m0)
		q1 = m3 + m1
		q2 = m6 + m2
		q3 = m7 - m5
	case 1: // i, j, k = 1, 2, 0
		q1 = float64(1-tr) + float64(2*m4)
		q2 = m7 + m5
		q0 = m1 + m3
		q3 = m2 - m6
	case 2: // i, j, k = 2, 0, 1
		q2 = float64(1-tr) + float64(2*m8)
		q0 = m2 + m6
		q1 = m5 + m7
		q3 = m3 - m1
	default:
		q0 = m7 - m5
		q1 = m2 - m6
		q2 = m3 - m1
		q3 = 1 + tr
	}
	n := math.Sqrt(float64(float64(float64(q0*q0)+float64(q1*q1))+float64(q2*q2)) + float64(q3*q3))
	x, y, z, w := q0/n, q1/n, q2/n, q3/n
	x2, y2, z2, w2 := float64(x*x), float64(y*y), float64(z*z), float64(w*w)
	xy, zw, xz, yw, yz, xw := float64(x*y), float64(z*w), float64(x*z), float64(y*w), float64(y*z), float64(x*w)
	r0 = float64(float64(x2-y2)-z2) + w2
	r1 = 2 * float64(xy-zw)
	r2 = 2 * float64(xz+yw)
	r3 = 2 * float64(xy+zw)
	r4 = float64(float64(-x2+y2)-z2) + w2
	r5 = 2 * float64(yz-xw)
	r6 = 2 * float64(xz-yw)
	r7 = 2 * float64(yz+xw)
	r8 = float64(float64(-x2-y2)+z2) + w2
	return
}
