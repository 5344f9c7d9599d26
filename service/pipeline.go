package service

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/gr00tgw/gr00tgw/device"
)

// The request path shared by every front end and the warm-up:
// validate+decode → plugin.pre → encode → (device lock) device →
// plugin.post, one function per stage. Everything but the device call runs
// outside the lock. Each stage is timed once: that one duration is the
// response's timing_ms entry and the gateway.stage.duration sample.

// protocolWarmup is the protocol of the service's own warm-up and gate
// predictions: they wait for a device slot past queue_depth (a reload or a
// start under load is not refused as queue_full).
const protocolWarmup = "warmup"

// prediction is one request on its way through the stages.
type prediction struct {
	s        *Core
	ctx      context.Context // the request's, carrying its server span
	deps     *Deps
	e        *entry // held by the caller for the whole call
	info     EmbodimentInfo
	r        *Request
	rid      string
	protocol string
	embAttrs []attribute.KeyValue     // span attributes naming the plugin
	mattrs   metric.MeasurementOption // metric attributes: embodiment, plugin_version, protocol

	tm    Timing
	v     *validated
	dec   *Decoded
	state []float32 // plugin.pre's normalised state
	enc   *Encoded
	in    device.Inputs
	res   *device.Result
	resp  *PredictResponse
	rtc   *rtcPlan   // real-time chunking and the session (sessions.go)
	gated gateResult // what the safety gate did (service/safety.go)
}

// stage runs fn in a child span called name and times it once: the
// duration is recorded in gateway.stage.duration and returned.
func (p *prediction) stage(name string, fn func(ctx context.Context, sp trace.Span) error, attrs ...attribute.KeyValue) (time.Duration, error) {
	t0 := time.Now()
	ctx, sp := p.s.tracer.Start(p.ctx, name, trace.WithAttributes(attrs...))
	err := fn(ctx, sp)
	endSpan(sp, err)
	d := time.Since(t0)
	p.s.inst.stage(p.ctx, name, d, p.mattrs)
	return d, err
}

func endSpan(sp trace.Span, err error) {
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// runPredict runs r on e's binding; a panic (a bug in the pipeline, an
// in-process embodiment or backend) fails this prediction alone, whichever
// front end or warm-up asked for it.
func (s *Core) runPredict(ctx context.Context, deps *Deps, e *entry, r *Request, rid string, start time.Time, protocol string) (resp *PredictResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, s.recovered("prediction", rid, v, "embodiment", e.tag, "protocol", protocol)
		}
	}()
	p := &prediction{s: s, ctx: ctx, deps: deps, e: e, info: e.info, r: r, rid: rid, protocol: protocol}
	resp, err = p.run(start)
	p.record(start, resp, err) // service/recorder.go
	return resp, err
}

// run is the pipeline: each stage's error is classified once, naming the
// stage.
func (p *prediction) run(start time.Time) (*PredictResponse, error) {
	info := &p.info
	p.embAttrs = []attribute.KeyValue{
		attribute.String("embodiment", info.Name),
		attribute.String("plugin.name", info.Plugin),
		attribute.String("plugin.version", info.PluginVersion),
	}
	trace.SpanFromContext(p.ctx).SetAttributes(p.embAttrs...)
	p.mattrs = metric.WithAttributes(attribute.String("embodiment", info.Name), attribute.String("plugin_version", info.PluginVersion),
		attribute.String("protocol", p.protocol))

	if err := p.decode(); err != nil {
		return nil, classify(err, "decode")
	}
	if err := p.ctx.Err(); err != nil {
		return nil, classify(err, "decode")
	}
	if err := p.pre(); err != nil {
		return nil, classify(err, "plugin.pre")
	}
	if err := p.reencode(); err != nil { // rtc.mode reencode (sessions.go)
		return nil, classify(err, "plugin.reencode")
	}
	if err := p.encode(); err != nil {
		return nil, classify(err, "encode")
	}
	if p.enc.Release != nil {
		defer p.enc.Release()
	}
	p.inputs()
	if stage, err := p.device(); err != nil {
		return nil, classify(err, stage)
	}
	if err := p.post(); err != nil {
		return nil, classify(err, "plugin.post")
	}
	if err := p.gate(); err != nil { // service/safety.go
		return nil, classify(err, "safety")
	}
	p.report()
	p.storeSession(start)
	p.tm.Total = ms(time.Since(start))
	p.resp.TimingMS = p.tm
	return p.resp, nil
}

// decode is validation, base64, image decode and the frame-size rules.
func (p *prediction) decode() error {
	d, err := p.stage("decode", func(ctx context.Context, _ trace.Span) error {
		v, err := validate(p.r, &p.info, &p.deps.Model)
		if err != nil {
			return err
		}
		if err := p.resolveRTC(); err != nil {
			return err
		}
		if err := decodeFrames(v); err != nil {
			return err
		}
		p.v = v
		p.dec, err = p.e.b.Encoder.Decode(ctx, v.cams)
		return err
	})
	p.tm.Decode = ms(d)
	return err
}

// pre is plugin.pre: state validation and normalisation.
func (p *prediction) pre() error {
	d, err := p.stage("plugin.pre", func(ctx context.Context, _ trace.Span) error {
		var err error
		t0 := time.Now()
		p.state, err = p.e.b.Embodiment.Pre(ctx, &PreInput{
			RequestID: p.rid, Embodiment: p.info.Name, Cameras: p.dec.Cameras, State: p.v.state, StateDtype: p.r.StateDtype,
			Instruction: p.r.Instruction,
		})
		p.pluginMetric("pre", time.Since(t0), err)
		return err
	}, p.embAttrs...)
	p.tm.PluginPre = ms(d)
	return err
}

// encode is the eval chain, patching, prompt, tokenizer and mRoPE.
func (p *prediction) encode() error {
	d, err := p.stage("encode", func(ctx context.Context, sp trace.Span) error {
		var err error
		p.enc, err = p.e.b.Encoder.Encode(ctx, p.dec, p.r.Instruction)
		if err == nil {
			sp.SetAttributes(attribute.Int("seq_len", p.enc.SeqLen), attribute.Int("prompt_tokens", p.enc.PromptTokens))
		}
		return err
	})
	p.tm.Encode = ms(d)
	if err != nil {
		// The encoder names "instruction"; the client may have used an alias.
		var fe FieldError
		if f := p.r.InstructionField; f != "" && f != "instruction" && errors.As(err, &fe) && fe.Field() == "instruction" {
			err = NewFieldError(f, err)
		}
	}
	return err
}

// inputs completes the device inputs: state, embodiment slot, the noise
// (the client's, its seed, the default seed or a random one) and
// real-time chunking; the response records where the noise came from.
func (p *prediction) inputs() {
	r, model := p.r, &p.deps.Model
	p.in = p.enc.Inputs
	p.in.State = p.state
	p.in.EmbodimentID = p.info.ID
	p.resp = &PredictResponse{StateDtype: r.StateDtype}
	if r.Noise != nil {
		p.in.Noise = r.Noise
		p.resp.NoiseSource = "client"
	} else {
		seed := model.DefaultSeed
		p.resp.NoiseSource = "seed"
		switch {
		case r.Seed != nil:
			seed = *r.Seed
		case model.RandomNoise && p.protocol != protocolWarmup:
			seed = rand.Uint64() // reported: the chunk can be replayed with it
			p.resp.NoiseSource = "random"
		}
		p.in.Seed = seed
		p.resp.Seed = &seed
	}
	span := trace.SpanFromContext(p.ctx)
	span.SetAttributes(attribute.Int("seq_len", p.enc.SeqLen), attribute.String("noise.source", p.resp.NoiseSource))
	p.applyRTC(span)
}

// device waits for a device slot (stage "queue") and runs the backend
// holding it (stage "device"); it returns the failing stage's name.
func (p *prediction) device() (string, error) {
	s, deps := p.s, p.deps
	var release func()
	d, err := p.stage("queue", func(ctx context.Context, _ trace.Span) error {
		var err error
		switch {
		case deps.gating: // a runner out of rotation: no client waits for it
			release = func() {}
		case p.protocol == protocolWarmup: // waits its turn, never refused as queue_full
			release, err = s.lock.acquireInternal(ctx)
		default:
			release, err = s.lock.acquire(ctx)
		}
		return err
	}, attribute.Int64("queue.waiting", s.lock.waiting.Load()))
	p.tm.Queue = ms(d)
	if errors.Is(err, errQueueFull) {
		return "queue", s.queueFull()
	}
	if err != nil {
		return "queue", err
	}

	// Not p.stage: the device's time ends with the backend's call, before
	// the result checks, and its own stages become child spans.
	t0 := time.Now()
	dctx, sp := s.tracer.Start(p.ctx, "device", trace.WithAttributes(attribute.Int("seq_len", p.enc.SeqLen)))
	res, err := func() (*device.Result, error) {
		defer release() // held exactly for the device call, even if it panics
		return deps.Backend.Predict(dctx, &p.in)
	}()
	dd := time.Since(t0)
	if err == nil {
		err = checkResult(res, deps.Model.ChunkHorizon(&p.info), deps.Model.ActionDim, p.info.ActionHorizon)
	}
	if err == nil {
		t := t0
		for _, x := range res.Stages {
			s.inst.stage(p.ctx, "device."+x.Name, x.Duration, p.mattrs)
			_, csp := s.tracer.Start(dctx, "device."+x.Name, trace.WithTimestamp(t))
			t = t.Add(x.Duration)
			csp.End(trace.WithTimestamp(t))
		}
	}
	endSpan(sp, err)
	p.tm.Device = ms(dd)
	s.inst.stage(p.ctx, "device", dd, p.mattrs)
	if err != nil {
		if cerr := p.ctx.Err(); cerr != nil {
			return "device", cerr
		}
		return "device", err
	}
	if len(res.Stages) > 0 {
		p.tm.DeviceStages = make(map[string]float64, len(res.Stages))
		for _, x := range res.Stages {
			p.tm.DeviceStages[x.Name] = ms(x.Duration)
		}
	}
	p.res = res
	return "", nil
}

// post is plugin.post: slice, un-normalise, compose. The plugin sees the
// model's whole chunk and returns its own horizon's rows; a non-finite
// action is refused (never served to a robot: msgpack and the robot
// protocols would carry it; JSON would fail to encode it).
func (p *prediction) post() error {
	res := p.res
	d, err := p.stage("plugin.post", func(ctx context.Context, _ trace.Span) error {
		t0 := time.Now()
		acts, err := p.e.b.Embodiment.Post(ctx, &PostInput{
			RequestID: p.rid, ActionPred: res.ActionPred, Horizon: res.Horizon, Dim: res.ActionDim, State: p.v.state, StateDtype: p.r.StateDtype,
		})
		dp := time.Since(t0)
		p.tm.PluginPost = ms(dp)
		p.pluginMetric("post", dp, err)
		if err != nil {
			return err
		}
		if p.resp.Actions, err = reshapeActions(acts, p.info.ActionGroups, p.info.ActionHorizon); err != nil {
			return err
		}
		if ferr := finiteActions(p.resp.Actions); ferr != nil {
			return fmt.Errorf("plugin returned a non-finite action: %w", ferr)
		}
		return nil
	}, p.embAttrs...)
	p.tm.DecodeActions = ms(d)
	return err
}

// report fills the response's description of what was served.
func (p *prediction) report() {
	info, resp, res := &p.info, p.resp, p.res
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
	resp.Version = p.deps.Model.Version
	resp.Model = p.s.cfg.ModelName
	resp.Layout = p.e.b.Layout.Name
	resp.Images = make(map[string]ImageReport, len(p.dec.Cameras))
	for _, cam := range p.dec.Cameras {
		resp.Images[cam.Key] = ImageReport{Frames: cam.Frames, ReceivedHW: [2]int{cam.Height, cam.Width}, VitGridTHW: p.enc.GridTHW[cam.Key]}
	}
	resp.SeqLen = p.enc.SeqLen
	resp.PromptTokens = p.enc.PromptTokens
	resp.Plugin = PluginReport{Name: info.Plugin, Version: info.PluginVersion}
	if p.r.ReturnNormalized {
		// The model-space chunk as denoised ([model horizon, action_dim],
		// as the reference server returns it) and the slice the plugin
		// decodes ([embodiment horizon, Σ action dims]).
		resp.ActionPredNormalized = rows(res.ActionPred, res.Horizon, res.ActionDim, 0, res.ActionDim)
		resp.ActionPredValidHD = rows(res.ActionPred, info.ActionHorizon, res.ActionDim, 0, min(valid, res.ActionDim))
	}
}

// pluginMetric records one plugin call in gateway.plugin.duration (the
// stage's own time is recorded once, by stage).
func (p *prediction) pluginMetric(stage string, d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	p.s.inst.pluginDur.Record(p.ctx, d.Seconds(), metric.WithAttributes(attribute.String("plugin", p.info.Plugin),
		attribute.String("stage", stage), attribute.String("outcome", outcome)), p.mattrs)
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
