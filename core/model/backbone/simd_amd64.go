//go:build amd64 && !purego

package backbone

import "golang.org/x/sys/cpu"

// useAVX2 selects the AVX2+FMA vector loops (amd64 with both features).
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func axpyAVX2(y, x *float32, n int, a float32)

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
