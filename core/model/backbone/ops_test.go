package backbone

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gr00tgw/gr00tgw/core/model/internal/par"
)

func newTestPool() *par.Pool { return par.New(0) }

func TestVectorLoops(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 64, 100, 448} {
		a := make([]float32, n)
		b := make([]float32, n)
		for i := range a {
			a[i] = float32(i%7) - 3
			b[i] = float32(i%5) * 0.5
		}
		y1 := append([]float32(nil), b...)
		y2 := append([]float32(nil), b...)
		vaxpy(y1, 0.25, a)
		axpy(y2, 0.25, a)
		for i := range y1 {
			if y1[i] != y2[i] {
				t.Fatalf("n=%d vaxpy[%d] %v axpy %v", n, i, y1[i], y2[i])
			}
		}
	}
}

// TestRopeJob: the parallel rotary job equals the scalar formula, for
// heads at an offset inside wider rows.
func TestRopeJob(t *testing.T) {
	const rows, stride, off, heads, hd = 37, 40, 4, 3, 8
	x := make([]float32, rows*stride)
	cos := make([]float32, rows*hd)
	sin := make([]float32, rows*hd)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	for i := range cos {
		cos[i], sin[i] = float32(math.Cos(float64(i)*0.3)), float32(math.Sin(float64(i)*0.3))
	}
	want := append([]float32(nil), x...)
	for i := 0; i < rows; i++ {
		for h := 0; h < heads; h++ {
			q := want[i*stride+off+h*hd:][:hd]
			c, s := cos[i*hd:][:hd], sin[i*hd:][:hd]
			var o [hd]float32
			for d := 0; d < hd/2; d++ {
				o[d] = q[d]*c[d] - q[d+hd/2]*s[d]
				o[d+hd/2] = q[d+hd/2]*c[d+hd/2] + q[d]*s[d+hd/2]
			}
			copy(q, o[:])
		}
	}
	p := newTestPool()
	defer p.Close()
	var j ropeJob
	j.run(p, x, rows, stride, off, heads, hd, cos, sin)
	if !slices.Equal(x, want) {
		t.Fatal("ropeJob differs from the scalar rotation")
	}
}

func nowSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }
