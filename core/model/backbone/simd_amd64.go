package backbone

import "golang.org/x/sys/cpu"

// useAVX2 selects the AVX2+FMA vector loops (amd64 with both features).
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotAVX2(x, y *float32, n int) float32

//go:noescape
func axpyAVX2(y, x *float32, n int, a float32)

// vdot returns Σ a[i]·b[i] (len(a) elements).
func vdot(a, b []float32) float32 {
	n := len(a)
	if !useAVX2 || n < 8 {
		return dot(a, b)
	}
	b = b[:n]
	m := n &^ 7
	s := dotAVX2(&a[0], &b[0], m)
	for i := m; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// vaxpy computes y += a·x (len(y) elements).
func vaxpy(y []float32, a float32, x []float32) {
	n := len(y)
	if !useAVX2 || n < 8 {
		axpy(y, a, x)
		return
	}
	x = x[:n]
	m := n &^ 7
	axpyAVX2(&y[0], &x[0], m, a)
	for i := m; i < n; i++ {
		y[i] += a * x[i]
	}
}
