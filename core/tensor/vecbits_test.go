package tensor

import (
	"encoding/binary"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"
)

// vecBitsDigests are FNV-1a digests of the elementwise kernels' output bits
// (NaN canonicalised) over vecBitsInputs, computed with the AVX-512 and
// AVX2 kernels on amd64 (which agree bit for bit, TestVecKindsBitIdentical).
// TestVecBitsDigest checks every vector level of the running CPU against
// them, so the NEON kernels on arm64 are held to the same bits as amd64
// without an amd64 machine at hand. Regenerate (only when the kernels'
// numerics change on purpose) from the test's log on amd64:
//
//	go test -run TestVecBitsDigest -v ./core/tensor/
var vecBitsDigests = map[string]uint64{
	"exp":       0xf3374b8ca31e5b88,
	"silu":      0x510011d71cff0e80,
	"silumul":   0x510011d71cff0e80,
	"gelu_tanh": 0xfc52efde6e4faaea,
	"gelu_erf":  0xbf27b4d5860a2730,
	"softmax":   0x541e42953af9b1dc,
	"normstats": 0x3971386a83c285ed,
}

// vecBitsInputs is the sweep of the digests: the edge values, every
// 16411th float32 of both signs and every 4093rd in [−110, 110].
func vecBitsInputs() []float32 { return vecSweep(16411, 4093, 110) }

type bitsDigest struct{ h hash.Hash64 }

func newBitsDigest() *bitsDigest { return &bitsDigest{fnv.New64a()} }

func (d *bitsDigest) f32(v float32) {
	b := math.Float32bits(v)
	if v != v {
		b = 0x7fc00000
	}
	d.h.Write(binary.LittleEndian.AppendUint32(nil, b))
}

func (d *bitsDigest) f64(v float64) {
	d.h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
}

// vecBits returns the digests of level kind.
func vecBits(kind kernelKind) map[string]uint64 {
	out := map[string]uint64{}
	x := vecBitsInputs()
	for _, f := range vecFuncs() {
		d := newBitsDigest()
		for _, v := range f.eval(kind, f.domain(x)) {
			d.f32(v)
		}
		out[f.name] = d.h.Sum64()
	}
	// Softmax rows as in TestVecKindsBitIdentical: masked keys, narrow
	// rows (the normal-range kernels) and rows spanning the underflow range.
	// The inputs come from integers and one multiply each (arm64's compiler
	// fuses a*b + c, so a float expression could differ between the
	// architectures before any kernel runs).
	r := rand.New(rand.NewPCG(41, 42))
	// uni returns a float32 in [lo, hi) on a grid of 2⁻¹⁶.
	uni := func(lo, hi int32) float32 {
		return float32(lo<<16+int32(r.Uint32N(uint32(hi-lo)<<16))) * 0x1p-16
	}
	d := newBitsDigest()
	for ri, n := range []int{16, 32, 48, 160, 480, 4096, 16, 448, 4096, 448, 4096} {
		row := make([]float32, n)
		for i := range row {
			switch {
			case ri < 6:
				row[i] = uni(-18, 18)
				if i%7 == 3 {
					row[i] = float32(math.Inf(-1))
				}
			case ri < 9:
				row[i] = uni(-30, 30)
			default:
				row[i] = uni(-120, 10)
			}
		}
		d.f32(softmaxRow(kind, row))
		for _, v := range row {
			d.f32(v)
		}
	}
	out["softmax"] = d.h.Sum64()
	// The float64 norm statistics (lengths a multiple of 16: the scalar
	// tail is compiled differently per architecture).
	d = newBitsDigest()
	for _, n := range []int{16, 64, 1152, 2048} {
		row := make([]float32, n)
		for i := range row {
			row[i] = uni(-3, 4)
		}
		mu := sumF64AVX2(&row[0], n)
		d.f64(mu)
		d.f64(sqDevF64AVX2(&row[0], n, mu/float64(n)))
		d.f64(sqDevF64AVX2(&row[0], n, 0))
	}
	out["normstats"] = d.h.Sum64()
	return out
}

// TestVecBitsDigest checks that every vector level of this CPU returns the
// amd64 kernels' bits (see vecBitsDigests).
func TestVecBitsDigest(t *testing.T) {
	if !normSIMD {
		t.Skip("no SIMD elementwise kernels in this build")
	}
	for _, kind := range vecKinds() {
		if kind == 0 {
			continue
		}
		got := vecBits(kind)
		for _, f := range []string{"exp", "silu", "silumul", "gelu_tanh", "gelu_erf", "softmax", "normstats"} {
			t.Logf("%s %s: %#016x", kindName(kind), f, got[f])
			if got[f] != vecBitsDigests[f] {
				t.Errorf("%s %s: digest %#016x, amd64's %#016x: the kernel's bits differ from AVX2/AVX-512", kindName(kind), f, got[f], vecBitsDigests[f])
			}
		}
	}
}
