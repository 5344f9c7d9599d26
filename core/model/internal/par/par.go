// Package par is a tiny fixed worker pool for the model's non-GEMM kernels
// (attention, norms, activations): long-lived goroutines pull numbered parts
// of a job from an atomic counter together with the caller. A For call
// allocates nothing, so warm forward passes stay allocation-free.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Job is one parallel operation split into numbered parts. Run is called
// once for every part in [0, parts), concurrently for distinct parts; worker
// is in [0, Pool.Threads()) and identifies the goroutine, so a job can index
// per-worker scratch buffers with it.
type Job interface {
	Run(part, worker int)
}

// Pool runs jobs on a fixed set of goroutines plus the caller. For must not
// be called concurrently on one Pool (the model graph is sequential); Close
// stops the goroutines.
type Pool struct {
	threads int
	wake    []chan struct{}
	done    sync.WaitGroup
	job     Job
	parts   int64
	next    atomic.Int64
	closed  atomic.Bool
}

// New starts a pool of threads goroutines in total (the caller counts as
// one); threads <= 0 means GOMAXPROCS.
func New(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1)}
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		go p.loop(i+1, p.wake[i])
	}
	return p
}

// Threads is the number of goroutines a job runs on.
func (p *Pool) Threads() int { return p.threads }

func (p *Pool) loop(worker int, wake chan struct{}) {
	for range wake {
		p.drain(worker)
		p.done.Done()
	}
}

func (p *Pool) drain(worker int) {
	for {
		i := p.next.Add(1) - 1
		if i >= p.parts {
			return
		}
		p.job.Run(int(i), worker)
	}
}

// For runs j.Run(part, worker) for every part in [0, parts) and returns when
// all are done.
func (p *Pool) For(j Job, parts int) {
	if parts <= 0 {
		return
	}
	helpers := min(p.threads-1, parts-1)
	if helpers <= 0 || p.closed.Load() {
		for i := 0; i < parts; i++ {
			j.Run(i, 0)
		}
		return
	}
	p.job = j
	p.parts = int64(parts)
	p.next.Store(0)
	p.done.Add(helpers)
	for i := 0; i < helpers; i++ {
		p.wake[i] <- struct{}{}
	}
	p.drain(0)
	p.done.Wait()
	p.job = nil
}

// Close stops the helper goroutines; later For calls run on the caller
// alone. It is safe to call more than once.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	for _, w := range p.wake {
		close(w)
	}
}
