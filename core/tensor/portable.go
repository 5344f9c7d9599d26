package tensor

import (
	"fmt"
	"sync"
)

// Portable returns the pure-Go Kernels implementation: cache-blocked, run on
// every core through a fixed worker pool, no assembly. It is the reference
// every SIMD implementation is tested against and the fallback on CPUs
// without AVX2/AVX-512. The returned value is shared and safe for concurrent
// use.
func Portable() Kernels { return portableKernels{} }

type portableKernels struct{}

var _ Kernels = portableKernels{}

// portablePacked keeps the weight in nn.Linear layout [n, k], row-major, so
// that every output element is a contiguous dot product.
type portablePacked struct {
	n, k int
	w    []float32
}

func (p *portablePacked) N() int { return p.n }
func (p *portablePacked) K() int { return p.k }

// PackLinear copies w ([n, k], nn.Linear layout). It panics if len(w) < n*k:
// packing happens at load time, where a short slice is a programmer error.
func (portableKernels) PackLinear(w []float32, n, k int) Packed {
	checkPack("PackLinear", len(w), n, k)
	c := make([]float32, n*k)
	copy(c, w[:n*k])
	return &portablePacked{n: n, k: k, w: c}
}

// PackKN transposes w ([k, n]) into [n, k]. It panics if len(w) < k*n.
func (portableKernels) PackKN(w []float32, k, n int) Packed {
	checkPack("PackKN", len(w), n, k)
	c := make([]float32, n*k)
	for kk := 0; kk < k; kk++ {
		row := w[kk*n : kk*n+n]
		for j, v := range row {
			c[j*k+kk] = v
		}
	}
	return &portablePacked{n: n, k: k, w: c}
}

func checkPack(op string, have, n, k int) {
	if n <= 0 || k <= 0 {
		panic(fmt.Sprintf("tensor: %s: shape [%d, %d] must be positive", op, n, k))
	}
	if have < n*k {
		panic(fmt.Sprintf("tensor: %s: shape [%d, %d] needs %d floats, have %d", op, n, k, n*k, have))
	}
}

// checkMatMul validates MatMul arguments. Shape mismatches are programmer
// errors (the graph is built from a checked plan), so they panic with the
// failing dimension named.
func checkMatMul(y, x []float32, m, n, k int, bias []float32) {
	if m < 0 {
		panic(fmt.Sprintf("tensor: MatMul: m=%d is negative", m))
	}
	if len(x) < m*k {
		panic(fmt.Sprintf("tensor: MatMul: x has %d floats, [m=%d, k=%d] needs %d", len(x), m, k, m*k))
	}
	if len(y) < m*n {
		panic(fmt.Sprintf("tensor: MatMul: y has %d floats, [m=%d, n=%d] needs %d", len(y), m, n, m*n))
	}
	if bias != nil && len(bias) < n {
		panic(fmt.Sprintf("tensor: MatMul: bias has %d floats, n=%d", len(bias), n))
	}
}

// Portable blocking. A task is an (mBlock × nBlock) tile of y; inside it k is
// walked in kBlock chunks so that the W panel (nBlock × kBlock floats) and
// the x panel stay in L2 while the 4×4 register tiles sweep over them.
const (
	pMB = 64
	pNB = 64
	pKB = 512
)

type portableJob struct {
	act        Activation
	y, x, bias []float32
	w          *portablePacked
	m          int
	tilesN     int
}

var portableJobs = sync.Pool{New: func() any { return new(portableJob) }}

// MatMul computes y[m, n] = x[m, k]·Wᵀ + bias. It panics if w was not packed
// by Portable or if a slice is too short for the shapes.
func (p portableKernels) MatMul(y, x []float32, m int, w Packed, bias []float32) {
	p.MatMulAct(y, x, m, w, bias, ActNone)
}

// MatMulAct is MatMul followed by act, applied per output tile.
func (portableKernels) MatMulAct(y, x []float32, m int, w Packed, bias []float32, act Activation) {
	pw, ok := w.(*portablePacked)
	if !ok {
		panic(fmt.Sprintf("tensor: MatMul: weight packed by %s, not usable by portable", packedBy(w)))
	}
	checkMatMul(y, x, m, pw.n, pw.k, bias)
	if m == 0 {
		return
	}
	j := portableJobs.Get().(*portableJob)
	*j = portableJob{act: act, y: y, x: x, bias: bias, w: pw, m: m, tilesN: (pw.n + pNB - 1) / pNB}
	tilesM := (m + pMB - 1) / pMB
	defaultTeam().parallelFor(j, tilesM*j.tilesN)
	*j = portableJob{}
	portableJobs.Put(j)
}

func (j *portableJob) run(part, worker int) {
	n, k := j.w.n, j.w.k
	i0 := (part / j.tilesN) * pMB
	j0 := (part % j.tilesN) * pNB
	i1 := min(i0+pMB, j.m)
	j1 := min(j0+pNB, n)
	y, x, w := j.y, j.x, j.w.w

	// Initialise the tile with the bias (or zero), then accumulate.
	for i := i0; i < i1; i++ {
		row := y[i*n+j0 : i*n+j1]
		if j.bias != nil {
			copy(row, j.bias[j0:j1])
		} else {
			clear(row)
		}
	}
	for k0 := 0; k0 < k; k0 += pKB {
		k1 := min(k0+pKB, k)
		i := i0
		for ; i+4 <= i1; i += 4 {
			jj := j0
			for ; jj+4 <= j1; jj += 4 {
				tile4x4(y, x, w, i, jj, n, k, k0, k1)
			}
			for ; jj < j1; jj++ {
				for r := i; r < i+4; r++ {
					y[r*n+jj] += dot(x[r*k+k0:r*k+k1], w[jj*k+k0:jj*k+k1])
				}
			}
		}
		for ; i < i1; i++ {
			xr := x[i*k+k0 : i*k+k1]
			jj := j0
			for ; jj+4 <= j1; jj += 4 {
				tile1x4(y[i*n+jj:i*n+jj+4], xr, w, jj, k, k0, k1)
			}
			for ; jj < j1; jj++ {
				y[i*n+jj] += dot(xr, w[jj*k+k0:jj*k+k1])
			}
		}
	}
	if j.act != ActNone {
		for i := i0; i < i1; i++ {
			Activate(j.act, y[i*n+j0:i*n+j1])
		}
	}
}

// tile4x4 adds x[i:i+4, k0:k1]·W[j:j+4, k0:k1]ᵀ to y[i:i+4, j:j+4].
func tile4x4(y, x, w []float32, i, j, n, k, k0, k1 int) {
	l := k1 - k0
	x0 := x[i*k+k0 : i*k+k1][:l]
	x1 := x[(i+1)*k+k0 : (i+1)*k+k1][:l]
	x2 := x[(i+2)*k+k0 : (i+2)*k+k1][:l]
	x3 := x[(i+3)*k+k0 : (i+3)*k+k1][:l]
	w0 := w[j*k+k0 : j*k+k1][:l]
	w1 := w[(j+1)*k+k0 : (j+1)*k+k1][:l]
	w2 := w[(j+2)*k+k0 : (j+2)*k+k1][:l]
	w3 := w[(j+3)*k+k0 : (j+3)*k+k1][:l]
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	for p := 0; p < l; p++ {
		a0, a1, a2, a3 := x0[p], x1[p], x2[p], x3[p]
		b0, b1, b2, b3 := w0[p], w1[p], w2[p], w3[p]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	r := y[i*n+j : i*n+j+4]
	r[0] += c00
	r[1] += c01
	r[2] += c02
	r[3] += c03
	r = y[(i+1)*n+j : (i+1)*n+j+4]
	r[0] += c10
	r[1] += c11
	r[2] += c12
	r[3] += c13
	r = y[(i+2)*n+j : (i+2)*n+j+4]
	r[0] += c20
	r[1] += c21
	r[2] += c22
	r[3] += c23
	r = y[(i+3)*n+j : (i+3)*n+j+4]
	r[0] += c30
	r[1] += c31
	r[2] += c32
	r[3] += c33
}

// tile1x4 adds xr·W[j:j+4, k0:k1]ᵀ to yr[0:4].
func tile1x4(yr, xr, w []float32, j, k, k0, k1 int) {
	l := len(xr)
	w0 := w[j*k+k0 : j*k+k1][:l]
	w1 := w[(j+1)*k+k0 : (j+1)*k+k1][:l]
	w2 := w[(j+2)*k+k0 : (j+2)*k+k1][:l]
	w3 := w[(j+3)*k+k0 : (j+3)*k+k1][:l]
	var c0, c1, c2, c3 float32
	for p, a := range xr {
		c0 += a * w0[p]
		c1 += a * w1[p]
		c2 += a * w2[p]
		c3 += a * w3[p]
	}
	yr[0] += c0
	yr[1] += c1
	yr[2] += c2
	yr[3] += c3
}

// dot returns Σ a[p]·b[p] over len(a) elements.
func dot(a, b []float32) float32 {
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
