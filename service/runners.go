package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/gr00tgw/gr00tgw/device"
)

// The gateway's side of device supervision (device.Supervised backends:
// a pool of runner processes). While the server is ready but no device
// serves, /health says "starting" (or "failed" once a runner gave up) with
// the reason, /v2/health/ready answers 503, and predicts fail with 503
// device_restarting; a restarted device is gated by the default
// embodiment's warm-up (golden-checked) before it serves again.

// CodeRestarting is the error code of a 503 whose device (a runner
// process) went away under the request or is being restarted; the answer
// carries Retry-After.
const CodeRestarting = "device_restarting"

// supervision returns the backend's supervision snapshot, ok false for a
// backend that is not supervised (or before the backend is loaded).
func (s *Core) supervision() (device.Supervision, bool) {
	d := s.deps.Load()
	if d == nil {
		return device.Supervision{}, false
	}
	sv, ok := d.Backend.(device.Supervised)
	if !ok {
		return device.Supervision{}, false
	}
	return sv.Supervision(), true
}

// deviceState is what health reports for the device of a ready server:
// "" when it serves (or is not supervised), else "starting" or "failed"
// and the reason.
func (s *Core) deviceState() (state, reason string) {
	sv, ok := s.supervision()
	if !ok || sv.Serving {
		return "", ""
	}
	if sv.Failed {
		return "failed", sv.Reason
	}
	return "starting", sv.Reason
}

// gateDevices is the default embodiment's warm-up at start (bindWith):
// for a backend that is not supervised, the plain warm-up; for a
// device.Gated one it hands the backend the gate its devices must pass —
// e's warm-up on that device alone, golden-checked — which SetGate runs on
// every device now (so each runner warms up once, and readiness waits for
// all of them) and on every restarted device before it serves again (with
// the default embodiment's binding of that moment, not e's: a reload may
// have replaced it). e's warm-up report is the first device's.
func (s *Core) gateDevices(ctx context.Context, deps *Deps, e *entry) error {
	g, ok := deps.Backend.(device.Gated)
	if !ok {
		return s.warmup(ctx, deps, e)
	}
	var (
		mu    sync.Mutex
		first *WarmupReport
		start = true // SetGate below is running: record the report
	)
	gate := func(ctx context.Context, b device.Backend) error {
		d := *deps
		d.Backend = b
		d.gating = true // b is one runner, out of rotation (SetGate, restarts)
		mu.Lock()
		starting := start
		mu.Unlock()
		// A restarted device is gated with the default embodiment as it
		// is served now: a reload may have replaced e (and closed its
		// plugin) since start.
		ge := e
		if cur := s.defaultEntry(); !starting && cur != nil && cur.acquire() {
			defer cur.release()
			ge = cur
		}
		t0 := time.Now()
		rep, err := s.warmupRuns(ctx, &d, ge)
		if err != nil {
			return err
		}
		mu.Lock()
		if start && first == nil {
			first = rep
		}
		mu.Unlock()
		s.log.Info("device gate passed", "embodiment", ge.tag, "plugin_version", ge.info.PluginVersion, "ms", time.Since(t0).Milliseconds())
		return nil
	}
	err := g.SetGate(ctx, gate)
	mu.Lock()
	start = false
	if first != nil {
		e.warm = *first
	}
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("device gate: %w", err)
	}
	return nil
}

// runnerInfo is /info's "runner" block: isolation, and per runner its pid,
// state, restarts and last cause.
func (s *Core) runnerInfo() map[string]any {
	sv, ok := s.supervision()
	if !ok {
		return map[string]any{"isolation": "inproc"}
	}
	restarts := 0
	for _, r := range sv.Runners {
		restarts += r.Restarts
	}
	m := map[string]any{"isolation": "process", "serving": sv.Serving, "restarts": restarts, "runners": sv.Runners}
	if len(sv.Runners) > 0 {
		r := sv.Runners[0]
		m["pid"], m["last_cause"] = r.PID, r.LastCause
	}
	if sv.Reason != "" {
		m["reason"] = sv.Reason
	}
	return m
}

// registerRunnerMetrics adds gateway.device.restarts{cause} (Prometheus:
// gateway_device_restarts_total) and gateway.device.runners{state}.
func registerRunnerMetrics(m metric.Meter, s *Core) error {
	restarts, err := m.Int64ObservableCounter("gateway.device.restarts",
		metric.WithDescription("device runner restarts by cause (exit, signal, hang, protocol, gate, start)"))
	if err != nil {
		return err
	}
	runners, err := m.Int64ObservableGauge("gateway.device.runners",
		metric.WithDescription("device runners by state (ok, starting, restarting, failed)"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		sv, ok := s.supervision()
		if !ok {
			return nil
		}
		byCause := map[string]int{}
		byState := map[string]int{"ok": 0, "starting": 0, "restarting": 0, "failed": 0}
		for _, r := range sv.Runners {
			for k, n := range r.RestartsByCause {
				byCause[k] += n
			}
			byState[r.State]++
		}
		for k, n := range byCause {
			o.ObserveInt64(restarts, int64(n), metric.WithAttributes(attribute.String("cause", k)))
		}
		for k, n := range byState {
			o.ObserveInt64(runners, int64(n), metric.WithAttributes(attribute.String("state", k)))
		}
		return nil
	}, restarts, runners)
	return err
}
