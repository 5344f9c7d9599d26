//go:build !amd64 || purego

package backbone

// useAVX2 is false off amd64 and with -tags purego: every kernel runs its
// pure-Go loop.
var useAVX2 = false

func vaxpy(y []float32, a float32, x []float32) { axpy(y, a, x) }
