package emu

import (
	"sync"
	"sync/atomic"

	"github.com/gr00tgw/gr00tgw/kernels/schedule"
)

// pool runs a function for every emulated compute core on a fixed set of
// goroutines (the caller plus workers−1 helpers), so that a steady-state
// op allocates nothing: the function value is created once by its owner
// and only published here for the duration of one run. Cores are handed
// out by an atomic counter; which goroutine runs a core does not change
// any result (cores write disjoint outputs). A pool is used by one caller
// at a time.
type pool struct {
	helpers int
	f       func(core int)
	next    atomic.Int64
	wg      sync.WaitGroup
	wake    chan struct{}
	quit    chan struct{}
	once    sync.Once
}

// newPool starts workers−1 helper goroutines (none when workers ≤ 1).
// They live until close.
func newPool(workers int) *pool {
	p := &pool{helpers: max(workers, 1) - 1}
	if p.helpers > 0 {
		p.wake = make(chan struct{})
		p.quit = make(chan struct{})
		for range p.helpers {
			go p.loop()
		}
	}
	return p
}

// run calls f(core) for every compute core and returns when all are done
// (the op's barrier).
func (p *pool) run(f func(core int)) {
	if p.helpers == 0 {
		for c := 0; c < schedule.Cores; c++ {
			f(c)
		}
		return
	}
	p.f = f
	p.next.Store(0)
	p.wg.Add(p.helpers)
	for range p.helpers {
		p.wake <- struct{}{}
	}
	p.drain(f)
	p.wg.Wait()
	p.f = nil
}

func (p *pool) drain(f func(int)) {
	for {
		c := int(p.next.Add(1) - 1)
		if c >= schedule.Cores {
			return
		}
		f(c)
	}
}

func (p *pool) loop() {
	for {
		select {
		case <-p.wake:
			p.drain(p.f)
			p.wg.Done()
		case <-p.quit:
			return
		}
	}
}

// close stops the helpers; the pool must be idle. Idempotent.
func (p *pool) close() {
	p.once.Do(func() {
		if p.quit != nil {
			close(p.quit)
		}
	})
}
