package service

import (
	"context"
	"errors"
	"sync/atomic"
)

// errQueueFull is returned by deviceLock.acquire when depth requests are
// already waiting.
var errQueueFull = errors.New("device queue is full")

// deviceLock admits device predictions to the backend's slots (one for a
// batch-1 device; device.Slotted's Slots for a pool of runners, each call
// then running on an idle one) with a bounded wait queue: at most depth
// waiters; a caller beyond that is refused at once rather than queued
// without bound.
type deviceLock struct {
	sem     chan struct{}
	depth   int64
	waiting atomic.Int64
}

func newDeviceLock(depth, slots int) deviceLock {
	return deviceLock{sem: make(chan struct{}, max(slots, 1)), depth: int64(depth)}
}

// acquire takes the lock, waiting until ctx is done. It returns errQueueFull
// when the queue is full and ctx.Err() when ctx ends first. The returned
// release must be called exactly once.
func (l *deviceLock) acquire(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case l.sem <- struct{}{}:
		return l.release, nil
	default:
	}
	if l.waiting.Add(1) > l.depth {
		l.waiting.Add(-1)
		return nil, errQueueFull
	}
	defer l.waiting.Add(-1)
	return l.wait(ctx)
}

// acquireInternal takes the lock as acquire does, outside the queue (the
// gateway's own warm-ups: few; neither refused as queue_full nor counted
// against the clients' queue_depth).
func (l *deviceLock) acquireInternal(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.wait(ctx)
}

// wait blocks for a slot or the end of ctx.
func (l *deviceLock) wait(ctx context.Context) (release func(), err error) {
	select {
	case l.sem <- struct{}{}:
		return l.release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *deviceLock) release() { <-l.sem }
