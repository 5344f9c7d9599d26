// Package service is gr00tgw's serving core, without a network protocol:
// the one Request every front end (HTTP /predict and OIP in frontend/http
// and frontend/oip, ZeroMQ, openpi) translates its messages to, the
// prediction pipeline (decode → plugin.pre → encode → device lock → device
// → plugin.post, one function per stage, each timed once), the served set
// of embodiments with its reload and golden-checked warm-up, the device
// lock with its bounded queue, the lifecycle (starting, ready, draining,
// failed), OpenTelemetry spans and metrics, and errors classified once
// (*HandlerError: a status, a code and the field blamed) for the front
// ends to render in their wire formats.
//
// The service knows no model math. It drives three narrow consumer
// interfaces defined here — Encoder (frames + instruction →
// device.Inputs), Embodiment (state validation/normalisation before the
// device, action decoding after it) and device.Backend.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/record"
	"github.com/gr00tgw/gr00tgw/session"
)

// State is the service's lifecycle state.
type State int32

// Lifecycle states, in order.
const (
	StateStarting State = iota // loading and warming up the default embodiment
	StateReady                 // serving predictions
	StateDraining              // shutting down: new requests are refused
	StateFailed                // the start failed; nothing is served
)

// String is the state's name as /health and the gateway.state metric
// report it: starting, ready, draining, failed.
func (st State) String() string {
	switch st {
	case StateStarting:
		return "starting"
	case StateReady:
		return "ready"
	case StateDraining:
		return "draining"
	}
	return "failed"
}

// Protocol header names every front end and client shares.
const (
	// RequestIDHeader is echoed on every HTTP response; generated when
	// the request has none (or an unusable one).
	RequestIDHeader = "X-Request-ID"
	// TimeoutHeader lets a client ask for a shorter deadline than the
	// server's request_timeout: seconds ("2.5") or a Go duration
	// ("2500ms"). The gRPC-style "Grpc-Timeout" header ("250m", "3S") is
	// honoured too.
	TimeoutHeader = "X-Request-Timeout"
	// MIMEMsgpack is the msgpack media type accepted and produced by
	// /predict (application/x-msgpack and application/vnd.msgpack are
	// accepted too).
	MIMEMsgpack = "application/msgpack"
)

// Options configure New.
type Options struct {
	// Config is the effective configuration (the service does not listen:
	// front ends do).
	Config config.Config
	// Logger receives the lifecycle logs and boot landmarks; nil means
	// slog.Default().
	Logger *slog.Logger
	// TracerProvider creates the message and stage spans; nil means the
	// global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider records the gateway metrics; nil means the global
	// provider.
	MeterProvider metric.MeterProvider
	// Version is the gr00tgw build version reported by /info.
	Version string
	// Device labels the hardware in /health ("cpu:0"); "" means
	// "<backend>:0".
	Device string
}

// Core is the serving core. Create it with New (state starting), call
// Start to load and warm up, hand it to the front ends, and Shutdown it to
// drain them and close the backend. All methods are safe for concurrent
// use.
type Core struct {
	cfg    config.Config
	opts   Options
	log    *slog.Logger
	tracer trace.Tracer
	inst   *instruments

	state atomicState
	deps  atomic.Pointer[Deps]
	lock  deviceLock

	set      atomic.Pointer[servedSet] // the served embodiments (see served.go)
	setMu    sync.Mutex                // serialises writers of set
	reloadMu sync.Mutex                // one start-up/reload pass at a time
	bg       *tracker                  // background warm-ups, reloads, binding closes

	mu        sync.Mutex // guards admitting in-flight requests vs draining
	inflight  sync.WaitGroup
	inflightN atomic.Int64

	baseCtx    context.Context
	cancelBase context.CancelFunc

	closeOnce sync.Once
	closeErr  error

	sessions *session.Store      // per-robot RTC state (sessions.go)
	sessInst *sessionInstruments // its metrics

	protoOnce sync.Once         // the robot protocols' instruments (contract.go)
	proto     *protoInstruments // created on the first protocol message

	trust *trustInstruments // the safety gate's and recorder's metrics (safety.go)
	rec   *record.Recorder  // the flight recorder; nil when record.dir is empty (recorder.go)
}

// MeterName is the instrumentation scope of the service's metrics and
// spans (the front ends record theirs under it too).
const MeterName = "github.com/gr00tgw/gr00tgw/gateway"

// New builds a Core in the starting state.
func New(opts Options) (*Core, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	s := &Core{cfg: opts.Config, opts: opts, log: opts.Logger, bg: newTracker()}
	if s.log == nil {
		s.log = slog.Default()
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer(MeterName)
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	s.lock = newDeviceLock(opts.Config.QueueDepth, 1)
	inst, err := newInstruments(mp.Meter(MeterName), s)
	if err != nil {
		return nil, fmt.Errorf("service: metrics: %w", err)
	}
	s.inst = inst
	sc := opts.Config.Sessions
	if s.sessions, s.sessInst, err = newSessionStore(mp.Meter(MeterName), sc.Max, sc.TTL, sc.MaxBytes); err != nil {
		return nil, fmt.Errorf("service: sessions: %w", err)
	}
	if err := s.newTrust(mp.Meter(MeterName)); err != nil { // recorder.go
		return nil, err
	}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.state.Store(StateStarting)
	return s, nil
}

// Ready reports whether predictions are served.
func (s *Core) Ready() bool { return s.State() == StateReady }

// State is the current lifecycle state.
func (s *Core) State() State { return s.state.Load() }

// Config is the effective configuration the service runs with.
func (s *Core) Config() config.Config { return s.cfg }

// Logger is the service's logger (front ends log their requests to it).
func (s *Core) Logger() *slog.Logger { return s.log }

// BaseContext is the parent of every request context: it is cancelled
// when a shutdown's drain_timeout passes with requests in flight.
func (s *Core) BaseContext() context.Context { return s.baseCtx }

// QueueWaiting is the number of requests waiting for the device lock.
func (s *Core) QueueWaiting() int64 { return s.lock.waiting.Load() }

// Inflight is the number of admitted predictions (waiting or running).
func (s *Core) Inflight() int64 { return s.inflightN.Load() }

// DeviceSlots is the number of device calls that may run at once (1, or
// the runner pool's size).
func (s *Core) DeviceSlots() int { return cap(s.lock.sem) }

// Start loads the dependencies with load, then binds the embodiments of
// the catalog: the default embodiment first — opened, checked and warmed
// up on its demo (golden-gated) — after which the server is ready (health
// "ok"); then, in the background, every other embodiment the same way, each
// taking traffic once its own warm-up passed (requests for it answer 503
// "starting" until then; one that fails is refused with its reason and the
// others serve). Call Start once; cancel ctx to abandon a start (Shutdown
// waits for Start to return, bounded by drain_timeout). A failure to load
// or to serve the default embodiment leaves the server failed (health
// reports it) and returns an error naming the cause; everything opened is
// closed.
func (s *Core) Start(ctx context.Context, load LoadFunc) error {
	// Shutdown waits for a running Start like for an in-flight request, so
	// the backend is never closed under a warm-up prediction.
	s.mu.Lock()
	if s.state.Load() != StateStarting {
		s.mu.Unlock()
		return errors.New("start: server is not in the starting state (already started or shutting down)")
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()

	fail := func(deps *Deps, err error) error {
		s.state.Store(StateFailed)
		s.closeAll(deps)
		return fmt.Errorf("start: %w", err)
	}
	deps, err := load(ctx)
	if err != nil {
		s.state.Store(StateFailed)
		return fmt.Errorf("start: %w", err)
	}
	if deps == nil || deps.Backend == nil || deps.Catalog == nil {
		return fail(deps, errors.New("loader returned incomplete dependencies (need backend and catalog)"))
	}
	if deps.Model.ActionDim <= 0 {
		return fail(deps, errors.New("model action_dim is not set"))
	}
	if sl, ok := deps.Backend.(device.Slotted); ok && sl.Slots() > 1 {
		// One device call per runner at once (no predict holds the lock
		// before the server is ready).
		s.lock.sem = make(chan struct{}, sl.Slots())
	}
	s.deps.Store(deps)
	s.reloadMu.Lock()
	cands, err := deps.Catalog.Scan(ctx)
	if err != nil {
		s.reloadMu.Unlock()
		return fail(deps, err)
	}
	byTag := indexCandidates(cands)
	want := s.wanted(byTag)
	s.update(func(n *servedSet) {
		for _, t := range want {
			n.starting[t] = true
		}
	})
	def := want[0]
	// The default embodiment's warm-up is the device gate: with a
	// supervised backend (runner processes) it runs once on each runner,
	// not once through the pool and again per runner.
	if ch := s.bindWith(ctx, deps, def, byTag[def], s.gateDevices); ch.Change != ChangeAdded {
		s.reloadMu.Unlock()
		return fail(deps, fmt.Errorf("default embodiment %s: %s", def, ch.Reason))
	}
	if !s.state.CompareAndSwap(StateStarting, StateReady) {
		s.reloadMu.Unlock()
		return errors.New("start: server stopped while starting")
	}
	e := s.defaultEntry()
	s.log.Info("Application startup complete", "embodiment", def, "plugin", e.info.Plugin, "plugin_version", e.info.PluginVersion,
		"pending", len(want)-1)
	rest := want[1:]
	bctx, cancel := mergeCancel(context.WithoutCancel(ctx), s.baseCtx)
	s.bg.Go(func() {
		defer s.reloadMu.Unlock()
		defer cancel()
		for _, t := range rest {
			if bctx.Err() != nil {
				s.update(func(n *servedSet) { clear(n.starting) })
				return
			}
			s.bind(bctx, deps, t, byTag[t])
		}
		set := s.set.Load()
		s.log.Info("embodiments bound", "served", set.tags, "refused", sortedKeys(set.refused))
	})
	return nil
}

// WaitBound blocks until start-up has bound (or refused) every embodiment
// of the catalog, or ctx ends; it reports whether none is still starting.
func (s *Core) WaitBound(ctx context.Context) bool {
	for {
		if set := s.set.Load(); s.state.Load() != StateStarting && set != nil && len(set.starting) == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Shutdown drains the service: it refuses new requests (state draining),
// runs each of fronts (the front ends' own Shutdown: stop accepting, answer
// what is in flight) alongside, lets in-flight predictions finish (bounded
// by drain_timeout; past it their contexts are cancelled), then closes the
// backend and the other dependencies. It is idempotent; the front ends'
// errors are joined to its own.
func (s *Core) Shutdown(ctx context.Context, fronts ...func(context.Context) error) error {
	s.mu.Lock()
	s.state.Store(StateDraining)
	s.mu.Unlock()
	s.log.Info("draining", "inflight", s.inflightN.Load(), "drain_timeout", s.cfg.DrainTimeout.String())

	dctx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	defer cancel()
	frontErrs := make([]error, len(fronts))
	var fwg sync.WaitGroup
	for i, fn := range fronts {
		fwg.Add(1)
		go func() { defer fwg.Done(); frontErrs[i] = fn(dctx) }()
	}
	idle := make(chan struct{})
	go func() { s.inflight.Wait(); close(idle) }()
	var drainErr error
	select {
	case <-idle:
	case <-dctx.Done():
		drainErr = fmt.Errorf("shutdown: drain_timeout %v passed with %d requests in flight; cancelling them", s.cfg.DrainTimeout, s.inflightN.Load())
		s.log.Warn(drainErr.Error())
		s.cancelBase()
		select {
		case <-idle:
		case <-time.After(5 * time.Second):
		}
	}
	s.cancelBase()
	fwg.Wait()
	s.log.Info("Releasing backend")
	closeErr := s.closeAll(s.deps.Load())
	recErr := s.closeRecorder(dctx) // recorder.go: writes what is queued
	return errors.Join(drainErr, errors.Join(frontErrs...), closeErr, recErr)
}

// closeAll retires every served embodiment, waits (bounded) for the
// background work and the bindings' closes, then closes the backend and
// the other dependencies. It runs once.
func (s *Core) closeAll(d *Deps) error {
	s.closeOnce.Do(func() {
		s.bg.Close()
		s.cancelBase()
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// First the binds and reloads (cancelled above), so that none
		// installs a binding after the retirement below; then the closes.
		s.bg.Wait(wctx)
		if set := s.set.Load(); set != nil {
			for _, e := range set.entries {
				s.retire(e)
			}
		}
		var errs []error
		if !s.bg.Wait(wctx) {
			errs = append(errs, errors.New("close: background work (warm-ups, reloads, plugin closes) still running after 30s"))
		}
		if d != nil && d.Backend != nil {
			if err := d.Backend.Close(); err != nil {
				errs = append(errs, fmt.Errorf("backend close: %w", err))
			}
		}
		if d != nil && d.Close != nil {
			if err := d.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close: %w", err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// atomicState is a State read and written atomically.
type atomicState struct{ v atomic.Int32 }

func (a *atomicState) Load() State    { return State(a.v.Load()) }
func (a *atomicState) Store(st State) { a.v.Store(int32(st)) }
func (a *atomicState) CompareAndSwap(old, next State) bool {
	return a.v.CompareAndSwap(int32(old), int32(next))
}
