package service

import (
	"context"
	"sync"
)

// tracker counts background goroutines (warm-ups after start, reloads,
// binding closes) so that Shutdown can wait for them; it refuses new work
// once closed.
type tracker struct {
	mu     sync.Mutex
	n      int
	idle   chan struct{} // closed while n == 0
	closed bool
}

func newTracker() *tracker {
	t := &tracker{idle: make(chan struct{})}
	close(t.idle)
	return t
}

// Add registers one unit of work; done must be called once. ok is false
// after Close.
func (t *tracker) Add() (done func(), ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false
	}
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.n--
			if t.n == 0 {
				close(t.idle)
			}
		})
	}, true
}

// Go runs fn tracked. Work for closing resources runs even after Close.
func (t *tracker) Go(fn func()) {
	t.mu.Lock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
	go func() {
		defer func() {
			t.mu.Lock()
			t.n--
			if t.n == 0 {
				close(t.idle)
			}
			t.mu.Unlock()
		}()
		fn()
	}()
}

// Close refuses further Add calls.
func (t *tracker) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// Wait waits until no work is registered or ctx ends; it reports whether
// the tracker went idle.
func (t *tracker) Wait(ctx context.Context) bool {
	for {
		t.mu.Lock()
		if t.n == 0 {
			t.mu.Unlock()
			return true
		}
		idle := t.idle
		t.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return false
		}
	}
}
