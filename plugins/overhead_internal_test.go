package plugins

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

// BenchmarkHostOverhead times the host-side pieces of one call that do not
// involve the guest: the per-call deadline (watchdog arm/disarm) and the
// envelope encode of a DROID-sized pre and post request. watchdog-v0 is
// the previous watchdog (watchdogV0) on the same calls.
//
//	go test ./plugins -run '^$' -bench HostOverhead -benchtime 20000x
func BenchmarkHostOverhead(b *testing.B) {
	b.Run("watchdog", func(b *testing.B) {
		w := newWatchdog(&fakeGlobal{}, &fakeGlobal{})
		ctx := context.Background()
		b.ReportAllocs()
		for range b.N {
			w.arm(ctx, time.Now(), 50*time.Millisecond)
			w.disarm()
		}
	})
	b.Run("watchdog-v0", func(b *testing.B) {
		w := newWatchdogV0(&fakeGlobal{}, &fakeGlobal{})
		ctx := context.Background()
		b.ReportAllocs()
		for range b.N {
			w.arm(ctx, 50*time.Millisecond)
			w.disarm()
		}
	})
	b.Run("watchdog-v0-cancelable-ctx", func(b *testing.B) {
		w := newWatchdogV0(&fakeGlobal{}, &fakeGlobal{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		for range b.N {
			w.arm(ctx, 50*time.Millisecond)
			w.disarm()
		}
	})
	b.Run("watchdog-cancelable-ctx", func(b *testing.B) {
		w := newWatchdog(&fakeGlobal{}, &fakeGlobal{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		for range b.N {
			w.arm(ctx, time.Now(), 50*time.Millisecond)
			w.disarm()
		}
	})
	d := &Description{
		State:   []abi.StateGroup{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}},
		Cameras: []abi.Camera{{Key: "exterior_image_1_left"}, {Key: "wrist_image_left"}},
	}
	p := &Plugin{name: "droid", names: newNameCache(d)}
	state := []StateGroup{{Key: "eef_9d", Values: make([]float64, 9)}, {Key: "gripper_position", Values: make([]float64, 1)}, {Key: "joint_position", Values: make([]float64, 7)}}
	b.Run("encode-pre", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			eb := builders.Get().(*envelope.Builder)
			eb.Reset()
			eb.PadAttrs(abi.AttrsPad)
			attrs(eb, "", "oxe_droid_relative_eef_relative_joint", "")
			eb.Attr("instruction", "Put the blue block in the green bowl")
			for i, c := range d.Cameras {
				eb.Descriptor(prefixed(&p.names.video, i, "video.", c.Key), envelope.Uint8, []int64{2, 180, 320, 3})
			}
			_ = p.stateTensors(eb, "pre", state)
			_, _ = eb.Bytes()
			builders.Put(eb)
		}
	})
	pred := make([]float32, 40*132)
	b.Run("encode-post", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			eb := builders.Get().(*envelope.Builder)
			eb.Reset()
			eb.PadAttrs(abi.AttrsPad)
			attrs(eb, "", "oxe_droid_relative_eef_relative_joint", "")
			eb.Float32("action_pred", []int64{40, 132}, pred)
			_ = p.stateTensors(eb, "post", state)
			_, _ = eb.Bytes()
			builders.Put(eb)
		}
	})
}

// watchdogV0 is the watchdog before the timer was kept across calls (a
// timer Reset/Stop and a context.AfterFunc per call), kept for
// BenchmarkHostOverhead's comparison. Its timer is created once per
// instance and reused.
type watchdogV0 struct {
	flag, budget api.MutableGlobal
	timer        *time.Timer

	stopCtx func() bool // context.AfterFunc's stop, nil when ctx cannot be canceled

	mu       sync.Mutex
	armed    bool
	fired    bool
	gen      uint64    // call number: a late cancellation of an earlier call is ignored
	deadline time.Time // a late timer of an earlier call is ignored
}

func newWatchdogV0(flag, budget api.MutableGlobal) *watchdogV0 {
	w := &watchdogV0{flag: flag, budget: budget}
	w.timer = time.AfterFunc(time.Hour, w.fireTimer)
	w.timer.Stop()
	return w
}

// fireTimer runs on the timer's goroutine. Stop cannot recall a timer
// function that has already started, so it checks that the current call's
// deadline has passed.
func (w *watchdogV0) fireTimer() {
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
// within rewrite.Interval checks). Called with w.mu held.
func (w *watchdogV0) raise() {
	if !w.fired {
		w.fired = true
		w.flag.Set(1)
		w.budget.Set(0)
	}
}

// arm starts the deadline d and, when ctx can be canceled, also stops the
// call on cancellation. Call disarm exactly once after the call.
func (w *watchdogV0) arm(ctx context.Context, d time.Duration) {
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
func (w *watchdogV0) disarm() bool {
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
