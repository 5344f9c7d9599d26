package service

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// WarmupReport is the outcome of one embodiment's warm-up.
type WarmupReport struct {
	LatencyMS []float64 `json:"latency_ms"`
	// Check is "golden" (actions vs the demo's golden, PCC gate) or
	// "determinism" (no golden: finite and bit-identical across runs).
	Check    string      `json:"check,omitempty"`
	Fidelity *Comparison `json:"fidelity_vs_golden,omitempty"`
	MinPCC   float64     `json:"min_pcc"`
	Runs     int         `json:"runs"`
}

// warmup runs warmup_runs predictions of e's demo observation through the
// full request path and gates them: against the golden when the demo has
// one (PCC ≥ warmup_pcc_min), otherwise finiteness and repeat determinism
// (at least two runs, bit-identical).
func (s *Core) warmup(ctx context.Context, deps *Deps, e *entry) error {
	rep, err := s.warmupRuns(ctx, deps, e)
	if err != nil {
		return err
	}
	if rep != nil {
		e.warm = *rep
	}
	return nil
}

// warmupRuns is warmup without recording the report in e (nil when
// warm-up is disabled); the device gate (runners.go) runs it on one
// restarted device.
func (s *Core) warmupRuns(ctx context.Context, deps *Deps, e *entry) (*WarmupReport, error) {
	n := s.cfg.WarmupRuns
	if n == 0 {
		s.log.Warn("warm-up disabled (warmup_runs 0): serving without a fidelity check", "embodiment", e.tag)
		return nil, nil
	}
	demo := e.b.Demo
	if demo == nil {
		return nil, fmt.Errorf("warm-up: warmup_runs %d needs a demo observation for embodiment %s (demo_dir/%s, <weights_dir>/demo/%s, or the plugin's demo/)", n, e.tag, e.tag, e.tag)
	}
	req, err := decodeJSON(demo.Request)
	if err != nil {
		return nil, fmt.Errorf("warm-up: demo request %s: %w", demo.Source, err)
	}
	if req.Embodiment != "" && req.Embodiment != e.tag {
		return nil, fmt.Errorf("warm-up: demo request %s names embodiment %s, not %s", demo.Source, req.Embodiment, e.tag)
	}
	rep := WarmupReport{Runs: n, MinPCC: math.Inf(1), Check: "golden"}
	if demo.Golden == nil {
		rep.Check = "determinism"
		rep.Runs = max(n, 2)
	}
	s.log.Info(fmt.Sprintf("Warming up: %d prediction(s) on the demo observation", rep.Runs), "embodiment", e.tag, "demo", demo.Source, "check", rep.Check)
	var first map[string][][]float64
	for i := 1; i <= rep.Runs; i++ {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout*10)
		resp, err := s.runPredict(rctx, deps, e, req, fmt.Sprintf("warmup-%s-%d", e.tag, i), start, protocolWarmup)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("warm-up %d/%d: %w", i, rep.Runs, err)
		}
		d := time.Since(start)
		rep.LatencyMS = append(rep.LatencyMS, ms(d))
		if demo.Golden == nil {
			if err := finiteActions(resp.Actions); err != nil {
				return nil, fmt.Errorf("warm-up %d/%d: %w", i, rep.Runs, err)
			}
			if first == nil {
				first = resp.Actions
			} else if err := sameActions(e.info.ActionGroups, first, resp.Actions); err != nil {
				return nil, fmt.Errorf("warm-up %d/%d: not deterministic: %w", i, rep.Runs, err)
			}
			s.log.Info(fmt.Sprintf("Warmup %d/%d: %.1f ms", i, rep.Runs, float64(d.Microseconds())/1e3), "embodiment", e.tag)
			continue
		}
		cmp, err := compareActions(e.info.ActionGroups, resp.Actions, demo.Golden)
		if err != nil {
			return nil, fmt.Errorf("warm-up %d/%d: actions vs golden: %w", i, rep.Runs, err)
		}
		s.log.Info(fmt.Sprintf("Warmup %d/%d: %.1f ms", i, rep.Runs, float64(d.Microseconds())/1e3), "embodiment", e.tag, "pcc", cmp.PCC, "max_abs_diff", cmp.MaxAbs)
		if math.IsNaN(cmp.PCC) || cmp.PCC < s.cfg.WarmupPCCMin {
			return nil, fmt.Errorf("warm-up %d/%d: fidelity vs golden: actions PCC %.6f < warmup_pcc_min %.6f (max|d| %.4g)", i, rep.Runs, cmp.PCC, s.cfg.WarmupPCCMin, cmp.MaxAbs)
		}
		if cmp.PCC < rep.MinPCC {
			rep.MinPCC = cmp.PCC
			c := cmp
			rep.Fidelity = &c
		}
	}
	if rep.Fidelity != nil {
		s.inst.warmupPCC.Record(ctx, rep.MinPCC, metric.WithAttributes(attribute.String("embodiment", e.tag)))
		s.log.Info(fmt.Sprintf("Warm-up fidelity vs golden: actions PCC %.6f", rep.MinPCC), "embodiment", e.tag, "max_abs_diff", rep.Fidelity.MaxAbs)
	} else {
		rep.MinPCC = 0
	}
	s.log.Info("Warmup complete", "embodiment", e.tag, "runs", rep.Runs, "latency_ms", rep.LatencyMS)
	return &rep, nil
}

func finiteActions(a map[string][][]float64) error {
	for k, rows := range a {
		for i, r := range rows {
			for j, v := range r {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("action %s[%d][%d] is %v", k, i, j, v)
				}
			}
		}
	}
	return nil
}

func sameActions(order []Group, a, b map[string][][]float64) error {
	for _, g := range order {
		x, y := a[g.Key], b[g.Key]
		if len(x) != len(y) {
			return fmt.Errorf("action %s: %d steps, then %d", g.Key, len(x), len(y))
		}
		for i := range x {
			if !slices.Equal(x[i], y[i]) {
				return fmt.Errorf("action %s step %d differs between runs", g.Key, i)
			}
		}
	}
	return nil
}
