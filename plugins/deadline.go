package plugins

import (
	"context"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// DeadlineMode says how the host stops a guest call that runs past its
// deadline. Both modes enforce the deadline; they differ in cost.
type DeadlineMode int

const (
	// DeadlineStopFlag (the default with the compiler) rewrites the module
	// at load (plugins/internal/rewrite) so that every function entry and
	// loop back-edge (for Go's block-dispatch loops: every backward jump)
	// decrements a host-owned budget and, every 1024 checks,
	// leaves native code once (a Go preemption point) and tests a host-owned
	// stop flag; a per-instance timer raises the flag when the deadline
	// passes and the guest traps at its next check. Cost: a few
	// instructions per check. A module the rewriter does not understand
	// falls back to DeadlineCloseOnContextDone with a warning.
	DeadlineStopFlag DeadlineMode = iota
	// DeadlineCloseOnContextDone uses wazero's
	// RuntimeConfig.WithCloseOnContextDone: every loop header calls into Go
	// to check whether the module was closed (about 60 ns each in wazero
	// v1.12's compiler; Go guests have many loop headers). Always used with
	// the interpreter.
	DeadlineCloseOnContextDone
)

func (m DeadlineMode) String() string {
	if m == DeadlineStopFlag {
		return "stop-flag"
	}
	return "close-on-context-done"
}

// pollInterval bounds how late a call notices that its context was
// canceled (deadlines themselves are exact to the timer's resolution).
const pollInterval = 5 * time.Millisecond

// watchdog arms one instance's stop flag for the duration of a call.
//
// Cost per call: two uncontended mutex sections (the clock is read by
// the caller). The
// instance's timer is not stopped and restarted per call (about 350 ns,
// and context.AfterFunc another 600 ns and three allocations with a
// cancelable context): it stays pending across calls and, when it fires,
// checks the call in flight (if any): past its deadline or canceled, it
// raises the flag; otherwise it re-arms itself for the remaining time (at
// most pollInterval when the call's context can be canceled). An idle
// instance's timer fires at most once more and then stays stopped.
type watchdog struct {
	flag, budget api.MutableGlobal
	timer        *time.Timer

	mu       sync.Mutex
	armed    bool
	fired    bool
	pending  bool            // the timer will fire at fireAt
	fireAt   time.Time       //
	deadline time.Time       // the call in flight's deadline
	ctx      context.Context // the call in flight's context if it can be canceled, else nil
}

func newWatchdog(flag, budget api.MutableGlobal) *watchdog {
	w := &watchdog{flag: flag, budget: budget}
	w.timer = time.AfterFunc(time.Hour, w.fireTimer)
	w.timer.Stop()
	return w
}

// fireTimer runs on the timer's goroutine. It acts on the call in flight,
// whichever call armed the timer: a late timer of an earlier call re-arms
// for the current call's deadline, and an idle instance's timer stops.
func (w *watchdog) fireTimer() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = false
	if !w.armed || w.fired {
		return
	}
	now := time.Now()
	if !now.Before(w.deadline) || (w.ctx != nil && w.ctx.Err() != nil) {
		w.raise()
		return
	}
	w.schedule(now, w.deadline.Sub(now))
}

// schedule (re)starts the timer to fire after d, or after pollInterval
// if that is sooner and the call can be canceled. Called with w.mu held.
func (w *watchdog) schedule(now time.Time, d time.Duration) {
	if w.ctx != nil && d > pollInterval {
		d = pollInterval
	}
	w.pending, w.fireAt = true, now.Add(d)
	w.timer.Reset(d)
}

// raise sets the stop flag and zeroes the budget (so the next check tests
// the flag). The guest reads both globals from native code, which the
// mutex does not cover: plain aligned stores, seen by the running call at
// its next check (if the guest's own decrement overwrites the zero budget,
// within rewrite.Interval checks). Called with w.mu held.
func (w *watchdog) raise() {
	if !w.fired {
		w.fired = true
		w.flag.Set(1)
		w.budget.Set(0)
	}
}

// arm starts the deadline now+d (or ctx's deadline if that is sooner)
// and, when ctx can be canceled, also stops the call within pollInterval
// of a cancellation. now is the caller's clock reading at the start of the
// call (invoke reads the clock once for this and its observer). Call
// disarm exactly once after the call.
func (w *watchdog) arm(ctx context.Context, now time.Time, d time.Duration) {
	deadline := now.Add(d)
	if cd, ok := ctx.Deadline(); ok && cd.Before(deadline) {
		deadline = cd
	}
	var cctx context.Context
	if ctx.Done() != nil {
		cctx = ctx
	}
	w.mu.Lock()
	w.armed, w.fired = true, false
	w.deadline, w.ctx = deadline, cctx
	// The pending timer (if any) may belong to an earlier call; it is
	// reused unless it would fire too late for this one.
	limit := deadline
	if cctx != nil {
		limit = now.Add(pollInterval)
	}
	if !w.pending || w.fireAt.After(limit) {
		w.schedule(now, deadline.Sub(now))
	}
	w.mu.Unlock()
}

// disarm ends the call's deadline and reports whether the flag was raised
// (the deadline passed or ctx was canceled while the call ran). The timer
// is left pending (see watchdog).
func (w *watchdog) disarm() bool {
	w.mu.Lock()
	fired := w.fired
	w.armed, w.fired = false, false
	w.ctx = nil
	if fired {
		w.flag.Set(0) // the call is over: the next call starts clear
	}
	w.mu.Unlock()
	return fired
}

// stop stops the timer for good (the instance is closed).
func (w *watchdog) stop() {
	w.mu.Lock()
	w.armed = false
	w.pending = false
	w.mu.Unlock()
	w.timer.Stop()
}
