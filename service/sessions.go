package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/session"
)

// Sessions (issue 27 points 2–4, 7): a request may name a robot session
// (Request.Session). The service keeps one session.Store; before the
// pipeline decodes anything it looks the session up (resolveRTC), so that
// real-time chunking can take the session's last normalised action_pred as
// the previous chunk and derive "auto" rows from what it measured; after a
// successful predict it stores the new chunk (storeSession). A request
// refused anywhere leaves its session's data unchanged (only the LRU
// position and the TTL move with a lookup).
//
// Concurrency: two predicts of one session at once both read the same
// previous chunk and the later one to finish is stored (last writer wins);
// a robot sends one observation at a time, so this only matters to a
// misbehaving client and never mixes chunks within one predict.

// DefaultRampRate is rtc_ramp_rate when a request using its session's
// chunk sends none: 6.0, the only published default (LeRobot's
// GR00T_N1_7_DEFAULTS, NVIDIA PR #320; ../shared/spec/rtc.md §7). A
// request sending rtc_prev_action must send it (upstream has no default).
const DefaultRampRate = 6.0

// optAuto is the value of rtc_overlap_steps / rtc_frozen_steps that asks
// the server to derive them (session.AutoOverlap, session.AutoFrozen).
const optAuto = "auto"

// Where the previous chunk of real-time chunking came from (RTCReport.Source).
const (
	rtcSourceRequest = "request" // rtc_prev_action
	rtcSourceSession = "session" // the session's last chunk
)

// RTCSkipNoChunk is RTCReport.Skipped for a session that has no chunk yet
// (its first predict, or after a reset or expiry).
const RTCSkipNoChunk = "no_chunk"

func autoHint(k string) string {
	if k == optOverlap || k == optFrozen {
		return ` or "auto"`
	}
	return ""
}

func (o *RTCOptions) hasAuto() bool { return o != nil && (o.OverlapAuto || o.FrozenAuto) }

// sessionInstruments are the session and RTC metrics.
type sessionInstruments struct {
	evictions metric.Int64Counter
	resets    metric.Int64Counter
	rtc       metric.Int64Counter
	rows      metric.Int64Histogram
}

// newSessionStore builds the service's session store from config and
// registers its metrics: gateway.sessions.active (gauge),
// gateway.sessions.evictions (by reason: ttl, capacity, bytes),
// gateway.sessions.resets, gateway.rtc.predictions (by source and mode:
// real-time chunking applied) and gateway.rtc.rows (the overlap and
// frozen rows chosen, by kind).
func newSessionStore(m metric.Meter, cfgMax int, ttl time.Duration, maxBytes int) (*session.Store, *sessionInstruments, error) {
	var in sessionInstruments
	var err error
	if in.evictions, err = m.Int64Counter("gateway.sessions.evictions",
		metric.WithDescription("sessions evicted by reason: ttl (unused past sessions.ttl), capacity (sessions.max), bytes (sessions.max_bytes)")); err != nil {
		return nil, nil, err
	}
	if in.resets, err = m.Int64Counter("gateway.sessions.resets",
		metric.WithDescription("sessions reset by a client (HTTP DELETE /v1/sessions/{id}, ZeroMQ reset, openpi reconnect)")); err != nil {
		return nil, nil, err
	}
	if in.rtc, err = m.Int64Counter("gateway.rtc.predictions",
		metric.WithDescription("predictions with real-time chunking applied, by source (session, request) and mode (upstream)")); err != nil {
		return nil, nil, err
	}
	if in.rows, err = m.Int64Histogram("gateway.rtc.rows",
		metric.WithDescription("real-time chunking rows chosen per prediction, by kind (overlap, frozen) and whether the server derived them (auto)"),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40)); err != nil {
		return nil, nil, err
	}
	st, err := session.New(session.Config{MaxSessions: cfgMax, TTL: ttl, MaxBytes: int64(maxBytes),
		OnEvict: func(_ string, why session.EvictReason) {
			in.evictions.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", why.String())))
		}})
	if err != nil {
		return nil, nil, err
	}
	active, err := m.Int64ObservableGauge("gateway.sessions.active", metric.WithDescription("sessions held (unexpired)"))
	if err != nil {
		return nil, nil, err
	}
	bytes, err := m.Int64ObservableGauge("gateway.sessions.bytes", metric.WithUnit("By"),
		metric.WithDescription("bytes the session store is charged (chunks, ids, a fixed overhead per session)"))
	if err != nil {
		return nil, nil, err
	}
	if _, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := st.Stats()
		o.ObserveInt64(active, int64(s.Sessions))
		o.ObserveInt64(bytes, s.Bytes)
		return nil
	}, active, bytes); err != nil {
		return nil, nil, err
	}
	return st, &in, nil
}

// ResetSession removes session id (HTTP DELETE /v1/sessions/{id}, ZeroMQ
// reset, an openpi reconnect) and reports whether it existed. field names
// the id in the error of an invalid one (a 400 *HandlerError).
func (s *Core) ResetSession(id, field string) (bool, error) {
	if err := CheckSessionID(id, field); err != nil {
		return false, err
	}
	ok := s.sessions.Reset(id)
	if ok {
		s.sessInst.resets.Add(context.Background(), 1)
	}
	return ok, nil
}

// SessionStats are the session store's counters (for tests and /health).
func (s *Core) SessionStats() session.Stats { return s.sessions.Stats() }

// CheckSessionID validates a session id as every front end must: a 400
// *HandlerError naming field ("" is "session") for an invalid one.
func CheckSessionID(id, field string) error {
	if field == "" {
		field = fieldSession
	}
	err := session.ValidateID(id)
	if err == nil {
		return nil
	}
	var ie *session.IDError
	if errors.As(err, &ie) {
		return invalid(field, "%s: %s", field, ie.Reason)
	}
	return invalid(field, "%s: %v", field, err)
}

// rtcPlan is the real-time chunking a prediction applies, resolved before
// anything reaches the device; nil when none.
type rtcPlan struct {
	prev      []float32
	prevRows  int
	report    *RTCReport
	autoO     bool
	autoF     bool
	sessState *session.State // the session's state at lookup, nil without a session
	mode      string         // "upstream", or "reencode" once the plugin re-expressed prev
}

// resolveRTC looks the request's session up and resolves real-time
// chunking: the previous chunk (rtc_prev_action, source "request", or the
// session's last chunk, source "session"), "auto" rows and the defaults,
// each checked like validateRTC. It runs in the decode stage, after
// validate, before any pixel is decoded; every refusal names the option.
func (p *prediction) resolveRTC() error {
	r, info, model := p.r, &p.info, &p.deps.Model
	var st *session.State
	if r.Session != "" || r.SessionField != "" { // a named but empty id is refused too
		if err := CheckSessionID(r.Session, r.SessionField); err != nil {
			return err
		}
		if s, ok := p.s.sessions.Lookup(r.Session, info.Name, info.PluginVersion); ok {
			st = &s
		}
	}
	if r.Options == nil && r.RTCPrev == nil {
		p.rtc = &rtcPlan{sessState: st}
		return nil
	}
	if r.Options == nil {
		return checkRTC(r, info, model) // rtc_prev_action needs options
	}
	o := *r.Options
	plan := &rtcPlan{sessState: st, autoO: o.OverlapAuto, autoF: o.FrozenAuto, mode: config.RTCModeUpstream}
	p.rtc = plan
	hz := info.ControlHz
	autoErr := func(k string, why string) error {
		return invalid(fieldOptions+"."+k, "options.%s: %s", k, why)
	}
	needHz := func(k string) error {
		if hz > 0 { // control_hz, when declared, is finite and > 0 (the manifest refuses others)
			return nil
		}
		return autoErr(k, fmt.Sprintf("\"auto\" needs the embodiment's control rate, and plugin %s %s declares no control_hz: send an integer",
			info.Plugin, info.PluginVersion))
	}

	if r.RTCPrev != nil { // source "request"
		if st != nil && st.Embodiment != "" && st.Embodiment != info.Name {
			return invalid(fieldRTCPrev, "rtc_prev_action: session %s holds embodiment %q, this request is for %q: reset the session or use another one",
				quoteID(r.Session), st.Embodiment, info.Name)
		}
		// Without a session every option is required, as upstream; with
		// one, rtc_frozen_steps defaults to "auto".
		plan.autoF = o.FrozenAuto || o.Frozen == nil && r.Session != ""
		for i, missing := range [...]bool{o.Horizon == nil, o.Overlap == nil && !o.OverlapAuto, o.Frozen == nil && !plan.autoF, o.RampRate == nil} {
			if missing {
				k := rtcOptionKeys[i]
				return invalid(fieldOptions+"."+k, "options.%s: required with rtc_prev_action", k)
			}
		}
		if o.OverlapAuto {
			if err := needHz(optOverlap); err != nil {
				return err
			}
			if st == nil || st.ProducedAt.IsZero() {
				return autoErr(optOverlap, "\"auto\" counts the rows executed since the session's last chunk: name a session that has one, or send an integer")
			}
			n := session.AutoOverlap(time.Since(st.ProducedAt), hz, *o.Horizon)
			o.Overlap = &n
		}
		if plan.autoF {
			if err := needHz(optFrozen); err != nil {
				return err
			}
			if st == nil {
				return autoErr(optFrozen, "\"auto\" needs a session's latency estimate: name a session, or send an integer")
			}
			n := session.AutoFrozen(st.Latency, hz, *o.Overlap)
			o.Frozen = &n
		}
		rr := *r
		rr.Options = &o
		if err := checkRTC(&rr, info, model); err != nil {
			return err
		}
		plan.prev, plan.prevRows = r.RTCPrev, r.RTCPrevRows
		plan.report = newRTCReport(&o, rtcSourceRequest, st)
		return nil
	}

	// Source "session": the session's last chunk is the previous chunk.
	if r.Session == "" {
		return checkRTC(r, info, model) // rtc_prev_action required
	}
	if o.Overlap == nil {
		plan.autoO = true
	}
	if o.Frozen == nil {
		plan.autoF = true
	}
	if plan.autoO {
		if err := needHz(optOverlap); err != nil {
			return err
		}
	}
	if plan.autoF {
		if err := needHz(optFrozen); err != nil {
			return err
		}
	}
	if o.RampRate == nil {
		rate := DefaultRampRate
		o.RampRate = &rate
	}
	var chunk []float32
	rows := model.ChunkHorizon(info)
	if st != nil && st.Chunk != nil && st.Cols == model.ActionDim && st.Rows >= 1 && st.Rows <= rows {
		chunk, rows = st.Chunk, st.Rows
	}
	if o.Horizon == nil {
		h := min(info.ActionHorizon, rows)
		o.Horizon = &h
	}
	h := *o.Horizon
	if plan.autoO {
		n := h // no chunk: only checked; with one, the rows not yet executed
		if chunk != nil {
			n = session.AutoOverlap(time.Since(st.ProducedAt), hz, h)
		}
		o.Overlap = &n
	}
	if plan.autoF {
		n := 0
		if st != nil {
			n = session.AutoFrozen(st.Latency, hz, *o.Overlap)
		}
		o.Frozen = &n
	}
	prev := chunk
	if prev == nil {
		prev = make([]float32, rows*model.ActionDim) // the ranges are checked even without a chunk
	}
	rr := *r
	rr.Options, rr.RTCPrev, rr.RTCPrevRows = &o, prev, rows
	if err := checkRTC(&rr, info, model); err != nil {
		if he, ok := err.(*HandlerError); ok && he.Field == fieldRTCPrev {
			he.Field = fieldSession // the session's chunk, not the client's
		}
		return err
	}
	plan.report = newRTCReport(&o, rtcSourceSession, st)
	if chunk == nil {
		plan.report.Overlap, plan.report.Frozen = 0, 0
		plan.report.Skipped = RTCSkipNoChunk
		if st != nil && st.Dropped != session.DropNone {
			plan.report.Skipped = string(st.Dropped)
			plan.report.Dropped = string(st.Dropped)
		}
		return nil
	}
	plan.prev, plan.prevRows = chunk, rows
	return nil
}

func newRTCReport(o *RTCOptions, source string, st *session.State) *RTCReport {
	rep := &RTCReport{Horizon: *o.Horizon, Overlap: *o.Overlap, Frozen: *o.Frozen, RampRate: *o.RampRate, Source: source}
	if st != nil {
		ms := float64(st.Latency) / float64(time.Millisecond)
		rep.LatencyMSEstimate = &ms
	}
	return rep
}

func quoteID(id string) string {
	if len(id) > 32 {
		return fmt.Sprintf("%q…", id[:32])
	}
	return fmt.Sprintf("%q", id)
}

// applyRTC sets the device's real-time chunking inputs and the response's
// report from the resolved plan, with the span attributes (the RTC
// parameters and whether a session was named: never the id, which a
// deployment may derive from a robot's serial number or a user).
func (p *prediction) applyRTC(span trace.Span) {
	plan := p.rtc
	if plan == nil {
		return
	}
	p.resp.Session = p.r.Session
	span.SetAttributes(attribute.Bool("session.present", p.r.Session != ""))
	rep := plan.report
	if rep == nil {
		return
	}
	p.resp.RTC = rep
	span.SetAttributes(attribute.String("rtc.source", rep.Source), attribute.Int("rtc.action_horizon", rep.Horizon))
	if rep.Skipped != "" {
		span.SetAttributes(attribute.String("rtc.skipped", rep.Skipped))
		return
	}
	p.in.RTC = &device.RTC{Prev: plan.prev, PrevRows: plan.prevRows, Horizon: rep.Horizon, Overlap: rep.Overlap,
		Frozen: rep.Frozen, RampRate: rep.RampRate}
	span.SetAttributes(attribute.Int("rtc.overlap", rep.Overlap), attribute.Int("rtc.frozen", rep.Frozen),
		attribute.Float64("rtc.ramp_rate", rep.RampRate), attribute.Bool("rtc.overlap_auto", plan.autoO),
		attribute.Bool("rtc.frozen_auto", plan.autoF), attribute.String("rtc.mode", plan.mode))
	in := p.s.sessInst
	in.rtc.Add(p.ctx, 1, metric.WithAttributes(attribute.String("source", rep.Source), attribute.String("mode", plan.mode)))
	in.rows.Record(p.ctx, int64(rep.Overlap), metric.WithAttributes(attribute.String("kind", "overlap"), attribute.Bool("auto", plan.autoO)))
	in.rows.Record(p.ctx, int64(rep.Frozen), metric.WithAttributes(attribute.String("kind", "frozen"), attribute.Bool("auto", plan.autoF)))
}

// storeSession records a successful predict in its session: the model's
// whole normalised action_pred, the embodiment, plugin version, now, and
// the end-to-end latency measured so far (from the request's arrival to
// the decoded actions; the network to and from the robot is not in it).
//
// A store refusal (a chunk larger than sessions.max_bytes) is logged: the
// prediction was served, the session keeps its previous state.
func (p *prediction) storeSession(start time.Time) {
	if p.r.Session == "" || p.protocol == protocolWarmup {
		return
	}
	res := p.res
	_, err := p.s.sessions.Update(p.r.Session, session.Update{
		Embodiment: p.info.Name, PluginVersion: p.info.PluginVersion,
		ActionPred: res.ActionPred, Rows: res.Horizon, Cols: res.ActionDim,
		Latency:  time.Since(start),
		RawState: p.rawState(), StateDType: p.r.StateDtype,
	})
	if err != nil {
		p.s.log.Warn("session not updated", "request_id", p.rid, "error", err)
	}
}

// Reencoder is implemented by an Embodiment whose plugin can re-express a
// previous chunk against the current state (plugins/ABI.md §11, the
// gw_reencode export), for rtc.mode reencode.
type Reencoder interface {
	// CanReencode reports whether the plugin has the export.
	CanReencode() bool
	// Reencode returns the previous chunk's rows Shift..H−1 re-expressed
	// against State and normalised at rows 0..H−Shift−1: [rows, Dim].
	Reencode(ctx context.Context, in *ReencodeInput) (out []float32, rows int, err error)
}

// ReencodeInput is a session's previous chunk to re-express.
type ReencodeInput struct {
	RequestID, Embodiment, StateDtype string
	// ActionPred is the previous chunk, [Rows, Dim] row-major, normalised.
	ActionPred []float32
	Rows, Dim  int
	// Shift is the chunk's rows executed since it was produced (0 ≤ Shift < H).
	Shift int
	// PrevState is the raw state that produced ActionPred; State the
	// current request's (rounded to StateDtype).
	PrevState, State map[string][]float64
}

// rawState is the request's raw state for its session in rtc.mode
// reencode (the next predict's plugin re-expresses this chunk from it);
// nil in upstream mode, which never reads it.
func (p *prediction) rawState() []session.RawGroup {
	if p.s.cfg.RTC.Mode != config.RTCModeReencode || p.v == nil {
		return nil
	}
	out := make([]session.RawGroup, 0, len(p.info.StateGroups))
	for _, g := range p.info.StateGroups {
		if v, ok := p.v.state[g.Key]; ok {
			out = append(out, session.RawGroup{Key: g.Key, Values: v})
		}
	}
	return out
}

// reencode is rtc.mode reencode (issue 27 point 5): when the previous
// chunk is the session's and the plugin has the export, the plugin
// re-expresses its rows not yet executed — e = ⌊elapsed × control_hz⌋,
// clamped to [0, H−1]; 0 without a control rate — against the current
// state, and RTC runs on the result with action_horizon H − e (new row i
// is old row e + i; overlap and frozen clamped to it; the plugin
// re-expresses the embodiment's whole horizon, of which RTC reads the
// request's H − e rows). A plugin without
// the export, or a session chunk stored without its state, keeps
// upstream's rows (the report's mode says which ran). Runs after
// plugin.pre, as its own plugin stage.
func (p *prediction) reencode() error {
	plan := p.rtc
	if p.s.cfg.RTC.Mode != config.RTCModeReencode || plan == nil || plan.report == nil || plan.report.Source != rtcSourceSession ||
		plan.report.Skipped != "" || plan.sessState == nil || len(plan.sessState.RawState) == 0 {
		return nil
	}
	re, ok := p.e.b.Embodiment.(Reencoder)
	if !ok || !re.CanReencode() {
		return nil
	}
	st, rep := plan.sessState, plan.report
	h := rep.Horizon
	e := 0
	if hz := p.info.ControlHz; hz > 0 && !math.IsInf(hz, 0) {
		e = h - session.AutoOverlap(time.Since(st.ProducedAt), hz, h)
	}
	e = min(max(e, 0), h-1)
	prev := make(map[string][]float64, len(st.RawState))
	for _, g := range st.RawState {
		prev[g.Key] = g.Values
	}
	var out []float32
	var rows int
	_, err := p.stage("plugin.reencode", func(ctx context.Context, _ trace.Span) error {
		t0 := time.Now()
		var err error
		out, rows, err = re.Reencode(ctx, &ReencodeInput{RequestID: p.rid, Embodiment: p.info.Name, StateDtype: p.r.StateDtype,
			ActionPred: plan.prev, Rows: plan.prevRows, Dim: st.Cols, Shift: e, PrevState: prev, State: p.v.state})
		p.pluginMetric("reencode", time.Since(t0), err)
		if want := p.info.ActionHorizon - e; err == nil && (rows != want || len(out) != rows*st.Cols) {
			err = fmt.Errorf("plugin re-encoded %d values as %d rows, want [%d, %d]", len(out), rows, want, st.Cols)
		}
		return err
	}, p.embAttrs...)
	if err != nil {
		return err
	}
	// The plugin re-expresses the embodiment's whole horizon; RTC's
	// horizon is the request's H, shifted the same way.
	plan.prev, plan.prevRows, plan.mode = out, rows, config.RTCModeReencode
	rep.Horizon = h - e
	rep.Overlap = min(rep.Overlap, rep.Horizon)
	rep.Frozen = min(rep.Frozen, rep.Overlap)
	rep.Mode, rep.Shift = config.RTCModeReencode, e
	return nil
}
