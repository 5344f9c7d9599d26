// The flight recorder in the pipeline (issue 28 point 3): every predict
// that reached the device — answered, or refused by plugin.post or the
// safety gate — is built into a record.Record on the request path (the
// request's frames, state and options copied out of the transport's
// buffers) and handed to the recorder, which writes it off the request
// path. Warm-up predictions are not recorded.

package service

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/gr00tgw/gr00tgw/record"
)

// newTrust creates the safety and recorder metrics and starts the
// recorder configured by record.*.
func (s *Core) newTrust(m metric.Meter) error {
	rc := s.cfg.Record
	rec, err := record.New(record.Options{Dir: rc.Dir, MaxBytes: int64(rc.MaxBytes), Sample: rc.Sample, Sessions: rc.Sessions,
		RedactInstruction: rc.RedactInstruction, Logger: s.log})
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	s.rec = rec
	t, err := newTrustInstruments(m, s)
	if err != nil {
		_ = rec.Close(context.Background())
		return fmt.Errorf("service: metrics: %w", err)
	}
	s.trust = t
	if rec != nil {
		s.log.Info("recording predicts", "dir", rc.Dir, "max_bytes", rc.MaxBytes, "sample", rc.Sample, "sessions", rc.Sessions,
			"redact_instruction", rc.RedactInstruction)
	}
	return nil
}

// closeRecorder writes the queued records and stops the recorder (at
// shutdown, after the last request).
func (s *Core) closeRecorder(ctx context.Context) error {
	if s.rec == nil {
		return nil
	}
	err := s.rec.Close(ctx)
	st := s.rec.Stats()
	s.log.Info("recorder closed", "written", st.Written, "dropped", st.Dropped, "failed", st.Failed, "evicted", st.Evicted, "bytes", st.Bytes)
	return err
}

// RecorderStats are the flight recorder's counters (zero when off).
func (s *Core) RecorderStats() record.Stats { return s.rec.Stats() }

// registerRecorderMetrics exports the recorder's counters.
func registerRecorderMetrics(m metric.Meter, s *Core) error {
	written, err := m.Int64ObservableCounter("gateway.record.written", metric.WithDescription("flight recorder files written"))
	if err != nil {
		return err
	}
	dropped, err := m.Int64ObservableCounter("gateway.record.dropped", metric.WithDescription("records dropped: the writer's queue was full"))
	if err != nil {
		return err
	}
	failed, err := m.Int64ObservableCounter("gateway.record.failed",
		metric.WithDescription("records not written: file-system or encode error, or larger than record.max_bytes (the first of an outage is logged)"))
	if err != nil {
		return err
	}
	evicted, err := m.Int64ObservableCounter("gateway.record.evicted", metric.WithDescription("old record files deleted to stay within record.max_bytes"))
	if err != nil {
		return err
	}
	size, err := m.Int64ObservableGauge("gateway.record.bytes", metric.WithUnit("By"), metric.WithDescription("bytes of record files in record.dir"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if s.rec == nil {
			return nil
		}
		st := s.rec.Stats()
		o.ObserveInt64(written, int64(st.Written))
		o.ObserveInt64(dropped, int64(st.Dropped))
		o.ObserveInt64(failed, int64(st.Failed))
		o.ObserveInt64(evicted, int64(st.Evicted))
		o.ObserveInt64(size, st.Bytes)
		return nil
	}, written, dropped, failed, evicted, size)
	return err
}

// record hands the prediction to the recorder, when it reached the device
// and the recorder wants it. It copies what it keeps from the request
// (the transport may reuse its buffers once the call returns).
func (p *prediction) record(start time.Time, resp *PredictResponse, err error) {
	rec := p.s.rec
	if rec == nil || p.res == nil || p.protocol == protocolWarmup || !rec.Want(p.r.Session) {
		return
	}
	rec.Enqueue(p.buildRecord(start, resp, err))
}

// buildRecord is the record of one prediction (see record's package doc).
func (p *prediction) buildRecord(start time.Time, resp *PredictResponse, err error) *record.Record {
	r, info, res := p.r, &p.info, p.res
	out := &record.Record{
		TimeUnixNS: start.UnixNano(), RequestID: p.rid, Session: p.r.Session, Protocol: p.protocol,
		Request: record.Request{Instruction: strings.Clone(r.Instruction), Options: recordOptions(r.Options),
			State: recordState(r), Frames: recordFrames(r, info.Cameras)},
		Embodiment: info.Name, EmbodimentID: info.ID,
		Plugin:  record.Plugin{Name: info.Plugin, Version: info.PluginVersion, SHA256: p.e.b.SHA256},
		Backend: p.s.cfg.Backend + "/" + p.s.cfg.Policy, Model: p.s.cfg.ModelName,
	}
	if d, ok := p.deps.Backend.Facts().Extra["checkpoint_sha256"].(string); ok {
		out.Checkpoint = d
	}
	if pr := p.resp; pr != nil {
		out.NoiseSource = pr.NoiseSource
		if pr.Seed != nil {
			seed := *pr.Seed
			out.Seed = &seed
		}
	}
	if r.Noise != nil {
		shape := slices.Clone(r.NoiseShape)
		if len(shape) == 0 {
			shape = []int{len(r.Noise)}
		}
		t := record.Float32s(r.Noise, shape...)
		out.Noise = &t
	}
	ap := record.Float32s(res.ActionPred, res.Horizon, res.ActionDim)
	out.ActionPred = &ap
	if p.resp != nil && p.resp.Actions != nil {
		for _, g := range info.ActionGroups {
			rows := p.resp.Actions[g.Key]
			vals := make([]float32, 0, len(rows)*g.Dim)
			for _, row := range rows {
				for _, x := range row {
					vals = append(vals, float32(x))
				}
			}
			out.Actions = append(out.Actions, record.ActionGroup{Key: g.Key, Tensor: record.Float32s(vals, len(rows), g.Dim)})
		}
	}
	if p.gated.checked {
		out.Safety = record.SafetyOf(p.gated.verdict, p.gated.err)
	}
	tm := p.tm
	if resp != nil {
		tm = resp.TimingMS
	} else {
		tm.Total = ms(time.Since(start))
	}
	out.TimingMS = timingMap(&tm)
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// recordOptions is the request's options as upstream names them.
func recordOptions(o *RTCOptions) map[string]any {
	if o == nil {
		return nil
	}
	m := map[string]any{}
	for k, v := range map[string]*int{optHorizon: o.Horizon, optOverlap: o.Overlap, optFrozen: o.Frozen} {
		if v != nil {
			m[k] = int64(*v)
		}
	}
	if o.RampRate != nil {
		m[optRampRate] = *o.RampRate
	}
	return m
}

// recordState is the state as sent: one group per key (sorted), or the
// one flat list under key "".
func recordState(r *Request) []record.State {
	if r.StateList != nil {
		return []record.State{{Values: slices.Clone(r.StateList)}}
	}
	out := make([]record.State, 0, len(r.State))
	for _, k := range sortedKeys(r.State) {
		out = append(out, record.State{Key: k, Values: slices.Clone(r.State[k])})
	}
	return out
}

// recordFrames copies the frames as sent, cameras in model order (then
// any other key, sorted): a base64 string as its text ("base64"), image
// bytes with the encoding their magic names ("png", "jpeg", else
// "bytes"), raw pixels as "raw" with their shape.
func recordFrames(r *Request, cams []string) []record.Frame {
	keys := slices.Clone(cams)
	for _, k := range sortedKeys(r.Images) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var out []record.Frame
	for _, k := range keys {
		for i, f := range r.Images[k] {
			fr := record.Frame{Camera: k, Step: i}
			switch {
			case f.Raw != nil:
				fr.Encoding, fr.Shape, fr.Data = "raw", []int{f.Raw.Height, f.Raw.Width, 3}, bytes.Clone(f.Raw.Pix)
			case f.Encoded != nil:
				fr.Encoding, fr.Data = imageEncoding(f.Encoded), bytes.Clone(f.Encoded)
			default:
				fr.Encoding, fr.Data = "base64", []byte(f.B64)
			}
			out = append(out, fr)
		}
	}
	return out
}

func imageEncoding(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG")):
		return "png"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8}):
		return "jpeg"
	}
	return "bytes"
}

// timingMap is timing_ms as a map (the device's stages as device.<name>).
func timingMap(t *Timing) record.Timings {
	m := record.Timings{"decode": t.Decode, "encode": t.Encode, "device": t.Device, "decode_actions": t.DecodeActions,
		"total": t.Total, "parse": t.Parse, "queue": t.Queue, "plugin_pre": t.PluginPre, "plugin_post": t.PluginPost}
	if t.Safety != 0 {
		m["safety"] = t.Safety
	}
	for k, v := range t.DeviceStages {
		m["device."+k] = v
	}
	return m
}
