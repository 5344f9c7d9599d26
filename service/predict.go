package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The service's entry points for a prediction: admission, routing to the
// embodiment, the predictions metric. Predict is the whole of it for the
// robot protocols; an HTTP front end admits first (before it reads the
// body), then runs the admitted request (Admit, Run).

// PredictOptions say where a prediction comes from.
type PredictOptions struct {
	// RequestID names the request in logs, spans and the response; ""
	// generates one.
	RequestID string
	// Protocol labels its metrics and spans: "http", "oip", "zmq", "openpi".
	Protocol string
	// Route labels the predictions metric: the HTTP route, or the
	// protocol's endpoint ("get_action", "infer"); "" is Protocol.
	Route string
	// Timeout, when positive and below request_timeout, shortens the
	// request's deadline.
	Timeout time.Duration
}

// Predict serves one request of a front end that admits and runs it in
// one call (the robot protocols): the lifecycle and admission checks (503
// while not ready or past queue_depth), routing by req.Embodiment (""
// the default), the whole pipeline and the device lock, under
// request_timeout and ctx. Every error is a *HandlerError (Status, Code,
// Field) the front end maps to its own wire format. Safe for concurrent
// use.
func (s *Core) Predict(ctx context.Context, req *Request, o PredictOptions) (_ *PredictResponse, err error) {
	start := time.Now()
	defer func() {
		tag := ""
		if req != nil {
			tag = req.Embodiment
		}
		s.CountPrediction(ctx, o, tag, err)
	}()
	if err := s.CheckReady(); err != nil {
		return nil, err
	}
	done, err := s.Admit()
	if err != nil {
		return nil, err
	}
	defer done()
	if o.RequestID == "" {
		o.RequestID = newRequestID()
	}
	d := s.cfg.RequestTimeout
	if o.Timeout > 0 && o.Timeout < d {
		d = o.Timeout
	}
	caller := ctx
	ctx, cancel := mergeCancel(ctx, s.baseCtx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, d)
	defer cancelT()
	resp, err := s.Run(ctx, req, o, start)
	if err != nil {
		if errors.Is(caller.Err(), context.Canceled) && s.baseCtx.Err() == nil {
			return nil, ErrClientClosed // the front end's peer went away
		}
		return nil, classify(err, "request")
	}
	return resp, nil
}

// CheckReady is nil while the service is ready, else the 503 a
// prediction gets (starting, draining or failed).
func (s *Core) CheckReady() error {
	if st := s.state.Load(); st != StateReady {
		return notReady(st)
	}
	return nil
}

// Admit registers one in-flight prediction; call done once its answer is
// decided. It refuses (503 notReady) while the service is not ready, and
// (503 queue_full) when queue_depth+slots requests are already in flight:
// each slot can hold the device and queue_depth can wait for it, so a
// further request could only be refused at the lock after its decode and
// encode — refusing it first costs nothing.
func (s *Core) Admit() (done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.Load() != StateReady {
		return nil, notReady(s.state.Load())
	}
	if s.inflightN.Load() >= int64(s.cfg.QueueDepth+cap(s.lock.sem)) {
		return nil, s.queueFull()
	}
	s.inflight.Add(1)
	s.inflightN.Add(1)
	return func() {
		s.inflightN.Add(-1)
		s.inflight.Done()
	}, nil
}

// Run routes an admitted request to its embodiment and runs the pipeline
// there, holding the binding for the whole call; start is when the
// request arrived (timing_ms.total counts from it). ctx carries the
// request's deadline.
func (s *Core) Run(ctx context.Context, r *Request, o PredictOptions, start time.Time) (*PredictResponse, error) {
	e, err := s.lookup(r.Embodiment)
	if err != nil {
		return nil, err
	}
	defer e.release()
	resp, err := s.runPredict(ctx, s.deps.Load(), e, r, o.RequestID, start, o.Protocol)
	if err != nil {
		return nil, err
	}
	resp.RequestID = o.RequestID
	return resp, nil
}

func notReady(st State) *HandlerError {
	switch st {
	case StateDraining:
		return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 5,
			Err: errors.New("server is shutting down")}
	case StateFailed:
		return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Err: errors.New("server failed to start")}
	}
	return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeStarting, RetryAfter: 5,
		Err: errors.New("model is starting (warm-up not complete)")}
}

func (s *Core) queueFull() *HandlerError {
	return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeQueueFull, RetryAfter: 1,
		Err: fmt.Errorf("device queue is full (%d requests in flight, queue_depth %d); retry later", s.inflightN.Load(), s.cfg.QueueDepth)}
}

// Recovered logs a recovered panic of what (with its stack and attrs) and
// returns the 500 its request gets; the panic value stays in the log.
func (s *Core) Recovered(what, rid string, v any, attrs ...any) *HandlerError {
	return s.recovered(what, rid, v, attrs...)
}

func (s *Core) recovered(what, rid string, v any, attrs ...any) *HandlerError {
	s.log.Error(what+" panicked (a bug); the request failed, the server goes on",
		append([]any{"request_id", rid, "panic", fmt.Sprint(v), "stack", string(debug.Stack())}, attrs...)...)
	return &HandlerError{Status: http.StatusInternalServerError, Code: CodeInternal,
		Err: fmt.Errorf("internal error: the gateway failed on this request (logged with request_id %s)", rid)}
}

// NewRequestID returns a fresh request id (what X-Request-ID gets when a
// request sends none).
func NewRequestID() string { return newRequestID() }

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ModelTag resolves a /v2/models/{name} name to the tag of the served
// embodiment it addresses: the model's own names (model_name,
// nvidia/GR00T-N1.7-3B, GR00T-N1.7-3B) address the default embodiment,
// any other name is an embodiment tag. Errors: 503 while the server or the
// embodiment is starting, 404 (field "model") for a name that is neither;
// the tag the name would address is returned with them (it labels the
// refusal's metric).
func (s *Core) ModelTag(name string) (string, error) {
	e, err := s.modelEntry(name)
	if err != nil {
		return s.modelTag(name), err
	}
	return e.tag, nil
}

// Version is the gr00tgw build version the server reports (Options.Version).
func (s *Core) Version() string { return s.opts.Version }

// CountPrediction records one prediction attempt of any outcome in
// gateway.predictions: protocol, route (the HTTP route or the protocol's
// endpoint), embodiment (embodimentLabel) and the answer's error code (""
// when served).
func (s *Core) CountPrediction(ctx context.Context, o PredictOptions, tag string, err error) {
	code := ""
	if err != nil {
		code = classify(err, "request").Code
	}
	route := o.Route
	if route == "" {
		route = o.Protocol
	}
	s.inst.predictions.Add(ctx, 1, metric.WithAttributes(attribute.String("protocol", o.Protocol),
		attribute.String("route", route), attribute.String("embodiment", s.embodimentLabel(tag)), attribute.String("code", code)))
}

// embodimentLabel bounds the embodiment label's values to the tags the
// server knows (served, starting or refused): "" is the default
// embodiment, any other name a client sent is "unknown".
func (s *Core) embodimentLabel(tag string) string {
	if tag == "" {
		return s.cfg.Embodiment
	}
	set := s.set.Load()
	if set == nil {
		if tag == s.cfg.Embodiment {
			return tag
		}
		return "unknown"
	}
	if _, ok := set.entries[tag]; ok {
		return tag
	}
	if _, ok := set.refused[tag]; ok || set.starting[tag] || tag == s.cfg.Embodiment {
		return tag
	}
	return "unknown"
}
