// Package freelist is a bounded, mutex-guarded stack of reusable values.
//
// Unlike sync.Pool it is shared by every P and survives GC cycles, so a
// large buffer released by one goroutine is found by the next request on
// any core: the request path then never allocates (and page-faults) fresh
// frame or pixel_values memory in steady state — on a VM, faulting in an
// 11 MB buffer costs milliseconds. The most recently released value is
// handed out first (warm in cache). Safe for concurrent use; the zero
// value holds nothing and keeps nothing (set Max).
package freelist

import "sync"

// List keeps up to Max idle values.
type List[T any] struct {
	// Max is the number of idle values kept; Put drops the rest.
	Max  int
	mu   sync.Mutex
	free []T
}

// Get returns an idle value and true, or the zero T and false when none
// is idle (the caller then makes one).
func (l *List[T]) Get() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		var zero T
		return zero, false
	}
	v := l.free[n-1]
	var zero T
	l.free[n-1] = zero
	l.free = l.free[:n-1]
	return v, true
}

// Put makes v available to Get, or drops it when Max values are idle.
func (l *List[T]) Put(v T) {
	l.mu.Lock()
	if len(l.free) < l.Max {
		l.free = append(l.free, v)
	}
	l.mu.Unlock()
}

// Len reports the number of idle values.
func (l *List[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.free)
}
