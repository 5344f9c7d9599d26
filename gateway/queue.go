package gateway

import (
	"context"
	"errors"
	"sync/atomic"
)

// errQueueFull is returned by deviceLock.acquire when depth requests are
// already waiting.
var errQueueFull = errors.New("device queue is full")

// deviceLock serialises device predictions (batch 1) with a bounded wait
// queue: one holder, at most depth waiters; a caller beyond that is refused
// at once rather than queued without bound.
type deviceLock struct {
	sem     chan struct{}
	depth   int64
	waiting atomic.Int64
}

func newDeviceLock(depth int) deviceLock {
	return deviceLock{sem: make(chan struct{}, 1), depth: int64(depth)}
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
	select {
	case l.sem <- struct{}{}:
		return l.release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *deviceLock) release() { <-l.sem }
