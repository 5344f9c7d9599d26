//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gr00tgw/gr00tgw/core/model/noise"
	"github.com/gr00tgw/gr00tgw/device"
)

// Pool is a set of supervised runner processes behind device.Backend:
// Predict runs on an idle runner (Slots of them at once), with its inputs
// in a shared-memory segment. It also implements device.Slotted,
// device.Supervised, device.Gated and device.PixelArena. Safe for
// concurrent use; the caller must Close it.
type Pool struct {
	o       Options
	layout  Layout
	off     [NumSlots]int // byte offsets by Slot
	segSize int
	factsMu sync.RWMutex
	facts   device.Facts // Extra is replaced, never modified in place (factsMu)
	impl    string       // runner[0]'s HELLO "runner"
	rtc     bool         // every runner listed FeatureRTC at its start
	workers []*worker
	log     *slog.Logger

	mu      sync.Mutex
	idle    []*worker
	changed chan struct{} // closed and replaced when a worker changes state
	gate    device.GateFunc
	closed  bool

	segMu   sync.Mutex
	free    []*segment
	segs    []*segment // every segment, for pointer lookups (segMu)
	nextSeg uint32

	copies   atomic.Int64
	wg       sync.WaitGroup
	stop     chan struct{}
	stopOnce sync.Once
}

var (
	_ device.Backend    = (*Pool)(nil)
	_ device.Slotted    = (*Pool)(nil)
	_ device.Supervised = (*Pool)(nil)
	_ device.Gated      = (*Pool)(nil)
	_ device.PixelArena = (*Pool)(nil)
)

// worker is one runner slot: its current process and supervision record.
type worker struct {
	p     *Pool
	index int
	argv  []string

	mu     sync.Mutex
	cur    *conn
	state  device.RunnerState // the truth; status.State is set from it by Supervision
	status device.RunnerStatus
	gated  bool
}

// Open starts o.Runners runners (in parallel) and waits for each HELLO. A
// runner that fails to start fails Open with its cause and last stderr
// lines; every runner started is then stopped.
func Open(ctx context.Context, o Options) (*Pool, error) {
	o.defaults()
	if len(o.Command) == 0 {
		return nil, errors.New("runner: no runner command")
	}
	p := &Pool{o: o, log: o.Logger, changed: make(chan struct{}), stop: make(chan struct{})}
	threads := o.Device.Threads
	if threads <= 0 {
		threads = max(1, gomaxprocs()/o.Runners)
	}
	for i := range o.Runners {
		argv := append(append([]string(nil), o.Command...), "--fd", "3", "--backend", o.Backend,
			"--weights-dir", o.Device.WeightsDir, "--policy", o.Device.Policy, "--threads", strconv.Itoa(threads),
			"--index", strconv.Itoa(i))
		p.workers = append(p.workers, &worker{p: p, index: i, argv: argv, state: device.RunnerStarting,
			status: device.RunnerStatus{Index: i, Since: time.Now(), RestartsByCause: map[string]int{}}})
	}
	errs := make([]error, len(p.workers))
	var wg sync.WaitGroup
	for i, w := range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := spawn(ctx, w.argv, o.Env, o.Stderr, o.StartTimeout)
			if err != nil {
				errs[i] = fmt.Errorf("runner[%d]: %w", i, err)
				return
			}
			w.cur = c
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, w := range p.workers {
			if w.cur != nil {
				w.cur.close(5 * time.Second)
			}
		}
		return nil, err
	}
	h := p.workers[0].cur.hello
	for _, w := range p.workers[1:] {
		if w.cur.hello.Layout != h.Layout {
			_ = p.Close()
			return nil, fmt.Errorf("runner[%d]: layout %+v differs from runner[0]'s %+v", w.index, w.cur.hello.Layout, h.Layout)
		}
	}
	p.layout = h.Layout
	p.off, p.segSize = h.Layout.offsets()
	p.impl = h.Runner
	p.rtc = true
	for _, w := range p.workers {
		p.rtc = p.rtc && slices.Contains(w.cur.hello.Features, FeatureRTC)
	}
	p.facts = h.Facts.device()
	extra := maps.Clone(p.facts.Extra)
	if extra == nil {
		extra = map[string]any{}
	}
	extra["isolation"] = "process"
	extra["runners"] = len(p.workers)
	extra["runner_protocol"] = ProtocolVersion
	extra["runner_impl"] = h.Runner
	p.facts.Extra = extra
	for _, w := range p.workers {
		w.setState(device.RunnerOK, "")
		w.mu.Lock()
		w.status.PID = w.cur.pid
		w.mu.Unlock()
		p.log.Info("runner started", "runner", w.index, "pid", w.cur.pid, "impl", w.cur.hello.Runner)
		p.putIdle(w)
		p.wg.Add(1)
		go w.supervise(w.cur)
	}
	return p, nil
}

// Layout returns the layout the runners serve.
func (p *Pool) Layout() Layout { return p.layout }

// Slots is the number of runners.
func (p *Pool) Slots() int { return len(p.workers) }

// Facts reports runner 0's backend facts, with isolation, runners,
// runner_protocol and runner_impl in Extra.
func (p *Pool) Facts() device.Facts {
	p.factsMu.RLock()
	defer p.factsMu.RUnlock()
	return p.facts
}

// mergeFacts merges a RESULT's extra (facts that changed since HELLO)
// into the reported facts, copy on write.
func (p *Pool) mergeFacts(extra map[string]any) {
	if len(extra) == 0 {
		return
	}
	p.factsMu.Lock()
	defer p.factsMu.Unlock()
	m := maps.Clone(p.facts.Extra)
	if m == nil {
		m = map[string]any{}
	}
	maps.Copy(m, extra)
	p.facts.Extra = m
}

// Copies counts the predictions whose pixel_values were not in a segment
// (not from PixelBuffer) and were copied into one.
func (p *Pool) Copies() int64 { return p.copies.Load() }

// Supervision snapshots every runner.
func (p *Pool) Supervision() device.Supervision {
	var s device.Supervision
	var reasons []string
	failed := 0
	for _, w := range p.workers {
		w.mu.Lock()
		st := w.status
		st.State = string(w.state)
		st.RestartsByCause = maps.Clone(st.RestartsByCause)
		st.LastStderr = append([]string(nil), st.LastStderr...)
		w.mu.Unlock()
		s.Runners = append(s.Runners, st)
		switch device.RunnerState(st.State) {
		case device.RunnerOK:
			s.Serving = true
		case device.RunnerFailed:
			failed++
			reasons = append(reasons, fmt.Sprintf("runner[%d] failed: %s", st.Index, st.LastCause))
		default:
			reasons = append(reasons, fmt.Sprintf("runner[%d] %s after %s", st.Index, st.State, st.LastCause))
		}
	}
	s.Failed = !s.Serving && failed > 0 && failed == len(p.workers)
	if len(reasons) > 0 {
		s.Reason = fmt.Sprint(reasons)
	}
	return s
}

// PixelBuffer hands out a free segment's pixel_values region (see
// device.PixelArena).
func (p *Pool) PixelBuffer() ([]float32, func(), bool) {
	seg, err := p.getSegment()
	if err != nil {
		return nil, nil, false
	}
	var once sync.Once
	return seg.f32(Span{0, p.layout.MaxPatches * p.layout.PixelCols}), func() { once.Do(func() { p.putSegment(seg) }) }, true
}

func (p *Pool) getSegment() (*segment, error) {
	p.segMu.Lock()
	defer p.segMu.Unlock()
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		s.loaned = true
		return s, nil
	}
	if p.segSize == 0 {
		return nil, errors.New("runner: pool closed")
	}
	s, err := newSegment(p.nextSeg, p.segSize)
	if err != nil {
		return nil, err
	}
	p.nextSeg++
	s.loaned = true
	p.segs = append(p.segs, s)
	return s, nil
}

func (p *Pool) putSegment(s *segment) {
	p.segMu.Lock()
	defer p.segMu.Unlock()
	if !s.loaned {
		return
	}
	s.loaned = false
	if p.segSize == 0 { // the pool closed while s was on loan: unmap it now
		s.close()
		for i, x := range p.segs {
			if x == s {
				p.segs = append(p.segs[:i], p.segs[i+1:]...)
				break
			}
		}
		return
	}
	p.free = append(p.free, s)
}

// segmentOf finds the segment whose pixel region pv was written in.
func (p *Pool) segmentOf(pv []float32) *segment {
	if len(pv) == 0 {
		return nil
	}
	p.segMu.Lock()
	defer p.segMu.Unlock()
	for _, s := range p.segs {
		if s.holds(pv) {
			return s
		}
	}
	return nil
}

// Predict runs in on an idle runner. pixel_values from PixelBuffer are
// used in place; others are copied into a segment (Copies). When no
// runner serves it fails at once with device.ErrRestarting; when the
// runner goes away under the call, too.
func (p *Pool) Predict(ctx context.Context, in *device.Inputs) (*device.Result, error) {
	w, err := p.acquire(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer p.release(w)
	return w.predict(ctx, in)
}

// predict runs in on w's runner.
func (w *worker) predict(ctx context.Context, in *device.Inputs) (*device.Result, error) {
	p := w.p
	if in == nil {
		return nil, fmt.Errorf("%w: runner: no inputs", device.ErrInput)
	}
	w.mu.Lock()
	c := w.cur
	w.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("%w: runner[%d] is not running", device.ErrRestarting, w.index)
	}
	seg := p.segmentOf(in.PixelValues)
	if seg == nil {
		var err error
		if seg, err = p.getSegment(); err != nil {
			return nil, err
		}
		defer p.putSegment(seg)
		if len(in.PixelValues) > 0 {
			if 4*len(in.PixelValues) > p.off[SlotInputIDs] {
				return nil, fmt.Errorf("%w: runner: pixel_values of %d values over the segment's %d", device.ErrInput, len(in.PixelValues), p.off[SlotInputIDs]/4)
			}
			copy(seg.f32(Span{0, len(in.PixelValues)}), in.PixelValues)
			p.copies.Add(1)
		}
	}
	body, err := p.fill(seg, in)
	if err != nil {
		return nil, err
	}
	fail := func(err error) error {
		if errors.Is(err, device.ErrRestarting) {
			// The runner is going: reaped and recorded (Supervision shows
			// it restarting) before the caller sees the error.
			select {
			case <-c.dead:
			case <-time.After(time.Second):
				c.kill("protocol", err.Error())
				<-c.dead
			}
			w.down(c)
		}
		return fmt.Errorf("runner[%d]: %w", w.index, err)
	}
	if err := c.attach(seg, p.o.PingTimeout); err != nil {
		return nil, fail(err)
	}
	r, err := c.predict(ctx, seg, body, p.o.CallGrace)
	if err != nil {
		return nil, fail(err)
	}
	if r.Horizon*r.ActionDim != body.Output.Count {
		return nil, fmt.Errorf("runner[%d]: result %d×%d does not match the output span of %d", w.index, r.Horizon, r.ActionDim, body.Output.Count)
	}
	res := &device.Result{ActionPred: make([]float32, body.Output.Count), Horizon: r.Horizon, ActionDim: r.ActionDim,
		Stages: make([]device.StageTiming, len(r.Stages))}
	copy(res.ActionPred, seg.f32(body.Output))
	for i, st := range r.Stages {
		res.Stages[i] = device.StageTiming{Name: st.Name, Duration: time.Duration(st.NS)}
	}
	p.mergeFacts(r.Extra)
	return res, nil
}

// fill writes the small tensors of in into seg at the layout's offsets and
// describes them; with Options.DrawNoise, a request without noise gets it
// drawn from its seed into the noise span. Inputs larger than the layout
// are refused (ErrInput).
func (p *Pool) fill(seg *segment, in *device.Inputs) (*PredictBody, error) {
	l, off := p.layout, p.off
	put := func(slot Slot, n, capN int) (Span, error) {
		if n > capN {
			return Span{}, fmt.Errorf("%w: runner: %s has %d values, the segment holds %d", device.ErrInput, slot, n, capN)
		}
		return Span{Offset: off[slot], Count: n}, nil
	}
	S := len(in.InputIDs)
	b := &PredictBody{Segment: seg.id, PixelRows: in.PixelRows, PixelCols: in.PixelCols, ImageGridTHW: in.ImageGridTHW,
		Seed: in.Seed, EmbodimentID: in.EmbodimentID}
	if b.ImageGridTHW == nil {
		b.ImageGridTHW = [][3]int{}
	}
	var err error
	if b.PixelValues, err = put(SlotPixelValues, len(in.PixelValues), off[SlotInputIDs]/4); err != nil {
		return nil, err
	}
	if b.InputIDs, err = put(SlotInputIDs, S, l.MaxSeq); err != nil {
		return nil, err
	}
	copy(seg.i32(b.InputIDs), in.InputIDs)
	if in.AttentionMask != nil {
		sp, err := put(SlotAttentionMask, len(in.AttentionMask), l.MaxSeq)
		if err != nil {
			return nil, err
		}
		copy(seg.i32(sp), in.AttentionMask)
		b.AttentionMask = &sp
	}
	if b.PositionIDs, err = put(SlotPositionIDs, len(in.PositionIDs), 3*l.MaxSeq); err != nil {
		return nil, err
	}
	copy(seg.i32(b.PositionIDs), in.PositionIDs)
	if b.State, err = put(SlotState, len(in.State), l.StateDim); err != nil {
		return nil, err
	}
	copy(seg.f32(b.State), in.State)
	if in.Noise != nil {
		sp, err := put(SlotNoise, len(in.Noise), l.ActionHorizon*l.ActionDim)
		if err != nil {
			return nil, err
		}
		copy(seg.f32(sp), in.Noise)
		b.Noise = &sp
	} else if p.o.DrawNoise {
		sp := Span{Offset: off[SlotNoise], Count: l.ActionHorizon * l.ActionDim}
		noise.Randn(seg.f32(sp), in.Seed)
		b.Noise = &sp
	}
	b.Output = Span{Offset: off[SlotOutput], Count: l.ActionHorizon * l.ActionDim}
	if r := in.RTC; r != nil {
		if !p.rtc {
			return nil, fmt.Errorf("%w: runner: rtc asked, but the runner (%s) does not list the feature %q in HELLO", device.ErrInput, p.impl, FeatureRTC)
		}
		sp, err := put(SlotRTCPrev, len(r.Prev), l.ActionHorizon*l.ActionDim)
		if err != nil {
			return nil, err
		}
		copy(seg.f32(sp), r.Prev)
		b.RTC = &RTCBody{Prev: sp, PrevRows: r.PrevRows, Horizon: r.Horizon, Overlap: r.Overlap, Frozen: r.Frozen, RampRate: r.RampRate}
	}
	return b, nil
}

// acquire takes an idle serving runner (want, when set, that one only),
// waiting within ctx; it fails at once with device.ErrRestarting when no
// runner serves (or want does not).
func (p *Pool) acquire(ctx context.Context, want *worker) (*worker, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: runner pool closed", device.ErrRestarting)
		}
		for i, w := range p.idle {
			if want == nil || w == want {
				p.idle = append(p.idle[:i], p.idle[i+1:]...)
				p.mu.Unlock()
				return w, nil
			}
		}
		serving := false
		for _, w := range p.workers {
			if (want == nil || w == want) && w.currentState() == device.RunnerOK {
				serving = true
			}
		}
		ch := p.changed
		p.mu.Unlock()
		if !serving && want == nil {
			return nil, fmt.Errorf("%w: no runner serves: %s", device.ErrRestarting, p.Supervision().Reason)
		}
		if !serving {
			want.mu.Lock()
			st, cause := want.state, want.status.LastCause
			want.mu.Unlock()
			return nil, fmt.Errorf("%w: runner[%d] is %s: %s", device.ErrRestarting, want.index, st, cause)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// release puts w back in rotation if it still serves (a runner that went
// away under the call is put back by its supervisor once restarted).
func (p *Pool) release(w *worker) {
	w.mu.Lock()
	ok := w.state == device.RunnerOK && w.cur != nil
	if ok {
		select {
		case <-w.cur.dead:
			ok = false
		default:
		}
	}
	w.mu.Unlock()
	if ok {
		p.putIdle(w)
	}
}

func (p *Pool) putIdle(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
	p.notifyLocked()
}

func (p *Pool) notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notifyLocked()
}

func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// SetGate records gate and runs it on every runner not yet gated, one at
// a time, each taken out of rotation meanwhile. A runner that fails it is
// killed and restarted (and gated again) by its supervisor; SetGate
// returns the first failure.
func (p *Pool) SetGate(ctx context.Context, gate device.GateFunc) error {
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	var errs []error
	for _, w := range p.workers {
		w.mu.Lock()
		skip := w.gated || w.state != device.RunnerOK
		w.mu.Unlock()
		if skip {
			continue
		}
		w2, err := p.acquire(ctx, w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// The gate's predict may lose the runner (down sets w.cur nil):
		// kill only the runner gated, and only while it is still w's.
		w.mu.Lock()
		c := w.cur
		w.mu.Unlock()
		if err := w.runGate(ctx, gate); err != nil {
			errs = append(errs, err)
			w.mu.Lock()
			still := c != nil && w.cur == c
			w.mu.Unlock()
			if still {
				select {
				case <-c.dead:
				default:
					c.kill("gate", err.Error())
				}
			}
		}
		p.release(w2)
	}
	return errors.Join(errs...)
}

func (w *worker) runGate(ctx context.Context, gate device.GateFunc) error {
	if gate == nil {
		return nil
	}
	if err := gate(ctx, workerBackend{w}); err != nil {
		return fmt.Errorf("runner[%d]: gate: %w", w.index, err)
	}
	w.mu.Lock()
	w.gated = true
	w.mu.Unlock()
	return nil
}

// workerBackend is one runner as a device.Backend (for the gate).
type workerBackend struct{ w *worker }

func (b workerBackend) Predict(ctx context.Context, in *device.Inputs) (*device.Result, error) {
	return b.w.predict(ctx, in)
}
func (b workerBackend) Facts() device.Facts { return b.w.p.Facts() }
func (b workerBackend) Close() error        { return nil }

func (w *worker) currentState() device.RunnerState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// setState moves w to st (since now), recording cause when not "", and
// wakes the callers waiting for a runner.
func (w *worker) setState(st device.RunnerState, cause string) {
	w.mu.Lock()
	w.state, w.status.Since = st, time.Now()
	if cause != "" {
		w.status.LastCause = cause
	}
	w.mu.Unlock()
	w.p.notify()
}

// supervise watches c: pings it, and when it goes away records the cause
// and restarts (backoff, HELLO, gate) until one passes or MaxRestarts
// consecutive starts failed (then the runner stays failed).
func (w *worker) supervise(c *conn) {
	p := w.p
	defer p.wg.Done()
	for {
		okAt := time.Now()
		w.watch(c)
		if p.isClosed() {
			return
		}
		w.down(c)
		if up := time.Since(okAt); up < p.o.stableUptime && !killedFromOutside(c) && w.flapped(c, up) {
			return
		}
		if c = w.restart(); c == nil {
			return
		}
	}
}

// killedFromOutside reports whether c died of a SIGKILL the pool did not
// send (an operator, a chaos test, the OOM killer): not the runner's own
// failure, so not a flap. The pool's own kills record their cause (hang,
// protocol, gate) first.
func killedFromOutside(c *conn) bool {
	kind, cause := c.causeOf()
	return kind == "signal" && cause == "signal "+syscall.SIGKILL.String()
}

// flapped counts a runner that died within the stable uptime of serving as
// a failed restart (its backoff keeps growing); true when that makes
// MaxRestarts and the runner stays failed.
func (w *worker) flapped(c *conn, up time.Duration) bool {
	p := w.p
	_, cause := c.causeOf()
	w.mu.Lock()
	w.status.Failures++
	failures := w.status.Failures
	w.mu.Unlock()
	err := fmt.Errorf("runner went away %v after it started serving (under %v): %s", up.Round(time.Millisecond), p.o.stableUptime, cause)
	p.log.Error("runner restart failed", "runner", w.index, "attempt", failures, "of", p.o.MaxRestarts, "err", err)
	if failures >= p.o.MaxRestarts {
		w.setState(device.RunnerFailed, fmt.Sprintf("%d consecutive failed restarts; last: %v", failures, err))
		p.log.Error("runner failed for good", "runner", w.index, "restarts", failures)
		return true
	}
	return false
}

// down records that c, w's runner, went away (once per runner): cause,
// restarts, state restarting, out of rotation.
func (w *worker) down(c *conn) {
	p := w.p
	if p.isClosed() {
		return
	}
	kind, cause := c.causeOf()
	lines := c.stderr.last()
	w.mu.Lock()
	if w.cur != c {
		w.mu.Unlock()
		return
	}
	w.status.Restarts++
	w.status.RestartsByCause[kind]++
	w.status.LastCause, w.status.LastCauseKind, w.status.LastStderr = cause, kind, lines
	w.status.PID = 0
	w.cur = nil
	w.gated = false
	// State with cur: a second down (the supervisor's and the caller's
	// race) returns early, and its caller must already see restarting.
	w.state, w.status.Since = device.RunnerRestarting, time.Now()
	w.mu.Unlock()
	p.removeIdle(w) // and notify
	p.log.Error("runner went away; restarting", "runner", w.index, "pid", c.pid, "cause", cause, "kind", kind,
		"last_stderr", lines)
}

// watch pings c until it is dead or the pool closes (then it stops the
// pings and closes c); after the stable uptime it resets w's consecutive
// failures.
func (w *worker) watch(c *conn) {
	stopPings := w.p.keepPinging(c)
	defer stopPings()
	stable := time.NewTimer(w.p.o.stableUptime)
	defer stable.Stop()
	for {
		select {
		case <-stable.C:
			// Up long enough: its failures are no longer consecutive.
			w.mu.Lock()
			if w.cur == c {
				w.status.Failures = 0
			}
			w.mu.Unlock()
		case <-c.dead:
			return
		case <-w.p.stop:
			stopPings()
			c.close(5 * time.Second)
			return
		}
	}
}

// keepPinging pings c every PingInterval, each ping in its own goroutine (a
// runner that sends no pong within PingTimeout is killed as hung), until
// c is dead or stop is called. stop is idempotent and returns once the
// loop has ended: no ping starts after it (one already sent may still be
// waiting for its pong). watch and restart's gate share it.
func (p *Pool) keepPinging(c *conn) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(p.o.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-c.dead:
				return
			case <-t.C:
				go c.ping(p.o.PingTimeout)
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(done)
		<-ended
	})
}

// restart starts a new runner for w with backoff, gating it; nil when the
// pool closed or w failed for good.
func (w *worker) restart() *conn {
	p := w.p
	// The failures so far (failed starts, and runs shorter than the
	// stable uptime) set the backoff: a flapping runner backs off as a
	// failing one does.
	w.mu.Lock()
	failures := w.status.Failures
	w.mu.Unlock()
	delay := p.o.BackoffMin
	for i := 0; i < failures && delay < p.o.BackoffMax; i++ {
		delay *= 2
	}
	delay = min(delay, p.o.BackoffMax)
	for {
		select {
		case <-p.stop:
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, p.o.BackoffMax)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-p.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		c, err := spawn(ctx, w.argv, p.o.Env, p.o.Stderr, p.o.StartTimeout)
		kind := "start"
		installed := false // c became w.cur: its death is counted by down
		if err == nil && c.hello.Layout != p.layout {
			err = fmt.Errorf("restarted runner serves layout %+v, want %+v", c.hello.Layout, p.layout)
			c.close(time.Second)
		} else if err == nil {
			w.mu.Lock()
			w.cur, w.status.PID = c, c.pid
			installed = true
			w.mu.Unlock()
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			w.setState(device.RunnerStarting, "")
			// The gate runs while the runner is out of rotation; it is
			// pinged meanwhile.
			stopPings := p.keepPinging(c)
			err = w.runGate(ctx, gate)
			stopPings()
			if err != nil {
				kind = "gate"
				c.kill("gate", err.Error())
				<-c.dead
			}
		}
		cancel()
		if err == nil {
			// Failures stays until the runner has been up for the
			// stable uptime (watch resets it).
			w.setState(device.RunnerOK, "")
			p.log.Info("runner restarted", "runner", w.index, "pid", c.pid)
			p.putIdle(w)
			return c
		}
		if p.isClosed() {
			return nil
		}
		failures++
		w.mu.Lock()
		// A runner that died during its gate went through down, which
		// counted it by the cause of its death: not again as "gate".
		countedByDown := installed && w.cur != c
		w.cur, w.status.PID = nil, 0
		w.status.Failures = failures
		w.status.LastCause, w.status.LastCauseKind = err.Error(), kind
		if se := (*startError)(nil); errors.As(err, &se) {
			w.status.LastStderr = se.stderr
		}
		if !countedByDown {
			w.status.RestartsByCause[kind]++
		}
		w.mu.Unlock()
		p.log.Error("runner restart failed", "runner", w.index, "attempt", failures, "of", p.o.MaxRestarts, "err", err)
		if failures >= p.o.MaxRestarts {
			w.setState(device.RunnerFailed, fmt.Sprintf("%d consecutive failed restarts; last: %v", failures, err))
			p.log.Error("runner failed for good", "runner", w.index, "restarts", failures)
			return nil
		}
		w.setState(device.RunnerRestarting, "")
	}
}

func (p *Pool) removeIdle(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if x == w {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	p.notifyLocked()
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close stops every runner (CLOSE, then SIGKILL after 5 s), waits for the
// supervisors and releases the shared memory (a segment on loan, from
// PixelBuffer or a call, once it is given back). Calls in flight fail
// with device.ErrRestarting. It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.notifyLocked()
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range p.workers {
		w.mu.Lock()
		c := w.cur
		w.mu.Unlock()
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.close(5 * time.Second) }()
		}
	}
	wg.Wait()
	p.stopOnce.Do(func() { close(p.stop) })
	p.wg.Wait()
	// A segment on loan (a PixelBuffer not yet released, a call still
	// returning) stays mapped until it is given back: unmapping it would
	// turn its holder's next write into a SIGSEGV.
	p.segMu.Lock()
	var loaned []*segment
	for _, s := range p.segs {
		if s.loaned {
			loaned = append(loaned, s)
		} else {
			s.close()
		}
	}
	p.segs, p.free, p.segSize = loaned, nil, 0
	p.segMu.Unlock()
	return nil
}

// InPlace reports whether pv starts a pixel region of one of the pool's
// shared segments (an encoder wrote it there through PixelBuffer):
// Predict passes it to the runner without a copy.
func (p *Pool) InPlace(pv []float32) bool { return p.segmentOf(pv) != nil }

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
