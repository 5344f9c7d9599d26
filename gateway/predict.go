package gateway

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/wire"
)

// MIMEMsgpack is the msgpack media type accepted and produced by /predict
// (application/x-msgpack and application/vnd.msgpack are accepted too).
const MIMEMsgpack = "application/msgpack"

func isMsgpack(ct string) bool {
	ct = strings.ToLower(ct)
	return strings.Contains(ct, "msgpack")
}

// wantsMsgpack reports whether the answer to c is msgpack: Accept names
// msgpack, or the request body was msgpack and Accept does not ask for
// JSON. Success and error bodies follow the same rule.
func wantsMsgpack(c *fiber.Ctx) bool {
	accept := strings.ToLower(c.Get(fiber.HeaderAccept))
	return strings.Contains(accept, "msgpack") ||
		(isMsgpack(c.Get(fiber.HeaderContentType)) && !strings.Contains(accept, "json"))
}

func notReady(st int32) *HandlerError {
	if st == stateDraining {
		return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 5,
			Err: errors.New("server is shutting down")}
	}
	if st == stateFailed {
		return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Err: errors.New("server failed to start")}
	}
	return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeStarting, RetryAfter: 5,
		Err: errors.New("model is starting (warm-up not complete)")}
}

// predict is POST /predict.
func (s *Server) predict(c *fiber.Ctx) (err error) {
	start := time.Now()
	rid, _ := c.Locals("rid").(string)
	o := PredictOptions{RequestID: rid, Protocol: "http", Route: c.Route().Path}
	tag := strings.TrimSpace(c.Get(EmbodimentHeader))
	defer func() { s.countPrediction(c.UserContext(), o, tag, err) }()
	// A body left unread (the request refused before admission) is
	// drained (discarded, up to drainMax) so that the client, still
	// writing it, reads the refusal instead of a reset; a larger one
	// closes the connection after the answer.
	read := false
	defer func() {
		if !read && c.Request().Header.ContentLength() != 0 {
			s.drainBody(c)
		}
	}()
	ctx, gone, release, err := s.admitHTTP(c)
	if err != nil {
		return err
	}
	defer release()

	reqMsgpack := isMsgpack(c.Get(fiber.HeaderContentType))
	var r *Request
	// The raw body (read only now that the request is admitted), not
	// c.Body(): under Immutable that is a copy, and the parsers copy every
	// value they keep.
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	read = true
	if len(body) == 0 {
		return schemaError("body", "empty body: send a /predict JSON or msgpack object")
	}
	if reqMsgpack {
		r, err = decodeMsgpack(body)
	} else {
		r, err = decodeJSON(body)
	}
	if err != nil {
		return err
	}
	parse := time.Since(start)
	if tag, err = routeTag(c.Get(EmbodimentHeader), r.Embodiment); err != nil {
		return err
	}
	r.Embodiment = tag
	resp, err := s.predictAdmitted(ctx, r, o, start)
	if err != nil {
		if gone.fired() {
			return errClientClosed
		}
		return err
	}
	resp.TimingMS.Parse = ms(parse)
	t := &resp.TimingMS
	c.Set("Server-Timing", fmt.Sprintf("parse;dur=%.3f, decode;dur=%.3f, plugin_pre;dur=%.3f, encode;dur=%.3f, queue;dur=%.3f, device;dur=%.3f, decode_actions;dur=%.3f, total;dur=%.3f",
		t.Parse, t.Decode, t.PluginPre, t.Encode, t.Queue, t.Device, t.DecodeActions, t.Total))
	c.Locals("logattrs", []any{"embodiment", resp.Embodiment, "seq_len", resp.SeqLen, "noise_source", resp.NoiseSource,
		"decode_ms", resp.TimingMS.Decode, "encode_ms", resp.TimingMS.Encode, "queue_ms", resp.TimingMS.Queue,
		"device_ms", resp.TimingMS.Device, "total_ms", resp.TimingMS.Total})

	if wantsMsgpack(c) {
		b, err := wire.Marshal(resp, wire.EncodingNPY)
		if err != nil {
			return fmt.Errorf("encode response: %w", err)
		}
		c.Set(fiber.HeaderContentType, MIMEMsgpack)
		return c.Send(b)
	}
	return c.JSON(resp)
}

func (s *Server) queueFull() *HandlerError {
	return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeQueueFull, RetryAfter: 1,
		Err: fmt.Errorf("device queue is full (%d requests in flight, queue_depth %d); retry later", s.inflightN.Load(), s.cfg.QueueDepth)}
}

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

// Predict serves one request of a front end other than HTTP /predict (the
// robot protocols): the lifecycle and admission checks (503 while not
// ready or past queue_depth), routing by req.Embodiment ("" the default),
// the whole pipeline and the device lock, under request_timeout and ctx.
// Every error is a *HandlerError (Status, Code, Field) the front end maps
// to its own wire format. Safe for concurrent use.
func (s *Server) Predict(ctx context.Context, req *Request, o PredictOptions) (_ *PredictResponse, err error) {
	start := time.Now()
	defer func() {
		tag := ""
		if req != nil {
			tag = req.Embodiment
		}
		s.countPrediction(ctx, o, tag, err)
	}()
	if st := s.state.Load(); st != stateReady {
		return nil, notReady(st)
	}
	if ok, err := s.admit(); !ok {
		if err != nil {
			return nil, s.queueFull()
		}
		return nil, notReady(s.state.Load())
	}
	defer s.done()
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
	resp, err := s.predictAdmitted(ctx, req, o, start)
	if err != nil {
		if errors.Is(caller.Err(), context.Canceled) && s.baseCtx.Err() == nil {
			return nil, errClientClosed // the front end's peer went away
		}
		return nil, classify(err, "request")
	}
	return resp, nil
}

// predictAdmitted routes an admitted request to its embodiment and runs it
// there, holding the binding for the whole call.
func (s *Server) predictAdmitted(ctx context.Context, r *Request, o PredictOptions, start time.Time) (*PredictResponse, error) {
	e, err := s.lookup(r.Embodiment)
	if err != nil {
		return nil, err
	}
	defer e.release()
	resp, err := s.runPredict(ctx, s.deps.Load(), e, r, o.RequestID, start, o.Protocol)
	if err != nil {
		return nil, err
	}
	resp.TimingMS.Total = ms(time.Since(start))
	resp.RequestID = o.RequestID
	return resp, nil
}

// routeTag picks the request's embodiment: the X-Embodiment header or the
// body's embodiment field ("" when neither names one: the default). Both
// set and different is the client's error.
func routeTag(header, body string) (string, error) {
	header = strings.TrimSpace(header)
	switch {
	case header != "" && body != "" && header != body:
		return "", invalid(fieldEmbodiment, "embodiment: header %s %q and body embodiment %q disagree", EmbodimentHeader, header, body)
	case header != "":
		return header, nil
	}
	return body, nil
}

// span starts a child span of ctx.
func (s *Server) span(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

func endSpan(sp trace.Span, err error) {
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// runPredict is the request path shared by POST /predict and warm-up:
// validate → decode → plugin.pre → encode → (device lock) device → plugin.post.
// Everything but the device call runs outside the lock.
//
// e is the embodiment's binding, held by the caller for the whole call.
// protocolWarmup is runPredict's protocol for the gateway's own warm-up and
// gate predictions: they wait for a device slot past queue_depth (a reload
// or a start under load is not refused as queue_full).
const protocolWarmup = "warmup"

func (s *Server) runPredict(ctx context.Context, deps *Deps, e *entry, r *Request, rid string, start time.Time, protocol string) (resp *PredictResponse, err error) {
	// A panic (a bug in the pipeline, an in-process embodiment or
	// backend) fails this prediction alone, whichever front end or
	// warm-up asked for it.
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, s.recovered("prediction", rid, v, "embodiment", e.tag, "protocol", protocol)
		}
	}()
	return s.predictOnce(ctx, deps, e, r, rid, start, protocol)
}

// predictOnce is runPredict without its panic recovery.
func (s *Server) predictOnce(ctx context.Context, deps *Deps, e *entry, r *Request, rid string, start time.Time, protocol string) (*PredictResponse, error) {
	info := e.info
	embAttrs := []attribute.KeyValue{
		attribute.String("embodiment", info.Name),
		attribute.String("plugin.name", info.Plugin),
		attribute.String("plugin.version", info.PluginVersion),
	}
	trace.SpanFromContext(ctx).SetAttributes(embAttrs...)
	mattrs := metric.WithAttributes(attribute.String("embodiment", info.Name), attribute.String("plugin_version", info.PluginVersion),
		attribute.String("protocol", protocol))
	stage := func(name string, d time.Duration) { s.inst.stage(ctx, name, d, mattrs) }
	var tm Timing

	// decode: validation, base64, image decode and the frame-size rules.
	t0 := time.Now()
	dctx, sp := s.span(ctx, "decode")
	v, err := validate(r, &info, &deps.Model)
	if err == nil {
		err = decodeFrames(v)
	}
	var dec *Decoded
	if err == nil {
		dec, err = e.b.Encoder.Decode(dctx, v.cams)
	}
	endSpan(sp, err)
	tm.Decode = ms(time.Since(t0))
	stage("decode", time.Since(t0))
	if err != nil {
		return nil, classify(err, "decode")
	}
	if err := ctx.Err(); err != nil {
		return nil, classify(err, "decode")
	}

	// plugin.pre: state validation and normalisation.
	t0 = time.Now()
	pctx, sp := s.span(ctx, "plugin.pre", embAttrs...)
	state, err := e.b.Embodiment.Pre(pctx, &PreInput{
		RequestID: rid, Embodiment: info.Name, Cameras: dec.Cameras, State: v.state, StateDtype: r.StateDtype,
		Instruction: r.Instruction,
	})
	endSpan(sp, err)
	s.pluginMetric(ctx, info, "pre", time.Since(t0), err, mattrs)
	tm.PluginPre = ms(time.Since(t0))
	if err != nil {
		return nil, classify(err, "plugin.pre")
	}

	// encode: eval chain, patching, prompt, tokenizer, mRoPE.
	t0 = time.Now()
	ectx, sp := s.span(ctx, "encode")
	enc, err := e.b.Encoder.Encode(ectx, dec, r.Instruction)
	if err == nil {
		sp.SetAttributes(attribute.Int("seq_len", enc.SeqLen), attribute.Int("prompt_tokens", enc.PromptTokens))
	}
	endSpan(sp, err)
	tm.Encode = ms(time.Since(t0))
	stage("encode", time.Since(t0))
	if err != nil {
		// The encoder names "instruction"; the client may have used an alias.
		var fe FieldError
		if r.InstructionField != "" && r.InstructionField != "instruction" && errors.As(err, &fe) && fe.Field() == "instruction" {
			err = NewFieldError(r.InstructionField, err)
		}
		return nil, classify(err, "encode")
	}
	if enc.Release != nil {
		defer enc.Release()
	}

	in := enc.Inputs
	in.State = state
	in.EmbodimentID = info.ID
	resp := &PredictResponse{StateDtype: r.StateDtype}
	if r.Noise != nil {
		in.Noise = r.Noise
		resp.NoiseSource = "client"
	} else {
		seed := deps.Model.DefaultSeed
		resp.NoiseSource = "seed"
		switch {
		case r.Seed != nil:
			seed = *r.Seed
		case deps.Model.RandomNoise && protocol != protocolWarmup:
			seed = rand.Uint64() // reported: the chunk can be replayed with it
			resp.NoiseSource = "random"
		}
		in.Seed = seed
		resp.Seed = &seed
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("seq_len", enc.SeqLen), attribute.String("noise.source", resp.NoiseSource))
	if o := r.Options; r.RTCPrev != nil && o != nil { // validated
		in.RTC = &device.RTC{Prev: r.RTCPrev, PrevRows: r.RTCPrevRows, Horizon: *o.Horizon, Overlap: *o.Overlap,
			Frozen: *o.Frozen, RampRate: *o.RampRate}
		resp.RTC = &RTCReport{Horizon: *o.Horizon, Overlap: *o.Overlap, Frozen: *o.Frozen, RampRate: *o.RampRate, Source: "request"}
		trace.SpanFromContext(ctx).SetAttributes(attribute.Int("rtc.overlap", *o.Overlap), attribute.Int("rtc.frozen", *o.Frozen),
			attribute.Float64("rtc.ramp_rate", *o.RampRate), attribute.String("rtc.source", "request"))
	}

	// queue + device.
	t0 = time.Now()
	qctx, sp := s.span(ctx, "queue", attribute.Int64("queue.waiting", s.lock.waiting.Load()))
	var release func()
	switch {
	case deps.gating: // a runner out of rotation: no client waits for it
		release = func() {}
	case protocol == protocolWarmup: // waits its turn, never refused as queue_full
		release, err = s.lock.acquireInternal(qctx)
	default:
		release, err = s.lock.acquire(qctx)
	}
	endSpan(sp, err)
	tm.Queue = ms(time.Since(t0))
	stage("queue", time.Since(t0))
	if errors.Is(err, errQueueFull) {
		return nil, s.queueFull()
	}
	if err != nil {
		return nil, classify(err, "queue")
	}
	t0 = time.Now()
	dvctx, sp := s.span(ctx, "device", attribute.Int("seq_len", enc.SeqLen))
	res, err := func() (*device.Result, error) {
		defer release() // held exactly for the device call, even if it panics
		return deps.Backend.Predict(dvctx, &in)
	}()
	dEnd := time.Now()
	if err == nil {
		err = checkResult(res, deps.Model.chunkHorizon(&info), deps.Model.ActionDim, info.ActionHorizon)
	}
	if err == nil {
		st := make([]stageTiming, len(res.Stages))
		for i, x := range res.Stages {
			st[i] = stageTiming{x.Name, x.Duration}
			stage("device."+x.Name, x.Duration)
		}
		stageSpans(dvctx, s.tracer, t0, st)
	}
	endSpan(sp, err)
	tm.Device = ms(dEnd.Sub(t0))
	stage("device", dEnd.Sub(t0))
	if err != nil {
		if ctx.Err() != nil {
			return nil, classify(ctx.Err(), "device")
		}
		return nil, classify(err, "device")
	}
	if len(res.Stages) > 0 {
		tm.DeviceStages = make(map[string]float64, len(res.Stages))
		for _, x := range res.Stages {
			tm.DeviceStages[x.Name] = ms(x.Duration)
		}
	}

	// plugin.post: slice, un-normalise, compose. The plugin sees the
	// model's whole chunk and returns its own horizon's rows.
	t0 = time.Now()
	octx, sp := s.span(ctx, "plugin.post", embAttrs...)
	acts, err := e.b.Embodiment.Post(octx, &PostInput{
		RequestID: rid, ActionPred: res.ActionPred, Horizon: res.Horizon, Dim: res.ActionDim, State: v.state, StateDtype: r.StateDtype,
	})
	tm.PluginPost = ms(time.Since(t0))
	s.pluginMetric(ctx, info, "post", time.Since(t0), err, mattrs)
	if err == nil {
		resp.Actions, err = reshapeActions(acts, info.ActionGroups, info.ActionHorizon)
	}
	if err == nil {
		// Never serve a NaN to a robot (msgpack and the robot protocols
		// would carry it; JSON would fail to encode it).
		if ferr := finiteActions(resp.Actions); ferr != nil {
			err = fmt.Errorf("plugin returned a non-finite action: %w", ferr)
		}
	}
	endSpan(sp, err)
	tm.DecodeActions = ms(time.Since(t0))
	stage("plugin.post", time.Since(t0))
	if err != nil {
		return nil, classify(err, "plugin.post")
	}

	resp.ActionHorizon = info.ActionHorizon
	resp.ActionKeys = make([]string, len(info.ActionGroups))
	resp.ActionDims = make(map[string]int, len(info.ActionGroups))
	valid := 0
	for i, g := range info.ActionGroups {
		resp.ActionKeys[i] = g.Key
		resp.ActionDims[g.Key] = g.Dim
		valid += g.Dim
	}
	resp.Embodiment = info.Name
	resp.EmbodimentID = info.ID
	resp.Version = deps.Model.Version
	resp.Model = s.cfg.ModelName
	resp.Layout = e.b.Layout.Name
	resp.Images = make(map[string]ImageReport, len(dec.Cameras))
	for _, cam := range dec.Cameras {
		resp.Images[cam.Key] = ImageReport{Frames: cam.Frames, ReceivedHW: [2]int{cam.Height, cam.Width}, VitGridTHW: enc.GridTHW[cam.Key]}
	}
	resp.SeqLen = enc.SeqLen
	resp.PromptTokens = enc.PromptTokens
	resp.Plugin = PluginReport{Name: info.Plugin, Version: info.PluginVersion}
	if r.ReturnNormalized {
		// The model-space chunk as denoised ([model horizon, action_dim],
		// as the reference server returns it) and the slice the plugin
		// decodes ([embodiment horizon, Σ action dims]).
		resp.ActionPredNormalized = rows(res.ActionPred, res.Horizon, res.ActionDim, 0, res.ActionDim)
		resp.ActionPredValidHD = rows(res.ActionPred, info.ActionHorizon, res.ActionDim, 0, min(valid, res.ActionDim))
	}
	tm.Total = ms(time.Since(start))
	resp.TimingMS = tm
	return resp, nil
}

func (s *Server) pluginMetric(ctx context.Context, info EmbodimentInfo, stage string, d time.Duration, err error, attrs metric.MeasurementOption) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	s.inst.pluginDur.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("plugin", info.Plugin),
		attribute.String("stage", stage), attribute.String("outcome", outcome)), attrs)
	s.inst.stage(ctx, "plugin."+stage, d, attrs)
}

// checkResult verifies the backend kept its contract: action_pred is the
// model's whole chunk [horizon, dim] (horizon: the model's denoised
// horizon), and the embodiment decodes no more than its first embHorizon
// rows (a reloaded plugin could declare more).
func checkResult(res *device.Result, horizon, dim, embHorizon int) error {
	if res == nil {
		return errors.New("backend returned no result")
	}
	if res.Horizon != horizon || res.ActionDim != dim || len(res.ActionPred) != res.Horizon*res.ActionDim {
		return fmt.Errorf("backend returned action_pred of %d values as [%d, %d], want [%d, %d]",
			len(res.ActionPred), res.Horizon, res.ActionDim, horizon, dim)
	}
	if embHorizon <= 0 || embHorizon > horizon {
		return fmt.Errorf("embodiment action horizon %d is outside the model's %d denoised steps", embHorizon, horizon)
	}
	for i, v := range res.ActionPred {
		if v-v != 0 { // NaN or ±Inf
			return fmt.Errorf("backend returned a non-finite action_pred[%d][%d] (%v)", i/res.ActionDim, i%res.ActionDim, v)
		}
	}
	return nil
}

// reshapeActions turns the plugin's flat per-group buffers into [H][D] rows
// of float64 (exact float32 values).
func reshapeActions(acts map[string][]float32, groups []Group, horizon int) (map[string][][]float64, error) {
	out := make(map[string][][]float64, len(groups))
	for _, g := range groups {
		buf, ok := acts[g.Key]
		if !ok {
			return nil, fmt.Errorf("plugin returned no action group %q", g.Key)
		}
		if len(buf) != horizon*g.Dim {
			return nil, fmt.Errorf("plugin returned %d values for action group %q, want %d×%d", len(buf), g.Key, horizon, g.Dim)
		}
		out[g.Key] = rows(buf, horizon, g.Dim, 0, g.Dim)
	}
	return out, nil
}

// admitHTTP is the admission of every HTTP predict route, before its body
// is read: 503 while not ready or past queue_depth, 413 from a
// Content-Length over max_body_bytes; then the request's deadline
// (requestDeadline) and the client-disconnect watch on its context.
// release (run once the answer is decided) stops the watch, cancels the
// context and frees the queue slot.
func (s *Server) admitHTTP(c *fiber.Ctx) (ctx context.Context, gone *clientWatch, release func(), err error) {
	if st := s.state.Load(); st != stateReady {
		return nil, nil, nil, notReady(st)
	}
	if n := int64(c.Request().Header.ContentLength()); n > int64(s.cfg.MaxBodyBytes) {
		return nil, nil, nil, s.errBodyTooLarge(n)
	}
	if ok, aerr := s.admit(); !ok {
		if aerr != nil {
			return nil, nil, nil, s.queueFull()
		}
		return nil, nil, nil, notReady(s.state.Load())
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), s.requestDeadline(c))
	ctx, gone = s.watchClient(ctx, c)
	return ctx, gone, func() { gone.stop(); cancel(); s.done() }, nil
}
