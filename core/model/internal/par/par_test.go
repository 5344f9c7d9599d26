package par

import (
	"sync/atomic"
	"testing"
)

type countJob struct {
	hits    []atomic.Int32
	workers []atomic.Int32
}

func (c *countJob) Run(part, worker int) {
	c.hits[part].Add(1)
	c.workers[worker].Add(1)
}

func TestForRunsEveryPartOnce(t *testing.T) {
	p := New(3)
	defer p.Close()
	for _, n := range []int{0, 1, 2, 7, 1000} {
		j := &countJob{hits: make([]atomic.Int32, n), workers: make([]atomic.Int32, p.Threads())}
		p.For(j, n)
		for i := range j.hits {
			if got := j.hits[i].Load(); got != 1 {
				t.Fatalf("n=%d part %d ran %d times", n, i, got)
			}
		}
	}
	p.Close()
	j := &countJob{hits: make([]atomic.Int32, 5), workers: make([]atomic.Int32, 3)}
	p.For(j, 5) // after Close: caller only
	if j.workers[0].Load() != 5 {
		t.Fatalf("after Close, caller ran %d of 5", j.workers[0].Load())
	}
}

func TestForAllocs(t *testing.T) {
	p := New(2)
	defer p.Close()
	j := &countJob{hits: make([]atomic.Int32, 64), workers: make([]atomic.Int32, 2)}
	if a := testing.AllocsPerRun(100, func() { p.For(j, 64) }); a != 0 {
		t.Fatalf("For allocates %v per call", a)
	}
}
