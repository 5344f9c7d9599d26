package tensor

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// job is one parallel operation split into numbered parts. run(p, worker)
// must be safe to call concurrently for distinct p; worker is in
// [0, team.threads()) and is distinct among the goroutines running one job
// at a time, so a job may index per-worker scratch with it.
type job interface {
	run(part, worker int)
}

// team is a fixed set of long-lived worker goroutines that execute the parts
// of a job together with the calling goroutine. Parts are handed out through
// an atomic counter, so a fast worker takes more of them; no goroutine is
// started and nothing is allocated per call.
type team struct {
	workers int // helper goroutines, not counting the caller
	wake    chan *batch
	batches sync.Pool
}

// batch is the shared state of one parallelFor call. It is pooled.
type batch struct {
	j     job
	parts int64
	next  atomic.Int64
	wg    sync.WaitGroup
}

func (b *batch) drain(worker int) {
	for {
		p := b.next.Add(1) - 1
		if p >= b.parts {
			return
		}
		b.j.run(int(p), worker)
	}
}

var (
	defaultTeamOnce sync.Once
	defaultTeamVal  *team
)

// defaultTeam returns the process-wide worker team sized to GOMAXPROCS at
// first use.
func defaultTeam() *team {
	defaultTeamOnce.Do(func() {
		defaultTeamVal = newTeam(runtime.GOMAXPROCS(0))
	})
	return defaultTeamVal
}

// newTeam starts threads-1 helper goroutines (the caller is the last thread).
func newTeam(threads int) *team {
	if threads < 1 {
		threads = 1
	}
	t := &team{workers: threads - 1, wake: make(chan *batch, 4*threads)}
	t.batches.New = func() any { return new(batch) }
	for i := 0; i < t.workers; i++ {
		go t.loop(i + 1)
	}
	return t
}

func (t *team) loop(worker int) {
	for b := range t.wake {
		b.drain(worker)
		b.wg.Done()
	}
}

// threads is the number of goroutines that work on one job.
func (t *team) threads() int { return t.workers + 1 }

// parallelFor runs j.run(p, worker) for every p in [0, parts) on the team
// and the calling goroutine (worker 0), and returns when all parts are done.
// j.run must not call parallelFor itself: a helper would wait on a batch
// that only it could pick up.
func (t *team) parallelFor(j job, parts int) {
	if parts <= 0 {
		return
	}
	if parts == 1 || t.workers == 0 {
		for p := 0; p < parts; p++ {
			j.run(p, 0)
		}
		return
	}
	b := t.batches.Get().(*batch)
	b.j = j
	b.parts = int64(parts)
	b.next.Store(0)
	helpers := min(t.workers, parts-1)
	b.wg.Add(helpers)
	for i := 0; i < helpers; i++ {
		t.wake <- b
	}
	b.drain(0)
	b.wg.Wait()
	b.j = nil
	t.batches.Put(b)
}
