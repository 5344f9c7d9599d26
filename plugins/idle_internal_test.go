package plugins

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitIdle is acquire's waiting path on the stack alone.
func waitIdle(ctx context.Context, s *idleStack) *instance {
	inst, waiting := s.get(true)
	if !waiting {
		return inst
	}
	select {
	case inst := <-s.wake:
		return inst
	case <-ctx.Done():
		s.cancelWait()
		return nil
	}
}

// TestIdleStackHammer: goroutines take and return n instances, some
// giving up while waiting; no instance is ever held twice, none is lost,
// and the most recently returned one is taken first.
func TestIdleStackHammer(t *testing.T) {
	const n, workers, rounds = 2, 16, 1500
	var s idleStack
	s.init(n)
	insts := make([]*instance, n)
	held := make([]atomic.Int32, n)
	index := map[*instance]int{}
	for i := range insts {
		insts[i] = &instance{}
		index[insts[i]] = i
		s.put(insts[i])
	}
	var gaveUp atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(30))*time.Microsecond)
				inst := waitIdle(ctx, &s)
				cancel()
				if inst == nil {
					gaveUp.Add(1)
					continue
				}
				i := index[inst]
				if held[i].Add(1) != 1 {
					t.Errorf("instance %d held twice", i)
				}
				time.Sleep(time.Duration(rng.IntN(20)) * time.Microsecond)
				held[i].Add(-1)
				s.put(inst)
			}
		}()
	}
	wg.Wait()
	assert.Positive(t, gaveUp.Load(), "some waits must time out for the test to cover cancelWait")
	s.mu.Lock()
	assert.Equal(t, 0, s.waiters)
	assert.Len(t, s.stack, n, "every instance is back")
	s.mu.Unlock()
	assert.Empty(t, s.wake)

	// LIFO: the last one returned is the first one taken.
	a := s.tryGet()
	b := s.tryGet()
	s.put(b)
	s.put(a)
	require.Same(t, a, s.tryGet())
}

// TestIdleStackCancelAfterHandOff: a waiter that gives up after a release
// already handed it an instance puts that instance back (it is neither
// lost in wake nor counted twice); one that gives up before any release
// just leaves.
func TestIdleStackCancelAfterHandOff(t *testing.T) {
	var s idleStack
	s.init(2)
	inst := &instance{}

	_, waiting := s.get(true)
	require.True(t, waiting)
	s.put(inst) // counts on the waiter: hand-off into wake
	s.cancelWait()
	assert.Empty(t, s.wake)
	assert.Equal(t, 0, s.waiters)
	require.Same(t, inst, s.tryGet())

	_, waiting = s.get(true)
	require.True(t, waiting)
	s.cancelWait()
	s.put(inst)
	assert.Empty(t, s.wake)
	assert.Equal(t, 0, s.waiters)
	require.Same(t, inst, s.tryGet())
}
