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
	// at load (plugins/internal/stopcheck) so that every function entry and
	// loop header decrements a host-owned budget and, every 1024 checks,
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

// watchdog arms one instance's stop flag for the duration of a call. Its
// timer is created once per instance and reused.
type watchdog struct {
	flag, budget api.MutableGlobal
	timer        *time.Timer

	stopCtx func() bool // context.AfterFunc's stop, nil when ctx cannot be canceled

	mu       sync.Mutex
	armed    bool
	fired    bool
	gen      uint64    // call number: a late cancellation of an earlier call is ignored
	deadline time.Time // a late timer of an earlier call is ignored
}

func newWatchdog(flag, budget api.MutableGlobal) *watchdog {
	w := &watchdog{flag: flag, budget: budget}
	w.timer = time.AfterFunc(time.Hour, w.fireTimer)
	w.timer.Stop()
	return w
}

// fireTimer runs on the timer's goroutine. Stop cannot recall a timer
// function that has already started, so it checks that the current call's
// deadline has passed.
func (w *watchdog) fireTimer() {
	w.mu.Lock()
	if w.armed && !time.Now().Before(w.deadline) {
		w.raise()
	}
	w.mu.Unlock()
}

// raise sets the stop flag and zeroes the budget (so the next check tests
// the flag). The guest reads both globals from native code, which the
// mutex does not cover: plain aligned stores, seen by the running call at
// its next check (if the guest's own decrement overwrites the zero budget,
// within stopcheck.Interval checks). Called with w.mu held.
func (w *watchdog) raise() {
	if !w.fired {
		w.fired = true
		w.flag.Set(1)
		w.budget.Set(0)
	}
}

// arm starts the deadline d and, when ctx can be canceled, also stops the
// call on cancellation. Call disarm exactly once after the call.
func (w *watchdog) arm(ctx context.Context, d time.Duration) {
	w.mu.Lock()
	w.armed, w.fired = true, false
	w.gen++
	gen := w.gen
	w.deadline = time.Now().Add(d)
	w.mu.Unlock()
	w.timer.Reset(d)
	w.stopCtx = nil
	if ctx.Done() != nil {
		w.stopCtx = context.AfterFunc(ctx, func() {
			w.mu.Lock()
			if w.armed && w.gen == gen {
				w.raise()
			}
			w.mu.Unlock()
		})
	}
}

// disarm ends the call's deadline and reports whether the flag was raised
// (the deadline passed or ctx was canceled while the call ran).
func (w *watchdog) disarm() bool {
	w.timer.Stop()
	if w.stopCtx != nil {
		w.stopCtx()
		w.stopCtx = nil
	}
	w.mu.Lock()
	fired := w.fired
	w.armed, w.fired = false, false
	if fired {
		w.flag.Set(0) // the call is over: the next call starts clear
	}
	w.mu.Unlock()
	return fired
}
