//go:build !amd64

package backbone

// useAVX2 is false off amd64: every kernel runs its pure-Go loop.
var useAVX2 = false

func vaxpy(y []float32, a float32, x []float32) { axpy(y, a, x) }
