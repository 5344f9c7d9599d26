// Package httpfront is gr00tgw's HTTP front end: the routes of the
// reference GR00T N1.7 server (POST /predict, GET /health, /info, /demo,
// /v1/models) plus OIP-style health and model metadata (/v2/health/live,
// /v2/health/ready, /v2/models/{name}[/ready]), Prometheus metrics
// (/metrics) and an authenticated plugin reload (POST /admin/reload),
// around a service.Core.
//
// It owns what is HTTP: the Fiber app, JSON and msgpack bodies, the
// request id, deadline and API-key headers, admission before a body is
// read, client-disconnect watching, the server span, the request metrics
// and log, and rendering the service's errors (once, at the edge). Other
// HTTP prediction protocols mount on it with PredictHandler (frontend/oip).
package httpfront

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
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
	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

// Name is the front end's name (Server.Name).
const Name = "http"

// Options configure New.
type Options struct {
	// TracerProvider creates the server spans; nil means the global
	// provider.
	TracerProvider trace.TracerProvider
	// MeterProvider records gateway.requests and gateway.request.duration;
	// nil means the global provider.
	MeterProvider metric.MeterProvider
	// MetricsHandler, when set (and metrics are enabled), is served at
	// GET /metrics (see NewPrometheus).
	MetricsHandler http.Handler
	// Keys, when set (auth.api_keys_file), is required on every HTTP route
	// but the probes, /metrics and /admin/reload (OpenPath); the caller
	// reloads it. nil: no keys.
	Keys *secure.Keyring
}

// Server is the HTTP front end of one service.Core. Create it with New,
// mount further routes on App (frontend/oip), hand it a listener with
// Serve (it answers /health = starting at once, while the core starts),
// and stop it with Shutdown (alongside the core's drain: the core's
// Shutdown takes it). Safe for concurrent use.
type Server struct {
	core   *service.Core
	cfg    config.Config
	opts   Options
	log    *slog.Logger
	app    *fiber.App
	tracer trace.Tracer
	prop   propagation.TextMapPropagator

	requests    metric.Int64Counter
	reqDuration metric.Float64Histogram
}

// New builds the HTTP front end of core. It does not listen.
func New(core *service.Core, opts Options) (*Server, error) {
	s := &Server{core: core, cfg: core.Config(), opts: opts, log: core.Logger()}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer(service.MeterName)
	s.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(service.MeterName)
	var err error
	if s.requests, err = m.Int64Counter("gateway.requests",
		metric.WithDescription("HTTP requests by route, status and error code")); err != nil {
		return nil, fmt.Errorf("httpfront: metrics: %w", err)
	}
	if s.reqDuration, err = m.Float64Histogram("gateway.request.duration", metric.WithUnit("s"),
		metric.WithDescription("HTTP request wall time by route and status"), service.SecondsBuckets); err != nil {
		return nil, fmt.Errorf("httpfront: metrics: %w", err)
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "gr00tgw",
		Immutable:             true, // strings from the request outlive handlers (spans, metrics, logs)
		BodyLimit:             s.cfg.MaxBodyBytes,
		StreamRequestBody:     true, // /predict reads a body only once admitted (body.go)
		Concurrency:           s.cfg.MaxConnections,
		DisableStartupMessage: true,
		JSONEncoder:           marshalJSON,          // no \u003c for "<key>" in messages
		ReadTimeout:           s.cfg.RequestTimeout, // the whole request, body included
		WriteTimeout:          s.cfg.RequestTimeout + 30*time.Second,
		IdleTimeout:           75 * time.Second,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			s.renderError(c, err)
			return nil
		},
	})
	s.routes()
	return s, nil
}

// App returns the Fiber application: front ends mount their routes on it
// before Serve; tests drive it with App().Test.
func (s *Server) App() *fiber.App { return s.app }

// Service is the core the front end serves.
func (s *Server) Service() *service.Core { return s.core }

// Name is "http".
func (s *Server) Name() string { return Name }

func (s *Server) routes() {
	s.app.Use(s.edge)
	s.app.Use(s.requireKey) // before every route, those mounted after New too (frontend/oip)
	s.app.Get("/health", s.health)
	s.app.Get("/v2/health/live", s.live)
	s.app.Get("/v2/health/ready", s.ready)
	s.app.Get("/info", s.info)
	s.app.Get("/demo", s.demo)
	s.app.Get("/v1/models", s.models)
	predict := s.PredictHandler(predictFrontEnd)
	s.app.Post("/predict", predict)
	s.app.Post("/v1/predict", predict) // versioned spelling for OIP/KServe-style clients; same handler
	s.app.Get("/v2/models/:model", s.modelMetadata)
	s.app.Get("/v2/models/:model/ready", s.modelReady)
	s.app.Post("/admin/reload", s.adminReload)
	s.app.Delete("/v1/sessions/:id", s.deleteSession)
	if s.cfg.Metrics.Enabled && s.opts.MetricsHandler != nil {
		s.app.Get("/metrics", adaptor.HTTPHandler(s.opts.MetricsHandler))
	}
}

// Serve answers HTTP on ln until Shutdown. It returns nil after a clean
// shutdown (once the core drains).
func (s *Server) Serve(ln net.Listener) error {
	err := s.app.Listener(ln)
	if err != nil && s.core.State() == service.StateDraining {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and waits for the open ones to
// finish their requests, bounded by ctx. Run it alongside the core's drain
// (service.Core.Shutdown(ctx, srv.Shutdown)), which refuses new
// predictions and cancels the ones in flight past drain_timeout.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.app.ShutdownWithContext(ctx)
	if err != nil && strings.Contains(err.Error(), "not running") {
		err = nil
	}
	return err
}

// next runs the rest of the chain, turning a panic (a gateway bug) into a
// 500 for this request alone: the handler's defers (admission, queue slot,
// device lock) have run by then, and the stack is logged.
func (s *Server) next(c *fiber.Ctx, rid string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = s.core.Recovered("request handler", rid, v)
		}
	}()
	return c.Next()
}

// edge is the one middleware: request id, server span, error rendering,
// metrics and the request log.
func (s *Server) edge(c *fiber.Ctx) error {
	start := time.Now()
	rid := c.Get(service.RequestIDHeader)
	if !validRequestID(rid) {
		rid = service.NewRequestID()
	}
	c.Locals("rid", rid)
	c.Set(service.RequestIDHeader, rid)

	ctx := s.prop.Extract(s.core.BaseContext(), headerCarrier{&c.Context().Request.Header})
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
	s.requests.Add(ctx, 1, metric.WithAttributes(attribute.String("route", route), attribute.String("method", c.Method()),
		attribute.Int("status", status), attribute.String("code", code)))
	s.reqDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("route", route),
		attribute.String("method", c.Method()), attribute.Int("status", status)))
	s.logRequest(c, ctx, span, rid, route, status, code, backpressure, d)
	return nil
}

// logRequest writes the request log line: Info for predictions and
// reloads, Debug for other successes and the readiness probe's
// back-pressure, Warn for back-pressure, Error for server faults.
func (s *Server) logRequest(c *fiber.Ctx, ctx context.Context, span trace.Span, rid, route string, status int, code string, backpressure bool, d time.Duration) {
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
	if !s.log.Enabled(ctx, level) {
		return
	}
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

// classify maps an error to the service's HandlerError, Fiber's own
// errors (404, 405, 413 of the body limit, …) included.
func classify(err error) *service.HandlerError {
	var fbe *fiber.Error
	if !errors.As(err, &fbe) {
		return service.Classify(err, "request")
	}
	code := service.CodeInternal
	switch fbe.Code {
	case http.StatusRequestEntityTooLarge:
		code = service.CodeTooLarge
	case http.StatusNotFound:
		code = service.CodeNotFound
	case http.StatusMethodNotAllowed:
		code = service.CodeMethod
	case http.StatusUnsupportedMediaType:
		code = service.CodeUnsupported
	default:
		if fbe.Code < 500 {
			code = service.CodeInvalid
		}
	}
	return &service.HandlerError{Status: fbe.Code, Code: code, Err: errors.New(fbe.Message)}
}

// renderError writes err as the HTTP answer: {"error","code","field",
// "detail","request_id"} in JSON, or in msgpack for a client that speaks
// msgpack (wantsMsgpack), or text/plain for device failures (the reference
// server's 500 shape), with Retry-After when set.
func (s *Server) renderError(c *fiber.Ctx, err error) {
	he := classify(err)
	rid, _ := c.Locals("rid").(string)
	if rid == "" {
		// Rejected before the middleware ran (fasthttp's body limit).
		if rid = c.Get(service.RequestIDHeader); !validRequestID(rid) {
			rid = service.NewRequestID()
		}
		c.Set(service.RequestIDHeader, rid)
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
	body := he.Body(rid)
	if wantsMsgpack(c) {
		if b, err := wire.Marshal(body, wire.EncodingNPY); err == nil {
			c.Set(fiber.HeaderContentType, service.MIMEMsgpack)
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

// requestDeadline is the server's request_timeout, shortened by the
// client's X-Request-Timeout or Grpc-Timeout header.
func (s *Server) requestDeadline(c *fiber.Ctx) time.Duration {
	d := s.cfg.RequestTimeout
	if h := c.Get(service.TimeoutHeader); h != "" {
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

// ms is a duration in milliseconds, rounded to microseconds.
func ms(d time.Duration) float64 { return math.Round(d.Seconds()*1e6) / 1e3 }
