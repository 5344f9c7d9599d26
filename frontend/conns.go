package frontend

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Conns is the bookkeeping of one front end's connections: at most max
// hold a slot at once (Acquire), every live connection is tracked with
// whether it waits for a request (idle) or serves one (busy), and
// Shutdown drains them: listeners and idle connections are closed at
// once, busy ones are asked to finish (Handle.Drain) and close after
// their reply, and at the deadline the rest are cancelled (Context) and
// closed (Handle.Close). Safe for concurrent use; create it with
// NewConns.
type Conns struct {
	sem chan struct{}

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	set      map[*Conn]struct{}
	draining atomic.Bool
	wg       sync.WaitGroup
}

// Handle is what Shutdown may do to one connection.
type Handle struct {
	// Close closes the connection at once (required).
	Close func()
	// Drain, when set, asks a busy connection to close after its reply;
	// nil: the connection learns of the drain from SetIdle.
	Drain func()
}

// Conn is one tracked connection.
type Conn struct {
	cs   *Conns
	h    Handle
	idle bool // guarded by cs.mu
}

// NewConns returns the bookkeeping of a front end serving at most max
// connections at once (max <= 0: DefaultMaxConnections).
func NewConns(max int) *Conns {
	if max <= 0 {
		max = DefaultMaxConnections
	}
	cs := &Conns{sem: make(chan struct{}, max), lns: map[net.Listener]struct{}{}, set: map[*Conn]struct{}{}}
	cs.ctx, cs.cancel = context.WithCancel(context.Background())
	return cs
}

// Context is the base of the connections' requests: it is cancelled when
// Shutdown returns, at the latest at its deadline.
func (cs *Conns) Context() context.Context { return cs.ctx }

// Draining reports whether Shutdown has begun.
func (cs *Conns) Draining() bool { return cs.draining.Load() }

// Max is the number of connections served at once.
func (cs *Conns) Max() int { return cap(cs.sem) }

// Len is the number of tracked connections (Track without Done).
func (cs *Conns) Len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.set)
}

// Listen registers ln so that Shutdown closes it; the returned func
// unregisters it. When Shutdown has begun, ln is closed and ok is false.
func (cs *Conns) Listen(ln net.Listener) (done func(), ok bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.draining.Load() {
		ln.Close()
		return nil, false
	}
	cs.lns[ln] = struct{}{}
	return func() {
		cs.mu.Lock()
		delete(cs.lns, ln)
		cs.mu.Unlock()
	}, true
}

// Acquire takes a connection slot without waiting; false when the
// maximum is served. Every true is paired with one Release.
func (cs *Conns) Acquire() bool {
	select {
	case cs.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release gives back a slot taken by Acquire.
func (cs *Conns) Release() { <-cs.sem }

// Track registers a live connection, idle or busy, until its Done.
// When Shutdown has begun it registers nothing and returns false: the
// caller closes the connection.
func (cs *Conns) Track(idle bool, h Handle) (*Conn, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.draining.Load() {
		return nil, false
	}
	c := &Conn{cs: cs, h: h, idle: idle}
	cs.set[c] = struct{}{}
	cs.wg.Add(1)
	return c, true
}

// SetIdle marks the connection idle (waiting for a request: Shutdown
// closes it at once) or busy; false when Shutdown has begun and the
// connection should close.
func (c *Conn) SetIdle(idle bool) bool {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	c.idle = idle
	return !c.cs.draining.Load()
}

// Done unregisters the connection; call it once, after the connection
// is closed.
func (c *Conn) Done() {
	c.cs.mu.Lock()
	delete(c.cs.set, c)
	c.cs.mu.Unlock()
	c.cs.wg.Done()
}

// Shutdown drains: it marks the set draining (Listen and Track refuse
// from now on), runs stop when set (an http.Server's own Shutdown, which
// closes its listeners; its error is returned on a clean drain), closes
// the registered listeners and the idle connections, asks the busy ones
// to finish, and waits until every connection is Done. When ctx ends
// first, Context is cancelled, every remaining connection is closed, and
// ctx's error is returned once they are Done.
func (cs *Conns) Shutdown(ctx context.Context, stop func(context.Context) error) error {
	cs.draining.Store(true)
	var stopErr error
	if stop != nil {
		stopErr = stop(ctx)
	}
	cs.mu.Lock()
	for ln := range cs.lns {
		ln.Close()
	}
	for c := range cs.set {
		switch {
		case c.idle:
			c.h.Close()
		case c.h.Drain != nil:
			c.h.Drain()
		}
	}
	cs.mu.Unlock()
	done := make(chan struct{})
	go func() { cs.wg.Wait(); close(done) }()
	select {
	case <-done:
		cs.cancel()
		return stopErr
	case <-ctx.Done():
	}
	cs.cancel()
	cs.mu.Lock()
	for c := range cs.set {
		c.h.Close()
	}
	cs.mu.Unlock()
	<-done
	return ctx.Err()
}

// Deadline is one connection's read deadline for a transport read
// through a context (a websocket): one timer, armed with a duration and
// the reason it stands for (an idle timeout while the connection waits
// for a request, a read timeout while one arrives), disarmed while a
// request is served. When it fires it records its reason and calls the
// cancel it was made with (which ends the read). Safe for concurrent use.
type Deadline struct {
	mu     sync.Mutex
	t      *time.Timer
	reason error // what the armed timer means
	fired  error // set once it fired
}

// NewDeadline returns a disarmed deadline that calls cancel when it
// fires.
func NewDeadline(cancel context.CancelFunc) *Deadline {
	d := &Deadline{}
	d.t = time.AfterFunc(time.Hour, func() {
		d.mu.Lock()
		d.fired = d.reason
		d.mu.Unlock()
		cancel()
	})
	d.t.Stop()
	return d
}

// Arm (re)starts the timer: it fires after the duration, for reason.
func (d *Deadline) Arm(after time.Duration, reason error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.t.Stop()
	d.reason = reason
	d.t.Reset(after)
}

// Disarm stops the timer.
func (d *Deadline) Disarm() { d.t.Stop() }

// Fired is the reason of the timer that fired, nil while none did.
func (d *Deadline) Fired() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}
