package actionhead

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// This file holds the small fp32 kernels of the action head that are not
// GEMMs (LayerNorm, activations, attention) and the worker team that runs
// them on every core. They are deliberately plain so that faster versions
// can replace them one at a time; each is checked against the goldens.

// job is one parallel operation split into numbered parts. run is called
// concurrently for distinct parts; slot identifies the calling worker
// (0 ≤ slot < team.threads()) so that a job can index per-worker scratch.
type job interface {
	run(part, slot int)
}

// team is a fixed set of long-lived goroutines that execute the parts of a
// job together with the caller. Nothing is allocated per call: the caller
// owns the batch (one per job value, which a plan owns).
type team struct {
	workers int
	wake    chan *batch
}

// batch is the shared state of one parallelFor call; it must not be reused
// until that call returns.
type batch struct {
	j     job
	parts int64
	next  atomic.Int64
	slots atomic.Int64
	wg    sync.WaitGroup
}

func (b *batch) drain() {
	slot := int(b.slots.Add(1) - 1)
	for {
		p := b.next.Add(1) - 1
		if p >= b.parts {
			return
		}
		b.j.run(int(p), slot)
	}
}

var (
	teamOnce sync.Once
	teamVal  *team
)

// sharedTeam returns the package's worker team, sized to GOMAXPROCS at first
// use. It lives for the life of the process.
func sharedTeam() *team {
	teamOnce.Do(func() {
		n := max(runtime.GOMAXPROCS(0), 1)
		teamVal = &team{workers: n - 1, wake: make(chan *batch, 4*n)}
		for i := 0; i < teamVal.workers; i++ {
			go func() {
				for b := range teamVal.wake {
					b.drain()
					b.wg.Done()
				}
			}()
		}
	})
	return teamVal
}

// threads is the most workers that call one job concurrently.
func (t *team) threads() int { return t.workers + 1 }

// parallelFor runs j.run(p, slot) for p in [0, parts) and returns when all
// parts are done. b is caller-owned scratch.
func (t *team) parallelFor(j job, b *batch, parts int) {
	if parts <= 0 {
		return
	}
	if parts == 1 || t.workers == 0 {
		for p := 0; p < parts; p++ {
			j.run(p, 0)
		}
		return
	}
	b.j = j
	b.parts = int64(parts)
	b.next.Store(0)
	b.slots.Store(0)
	helpers := min(t.workers, parts-1)
	b.wg.Add(helpers)
	for i := 0; i < helpers; i++ {
		t.wake <- b
	}
	b.drain()
	b.wg.Wait()
	b.j = nil
}

// layerNorm normalises each of the rows of x (width d) into y over the row:
// (x − mean)/sqrt(var + eps), biased variance, statistics accumulated in
// float64. gamma/beta may be nil (non-affine). y may alias x.
func layerNorm(y, x []float32, rows, d int, gamma, beta []float32, eps float64) {
	for r := 0; r < rows; r++ {
		xr := x[r*d : r*d+d]
		yr := y[r*d : r*d+d]
		var s float64
		for _, v := range xr {
			s += float64(v)
		}
		mean := s / float64(d)
		var q float64
		for _, v := range xr {
			dv := float64(v) - mean
			q += dv * dv
		}
		inv := 1 / math.Sqrt(q/float64(d)+eps)
		m32, i32 := float32(mean), float32(inv)
		switch {
		case gamma != nil && beta != nil:
			for i, v := range xr {
				yr[i] = (v-m32)*i32*gamma[i] + beta[i]
			}
		case gamma != nil:
			for i, v := range xr {
				yr[i] = (v - m32) * i32 * gamma[i]
			}
		default:
			for i, v := range xr {
				yr[i] = (v - m32) * i32
			}
		}
	}
}

// modulate applies y = y·(1 + scale) + shift to each row (AdaLN).
func modulate(y []float32, rows, d int, scale, shift []float32) {
	for r := 0; r < rows; r++ {
		yr := y[r*d : r*d+d]
		for i := range yr {
			yr[i] = yr[i]*(1+scale[i]) + shift[i]
		}
	}
}

func silu(x float32) float32 {
	return float32(float64(x) / (1 + math.Exp(-float64(x))))
}

// siluInto writes silu(x) into y.
func siluInto(y, x []float32) {
	for i, v := range x {
		y[i] = silu(v)
	}
}

func reluInPlace(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

func addInPlace(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
