package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/gateway/secure"
	"github.com/gr00tgw/gr00tgw/wire"
)

// Lifecycle states.
const (
	stateStarting int32 = iota
	stateReady
	stateDraining
	stateFailed
)

func stateName(s int32) string {
	switch s {
	case stateStarting:
		return "starting"
	case stateReady:
		return "ready"
	case stateDraining:
		return "draining"
	}
	return "failed"
}

// RequestIDHeader is echoed on every response; generated when the request
// has none (or an unusable one).
const RequestIDHeader = "X-Request-ID"

// TimeoutHeader lets a client ask for a shorter deadline than the server's
// request_timeout: seconds ("2.5") or a Go duration ("2500ms"). The
// gRPC-style "Grpc-Timeout" header ("250m", "3S") is honoured too.
const TimeoutHeader = "X-Request-Timeout"

// Options configure New.
type Options struct {
	// Config is the effective configuration (addr is not used by the
	// Server itself: callers hand Serve a listener).
	Config config.Config
	// Logger receives request logs and boot landmarks; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider creates the server and stage spans; nil means the
	// global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider records the gateway metrics; nil means the global
	// provider.
	MeterProvider metric.MeterProvider
	// MetricsHandler, when set (and metrics are enabled), is served at
	// GET /metrics (see NewPrometheus).
	MetricsHandler http.Handler
	// Version is the gr00tgw build version reported by /info.
	Version string
	// Device labels the hardware in /health ("cpu:0"); "" means
	// "<backend>:0".
	Device string
	// Keys, when set (auth.api_keys_file), is required on every HTTP route
	// but the probes, /metrics and /admin/reload (OpenPath); the caller
	// reloads it. nil: no keys.
	Keys *secure.Keyring
}

// Server is one gr00tgw HTTP server. Create it with New, hand it a
// listener with Serve (it answers /health = starting at once), then call
// Start to load and warm up; Shutdown drains it. All methods are safe for
// concurrent use.
type Server struct {
	cfg    config.Config
	opts   Options
	log    *slog.Logger
	app    *fiber.App
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	inst   *instruments

	state atomic.Int32
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

	protoOnce sync.Once         // the robot protocols' instruments (frontend.go)
	proto     *protoInstruments // created on the first protocol message
}

// New builds a Server in the starting state. It does not listen.
func New(opts Options) (*Server, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: opts.Config, opts: opts, log: opts.Logger, bg: newTracker()}
	if s.log == nil {
		s.log = slog.Default()
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer("github.com/gr00tgw/gr00tgw/gateway")
	s.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	s.lock = newDeviceLock(opts.Config.QueueDepth, 1)
	inst, err := newInstruments(mp.Meter("github.com/gr00tgw/gr00tgw/gateway"), s)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	s.inst = inst
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.state.Store(stateStarting)

	s.app = fiber.New(fiber.Config{
		AppName:               "gr00tgw",
		Immutable:             true, // strings from the request outlive handlers (spans, metrics, logs)
		BodyLimit:             opts.Config.MaxBodyBytes,
		StreamRequestBody:     true, // /predict reads a body only once admitted (body.go)
		Concurrency:           opts.Config.MaxConnections,
		DisableStartupMessage: true,
		JSONEncoder:           marshalJSON,                // no \u003c for "<key>" in messages
		ReadTimeout:           opts.Config.RequestTimeout, // the whole request, body included
		WriteTimeout:          opts.Config.RequestTimeout + 30*time.Second,
		IdleTimeout:           75 * time.Second,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			s.renderError(c, err)
			return nil
		},
	})
	s.routes()
	return s, nil
}

// App returns the Fiber application (tests drive it with App().Test).
func (s *Server) App() *fiber.App { return s.app }

// Ready reports whether the server answers /predict.
func (s *Server) Ready() bool { return s.state.Load() == stateReady }

func (s *Server) routes() {
	s.app.Use(s.edge)
	s.app.Use(s.requireKey) // before every route, those mounted after New too (gateway/oip)
	s.app.Get("/health", s.health)
	s.app.Get("/v2/health/live", s.live)
	s.app.Get("/v2/health/ready", s.ready)
	s.app.Get("/info", s.info)
	s.app.Get("/demo", s.demo)
	s.app.Get("/v1/models", s.models)
	s.app.Post("/predict", s.predict)
	s.app.Post("/v1/predict", s.predict) // versioned spelling for OIP/KServe-style clients; same handler
	s.app.Get("/v2/models/:model", s.modelMetadata)
	s.app.Get("/v2/models/:model/ready", s.modelReady)
	s.app.Post("/admin/reload", s.adminReload)
	if s.cfg.Metrics.Enabled && s.opts.MetricsHandler != nil {
		s.app.Get("/metrics", adaptor.HTTPHandler(s.opts.MetricsHandler))
	}
}

// Serve answers HTTP on ln until Shutdown. It returns nil after a clean
// shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.app.Listener(ln)
	if err != nil && s.state.Load() == stateDraining {
		return nil
	}
	return err
}

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
func (s *Server) Start(ctx context.Context, load LoadFunc) error {
	// Shutdown waits for a running Start like for an in-flight request, so
	// the backend is never closed under a warm-up prediction.
	s.mu.Lock()
	if s.state.Load() != stateStarting {
		s.mu.Unlock()
		return errors.New("start: server is not in the starting state (already started or shutting down)")
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()

	fail := func(deps *Deps, err error) error {
		s.state.Store(stateFailed)
		s.closeAll(deps)
		return fmt.Errorf("start: %w", err)
	}
	deps, err := load(ctx)
	if err != nil {
		s.state.Store(stateFailed)
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
	if ch := s.bindWith(ctx, deps, def, byTag[def], s.gateDevices); ch.Change != "added" {
		s.reloadMu.Unlock()
		return fail(deps, fmt.Errorf("default embodiment %s: %s", def, ch.Reason))
	}
	if !s.state.CompareAndSwap(stateStarting, stateReady) {
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
func (s *Server) WaitBound(ctx context.Context) bool {
	for {
		if set := s.set.Load(); s.state.Load() != stateStarting && set != nil && len(set.starting) == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Shutdown stops accepting connections, lets in-flight requests finish
// (bounded by drain_timeout; past it their contexts are cancelled), then
// closes the backend and the other dependencies. It is idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.state.Store(stateDraining)
	s.mu.Unlock()
	s.log.Info("draining", "inflight", s.inflightN.Load(), "drain_timeout", s.cfg.DrainTimeout.String())

	dctx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	defer cancel()
	httpDone := make(chan error, 1)
	go func() {
		err := s.app.ShutdownWithContext(dctx)
		if err != nil && strings.Contains(err.Error(), "not running") {
			err = nil
		}
		httpDone <- err
	}()
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
	httpErr := <-httpDone
	s.log.Info("Releasing backend")
	closeErr := s.closeAll(s.deps.Load())
	return errors.Join(drainErr, httpErr, closeErr)
}

// closeAll retires every served embodiment, waits (bounded) for the
// background work and the bindings' closes, then closes the backend and
// the other dependencies. It runs once.
func (s *Server) closeAll(d *Deps) error {
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

// admit registers one in-flight predict. It refuses (nil, not ready) while
// the server is not ready, and (errQueueFull) when queue_depth+1 requests
// are already in flight: one can hold the device and queue_depth can wait
// for it, so a further request could only be refused at the lock after
// its decode and encode — refusing it first costs nothing.
func (s *Server) admit() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.Load() != stateReady {
		return false, nil
	}
	if s.inflightN.Load() >= int64(s.cfg.QueueDepth+cap(s.lock.sem)) {
		return false, errQueueFull
	}
	s.inflight.Add(1)
	s.inflightN.Add(1)
	return true, nil
}

func (s *Server) done() {
	s.inflightN.Add(-1)
	s.inflight.Done()
}

// edge is the one middleware: request id, server span, error rendering,
// metrics and the request log.
// next runs the rest of the chain, turning a panic (a gateway bug) into a
// 500 for this request alone: the handler's defers (admission, queue slot,
// device lock) have run by then, and the stack is logged.
func (s *Server) next(c *fiber.Ctx, rid string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = s.recovered("request handler", rid, v)
		}
	}()
	return c.Next()
}

// recovered logs a recovered panic of what (with its stack and attrs) and
// returns the 500 its request gets; the panic value stays in the log.
func (s *Server) recovered(what, rid string, v any, attrs ...any) *HandlerError {
	s.log.Error(what+" panicked (a bug); the request failed, the server goes on",
		append([]any{"request_id", rid, "panic", fmt.Sprint(v), "stack", string(debug.Stack())}, attrs...)...)
	return &HandlerError{Status: http.StatusInternalServerError, Code: CodeInternal,
		Err: fmt.Errorf("internal error: the gateway failed on this request (logged with request_id %s)", rid)}
}

func (s *Server) edge(c *fiber.Ctx) error {
	start := time.Now()
	rid := c.Get(RequestIDHeader)
	if !validRequestID(rid) {
		rid = newRequestID()
	}
	c.Locals("rid", rid)
	c.Set(RequestIDHeader, rid)

	ctx := s.prop.Extract(s.baseCtx, headerCarrier{&c.Context().Request.Header})
	ctx, span := s.tracer.Start(ctx, c.Method()+" "+c.Path(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", c.Method()),
			attribute.String("url.path", c.Path()), attribute.String("request.id", rid)))
	c.SetUserContext(ctx)

	if err := s.next(c, rid); err != nil {
		s.renderError(c, err)
	}
	status := c.Response().StatusCode()
	route := c.Route().Path
	if status == http.StatusNotFound && route == "/" && c.Path() != "/" {
		route = "unmatched"
	}
	if status == http.StatusUnauthorized && route == "/" && c.Path() != "/" {
		route = "unauthorized" // refused by requireKey before any route matched
	}
	span.SetName(c.Method() + " " + route)
	span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
	code, _ := c.Locals("errcode").(string)
	// Documented back-pressure (503 with Retry-After: queue full, starting,
	// draining) is not a server fault: Warn, not Error, and no error span.
	backpressure := status == http.StatusServiceUnavailable && len(c.Response().Header.Peek(fiber.HeaderRetryAfter)) > 0
	if status >= 500 && !backpressure {
		span.SetStatus(codes.Error, code)
	}
	span.End()

	d := time.Since(start)
	attrs := metric.WithAttributes(attribute.String("route", route), attribute.String("method", c.Method()),
		attribute.Int("status", status), attribute.String("code", code))
	s.inst.requests.Add(ctx, 1, attrs)
	s.inst.reqDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("route", route),
		attribute.String("method", c.Method()), attribute.Int("status", status)))

	level := slog.LevelInfo
	if route != "/predict" && route != "/admin/reload" && status < 400 {
		level = slog.LevelDebug
	}
	switch {
	case backpressure && route == "/v2/health/ready":
		level = slog.LevelDebug
	case backpressure:
		level = slog.LevelWarn
	case status >= 500:
		level = slog.LevelError
	}
	if s.log.Enabled(ctx, level) {
		args := []any{"request_id", rid, "method", c.Method(), "route", route, "status", status,
			"duration_ms", ms(d)}
		if sc := span.SpanContext(); sc.IsValid() {
			args = append(args, "trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
		}
		if code != "" {
			args = append(args, "code", code)
		}
		if label, ok := c.Locals("keylabel").(string); ok {
			args = append(args, "key", label) // the key file's label, never the key
		}
		if extra, ok := c.Locals("logattrs").([]any); ok {
			args = append(args, extra...)
		}
		if msg, _ := c.Locals("errmsg").(string); msg != "" {
			args = append(args, "err", msg)
		}
		s.log.Log(ctx, level, "request", args...)
	}
	return nil
}

// renderError writes err as the HTTP answer: {"error","code","field",
// "detail","request_id"} in JSON, or in msgpack for a client that speaks
// msgpack (wantsMsgpack), or text/plain for device failures (the reference
// server's 500 shape), with Retry-After when set.
func (s *Server) renderError(c *fiber.Ctx, err error) {
	he := classify(err, "request")
	rid, _ := c.Locals("rid").(string)
	if rid == "" {
		// Rejected before the middleware ran (fasthttp's body limit).
		if rid = c.Get(RequestIDHeader); !validRequestID(rid) {
			rid = newRequestID()
		}
		c.Set(RequestIDHeader, rid)
	}
	c.Locals("errcode", he.Code)
	c.Locals("errmsg", he.Err.Error())
	if he.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(he.RetryAfter))
	}
	if he.Status == http.StatusUnauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="gr00tgw"`)
	}
	c.Status(he.Status)
	if he.PlainText {
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		_ = c.SendString(he.Err.Error())
		return
	}
	msg := he.Err.Error()
	body := errorBody{Error: msg, Code: he.Code, Field: he.Field, Detail: msg, RequestID: rid}
	if wantsMsgpack(c) {
		if b, err := wire.Marshal(body, wire.EncodingNPY); err == nil {
			c.Set(fiber.HeaderContentType, MIMEMsgpack)
			_ = c.Send(b)
			return
		}
	}
	_ = c.JSON(body)
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.' || b == ':') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestDeadline is the server's request_timeout, shortened by the
// client's X-Request-Timeout or Grpc-Timeout header.
func (s *Server) requestDeadline(c *fiber.Ctx) time.Duration {
	d := s.cfg.RequestTimeout
	if h := c.Get(TimeoutHeader); h != "" {
		if v, ok := parseTimeout(h); ok && v < d {
			d = v
		}
	}
	if h := c.Get("Grpc-Timeout"); h != "" {
		if v, ok := parseGRPCTimeout(h); ok && v < d {
			d = v
		}
	}
	return d
}

func parseTimeout(h string) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if f, err := strconv.ParseFloat(h, 64); err == nil {
		if !(f > 0 && f <= 1e6) { // NaN too
			return 0, false
		}
		return time.Duration(f * float64(time.Second)), true
	}
	d, err := time.ParseDuration(h)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

func parseGRPCTimeout(h string) (time.Duration, bool) {
	if len(h) < 2 || len(h) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(h[:len(h)-1], 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	unit := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second,
		'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}[h[len(h)-1]]
	if unit == 0 || n > math.MaxInt64/int64(unit) { // 8 digits of hours overflow
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// constantTimeEqual compares a bearer token without leaking its length
// through timing beyond what subtle allows.
func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// marshalJSON is json.Marshal without HTML escaping: bodies are JSON for
// API clients, not HTML, and a message like `send "Authorization: Bearer
// <key>"` should read as written (Python's json, the reference server's,
// does not escape either).
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
