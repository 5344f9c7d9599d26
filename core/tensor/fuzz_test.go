package tensor

import (
	"math/rand/v2"
	"testing"
)

// FuzzMatMulShapes compares every SIMD variant with Portable on fuzzed
// shapes, activations and bf16-ness of the weights:
//
//	go test -run='^$' -fuzz=FuzzMatMulShapes -fuzztime=30s ./core/tensor/
func FuzzMatMulShapes(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint16(1), uint8(0), uint64(1))
	f.Add(uint8(41), uint8(130), uint16(515), uint8(5), uint64(2))
	f.Add(uint8(7), uint8(64), uint16(256), uint8(2), uint64(3))
	f.Add(uint8(200), uint8(17), uint16(3), uint8(7), uint64(4))
	f.Fuzz(func(t *testing.T, m8, n8 uint8, k16 uint16, flags uint8, seed uint64) {
		m, n, k := int(m8)%97+1, int(n8)+1, int(k16)%600+1
		act := Activation(flags % 4)
		r := rand.New(rand.NewPCG(seed, 7))
		x := randSlice(r, m*k)
		w := randSlice(r, n*k)
		if flags&4 != 0 {
			roundBF16(w)
		}
		var bias []float32
		if flags&8 != 0 {
			bias = randSlice(r, n)
		}
		ref := Portable()
		pre := make([]float32, m*n)
		ref.MatMul(pre, x, m, ref.PackLinear(w, n, k), bias)
		for _, v := range Variants() {
			pw := v.Kernels.PackLinear(w, n, k)
			got := make([]float32, m*n)
			v.Kernels.MatMul(got, x, m, pw, bias)
			checkDiff(t, v.Name, got, pre, x, w, m, n, k)
			// Fused and unfused activation agree bit for bit.
			Activate(act, got)
			fused := make([]float32, m*n)
			MatMulAct(v.Kernels, fused, x, m, pw, bias, act)
			for i := range got {
				if got[i] != fused[i] && !(got[i] != got[i] && fused[i] != fused[i]) {
					t.Fatalf("%s %s: fused y[%d] = %g, unfused %g", v.Name, act, i, fused[i], got[i])
				}
			}
		}
	})
}
