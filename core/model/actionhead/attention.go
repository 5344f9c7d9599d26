package actionhead

import "math"

// attnScratch is one worker's scratch for attnJob: the head's keys
// gathered contiguously [nk, hd], its values transposed [hd, nk], and the
// softmax rows of a block of 4 queries [4, nk].
type attnScratch struct {
	kh, vt, s []float32
}

func newAttnScratch(threads, nkMax, hd int) []attnScratch {
	s := make([]attnScratch, threads)
	for i := range s {
		s[i] = attnScratch{
			kh: make([]float32, nkMax*hd),
			vt: make([]float32, hd*nkMax),
			s:  make([]float32, 4*nkMax),
		}
	}
	return s
}

// attnJob is multi-head scaled-dot-product attention without a mask:
// out[i, h] = softmax(q[i,h]·k[:,h]ᵀ/√hd) · v[:,h] for nq queries and nk
// keys. q, k, v and out are row-major with row stride heads·hd. Each part
// is one head × a block of up to attnQueryBlock queries: it gathers the
// head's K and Vᵀ contiguously, then handles queries 4 at a time so that
// each key/value element loaded serves 4 dot products. Softmax subtracts the
// row maximum and accumulates exp in float64.
type attnJob struct {
	b            batch
	out, q, k, v []float32
	nq, nk       int
	heads, hd    int
	scale        float32
	scratch      []attnScratch
	qBlocks      int
}

const attnQueryBlock = 128

func (j *attnJob) apply(t *team, out, q, k, v []float32, nq, nk, heads, hd int, scratch []attnScratch) {
	j.out, j.q, j.k, j.v, j.nq, j.nk, j.heads, j.hd = out, q, k, v, nq, nk, heads, hd
	j.scale = float32(1 / math.Sqrt(float64(hd)))
	j.scratch = scratch
	j.qBlocks = (nq + attnQueryBlock - 1) / attnQueryBlock
	t.parallelFor(j, &j.b, heads*j.qBlocks)
	j.out, j.q, j.k, j.v, j.scratch = nil, nil, nil, nil, nil
}

func (j *attnJob) run(part, slot int) {
	h := part / j.qBlocks
	i0 := (part % j.qBlocks) * attnQueryBlock
	i1 := min(i0+attnQueryBlock, j.nq)
	nk, hd, ld, off := j.nk, j.hd, j.heads*j.hd, h*j.hd
	sc := &j.scratch[slot]
	kh, vt := sc.kh[:nk*hd], sc.vt[:hd*nk]
	for t := 0; t < nk; t++ {
		copy(kh[t*hd:(t+1)*hd], j.k[t*ld+off:t*ld+off+hd])
		vr := j.v[t*ld+off : t*ld+off+hd]
		for p, x := range vr {
			vt[p*nk+t] = x
		}
	}
	i := i0
	for ; i+4 <= i1; i += 4 {
		s0, s1, s2, s3 := sc.s[:nk], sc.s[nk:2*nk], sc.s[2*nk:3*nk], sc.s[3*nk:4*nk]
		q0 := j.q[i*ld+off : i*ld+off+hd]
		q1 := j.q[(i+1)*ld+off : (i+1)*ld+off+hd]
		q2 := j.q[(i+2)*ld+off : (i+2)*ld+off+hd]
		q3 := j.q[(i+3)*ld+off : (i+3)*ld+off+hd]
		for t := 0; t < nk; t++ {
			s0[t], s1[t], s2[t], s3[t] = dot4(q0, q1, q2, q3, kh[t*hd:(t+1)*hd])
		}
		softmaxRow(s0, j.scale)
		softmaxRow(s1, j.scale)
		softmaxRow(s2, j.scale)
		softmaxRow(s3, j.scale)
		o0 := j.out[i*ld+off : i*ld+off+hd]
		o1 := j.out[(i+1)*ld+off : (i+1)*ld+off+hd]
		o2 := j.out[(i+2)*ld+off : (i+2)*ld+off+hd]
		o3 := j.out[(i+3)*ld+off : (i+3)*ld+off+hd]
		for p := 0; p < hd; p++ {
			o0[p], o1[p], o2[p], o3[p] = dot4(s0, s1, s2, s3, vt[p*nk:(p+1)*nk])
		}
	}
	for ; i < i1; i++ {
		s0 := sc.s[:nk]
		qi := j.q[i*ld+off : i*ld+off+hd]
		for t := 0; t < nk; t++ {
			s0[t] = dot1(qi, kh[t*hd:(t+1)*hd])
		}
		softmaxRow(s0, j.scale)
		oi := j.out[i*ld+off : i*ld+off+hd]
		for p := 0; p < hd; p++ {
			oi[p] = dot1(s0, vt[p*nk:(p+1)*nk])
		}
	}
}

// softmaxRow replaces s with softmax(s·scale): the row maximum is
// subtracted, exp is expf32 and the sum is accumulated in float64.
func softmaxRow(s []float32, scale float32) {
	mx := float32(math.Inf(-1))
	for t, v := range s {
		v *= scale
		s[t] = v
		if v > mx {
			mx = v
		}
	}
	var sum float64
	for t, v := range s {
		e := expf32(v - mx)
		s[t] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for t := range s {
		s[t] *= inv
	}
}

// expf32 is a float32 exp for x ≤ 0 (softmax arguments) with Cephes' expf
// polynomial: about 1 ulp, several times faster than float64 math.Exp.
// Arguments below −87.3 (beyond the smallest normal result) give 0; NaN
// gives NaN.
func expf32(x float32) float32 {
	if x < -87.3 {
		return 0
	}
	if x != x || x > 88 {
		return float32(math.Exp(float64(x)))
	}
	t := x*1.44269504088896341 + 0.5
	i := int32(t) // |t| < 130: no overflow; truncation, then floor
	if float32(i) > t {
		i--
	}
	n := float32(i)
	r := x - n*0.693359375
	r = r - n*-2.12194440e-4
	z := r * r
	y := float32(1.9875691500e-4)
	y = y*r + 1.3981999507e-3
	y = y*r + 8.3334519073e-3
	y = y*r + 4.1665795894e-2
	y = y*r + 1.6666665459e-1
	y = y*r + 5.0000001201e-1
	y = y*z + r + 1
	e := i + 127
	if e <= 0 { // result below the smallest normal: scale in two steps
		return y * math.Float32frombits(uint32(e+64)<<23) * 0x1p-64
	}
	return y * math.Float32frombits(uint32(e)<<23)
}

func dot1(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	p := 0
	for ; p+4 <= len(a); p += 4 {
		s0 += a[p] * b[p]
		s1 += a[p+1] * b[p+1]
		s2 += a[p+2] * b[p+2]
		s3 += a[p+3] * b[p+3]
	}
	for ; p < len(a); p++ {
		s0 += a[p] * b[p]
	}
	return (s0 + s1) + (s2 + s3)
}
