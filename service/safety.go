// The safety gate in the pipeline (issue 28 point 2): after plugin.post,
// every served chunk passes the embodiment's safety.Gate, built when the
// embodiment is bound from its plugin's action_limits and the configured
// policy (safety.policy, safety.policies).

package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/safety"
	"github.com/gr00tgw/gr00tgw/wire"
)

// CodeUnsafeAction is the error code of a chunk the safety gate refused
// (HTTP 422; the field names the value: "actions.<group>[step][dim]").
const CodeUnsafeAction = "unsafe_action"

// SafetyReport is the response's "safety" member: present whenever the
// gate checked the chunk (policy reject or clamp). Clamped counts the
// values clamp changed; First is the first violation found (under clamp:
// before clamping), nil when the chunk was inside every limit.
type SafetyReport struct {
	Policy  string           `json:"policy" msgpack:"policy"`
	Clamped int              `json:"clamped" msgpack:"clamped"`
	First   *SafetyViolation `json:"first,omitempty" msgpack:"first,omitempty"`
}

// SafetyViolation is one value outside its limits (safety.Violation with
// the kind as its name).
type SafetyViolation struct {
	Group string  `json:"group" msgpack:"group"`
	Step  int     `json:"step" msgpack:"step"`
	Dim   int     `json:"dim" msgpack:"dim"`
	Kind  string  `json:"kind" msgpack:"kind"`
	Limit float64 `json:"limit" msgpack:"limit"`
	Value float64 `json:"value" msgpack:"value"`
}

// String names the value and the limit: "actions.<group>[step][dim]
// <kind> (limit L, value V)".
func (v *SafetyViolation) String() string {
	return fmt.Sprintf("actions.%s[%d][%d] %s (limit %g, value %g)", v.Group, v.Step, v.Dim, v.Kind, v.Limit, v.Value)
}

// Wire is the report as a robot protocol's map (ZeroMQ info, openpi
// reply): policy, clamped and, when set, first {group, step, dim, kind,
// limit, value}.
func (r *SafetyReport) Wire() *wire.Map {
	m := wire.NewMap(3).Set("policy", r.Policy).Set("clamped", int64(r.Clamped))
	if f := r.First; f != nil {
		m.Set("first", wire.NewMap(6).Set("group", f.Group).Set("step", int64(f.Step)).Set("dim", int64(f.Dim)).
			Set("kind", f.Kind).Set("limit", f.Limit).Set("value", f.Value))
	}
	return m
}

func violationReport(v *safety.Violation) *SafetyViolation {
	if v == nil {
		return nil
	}
	return &SafetyViolation{Group: v.Group, Step: v.Step, Dim: v.Dim, Kind: v.Kind.String(), Limit: v.Limit, Value: v.Value}
}

// entryGate is one served embodiment's gate and its metric attributes
// (precomputed: a check records without building attribute sets).
type entryGate struct {
	*safety.Gate
	emb, policy attribute.KeyValue
	outcomes    map[string]metric.AddOption // pass, clamped, rejected, error
}

// newGate compiles e's gate: the policy configured for its tag over its
// plugin's action limits. Off gives a nil gate.
func (s *Core) newGate(e *entry) (*entryGate, error) {
	pol, err := safety.ParsePolicy(s.cfg.Safety.PolicyFor(e.tag))
	if err != nil {
		return nil, fmt.Errorf("safety policy: %w", err)
	}
	if pol == safety.Off {
		return nil, nil
	}
	d := e.b.Description
	if d == nil {
		d = describeFromInfo(&e.info)
	}
	limits := e.b.ActionLimits
	if f := s.cfg.Safety.LimitsFile; f != "" {
		over, err := readLimitsFile(f)
		if err != nil {
			return nil, err
		}
		limits = safety.Override(limits, over[e.tag])
	}
	g, err := safety.New(pol, d, limits)
	if err != nil {
		return nil, fmt.Errorf("safety gate: %w", err)
	}
	eg := &entryGate{Gate: g, emb: attribute.String("embodiment", e.tag), policy: attribute.String("policy", pol.String()),
		outcomes: map[string]metric.AddOption{}}
	for _, o := range []string{"pass", "clamped", "rejected", "error"} {
		eg.outcomes[o] = metric.WithAttributes(eg.emb, eg.policy, attribute.String("outcome", o))
	}
	return eg, nil
}

// readLimitsFile reads safety.limits_file: per embodiment tag, action
// limits by group (unknown keys refused; safety.New checks the values).
func readLimitsFile(path string) (map[string]map[string]abi.ActionLimit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safety.limits_file: %w", err)
	}
	var out map[string]map[string]abi.ActionLimit
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&out); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("safety.limits_file %s: %w", path, err)
	}
	return out, nil
}

// describeFromInfo is the part of a plugin description the gate reads,
// for bindings that carry none.
func describeFromInfo(info *EmbodimentInfo) *abi.Description {
	d := &abi.Description{Name: info.Plugin, Version: info.PluginVersion, Embodiment: info.Name}
	for _, g := range info.StateGroups {
		d.State = append(d.State, abi.StateGroup{Key: g.Key, Dim: g.Dim})
	}
	for _, g := range info.ActionGroups {
		d.Actions = append(d.Actions, abi.ActionGroup{Key: g.Key, Dim: g.Dim, Rep: abi.RepAbsolute})
	}
	return d
}

// gateResult is what the gate did to one prediction (for the recorder).
type gateResult struct {
	checked bool
	verdict safety.Verdict
	err     error
}

// gate runs the embodiment's gate over the response's actions (stage
// "safety"). Under clamp the actions are changed in place and reported;
// under reject a violation fails the request with 422 unsafe_action naming
// the value. A chunk inside every limit is left bit-identical; warm-up
// predictions are not gated (they check the model against its golden).
func (p *prediction) gate() error {
	g := p.e.gate
	if g == nil || p.protocol == protocolWarmup {
		return nil
	}
	d, err := p.stage("safety", func(context.Context, trace.Span) error {
		groups := make([]safety.Group, len(p.info.ActionGroups))
		for i, ag := range p.info.ActionGroups {
			rows := p.resp.Actions[ag.Key]
			vals := make([]float32, 0, len(rows)*ag.Dim)
			for _, r := range rows {
				for _, x := range r {
					vals = append(vals, float32(x)) // exact: the rows hold float32 values
				}
			}
			groups[i] = safety.Group{Key: ag.Key, Horizon: len(rows), Dim: ag.Dim, Values: vals}
		}
		state := make([]safety.State, 0, len(p.v.state))
		for k, v := range p.v.state {
			state = append(state, safety.State{Key: k, Values: v})
		}
		v, err := g.Check(groups, state)
		p.gated = gateResult{checked: true, verdict: v, err: err}
		p.s.trust.countGate(p.ctx, g, &v, err)
		if err != nil {
			var se *safety.Error
			if errors.As(err, &se) {
				return &HandlerError{Status: http.StatusUnprocessableEntity, Code: CodeUnsafeAction, Field: se.Path(), Err: err}
			}
			return err
		}
		if v.Clamped > 0 {
			for i := range groups {
				rows := p.resp.Actions[groups[i].Key]
				for k, r := range rows {
					for j := range r {
						if x := float64(groups[i].Values[k*groups[i].Dim+j]); math.Float64bits(x) != math.Float64bits(r[j]) {
							r[j] = x
						}
					}
				}
			}
		}
		p.resp.Safety = &SafetyReport{Policy: g.Policy().String(), Clamped: v.Clamped, First: violationReport(v.First)}
		return nil
	}, p.embAttrs...)
	p.tm.Safety = ms(d)
	return err
}

// trustInstruments are the safety gate's and the recorder's metrics.
type trustInstruments struct {
	checks     metric.Int64Counter // chunks by embodiment, policy, outcome
	violations metric.Int64Counter // values by embodiment, group, kind, policy
}

func newTrustInstruments(m metric.Meter, s *Core) (*trustInstruments, error) {
	var t trustInstruments
	var err error
	if t.checks, err = m.Int64Counter("gateway.safety.checks",
		metric.WithDescription("action chunks checked by the safety gate, by embodiment, policy and outcome (pass, clamped, rejected, error)")); err != nil {
		return nil, err
	}
	if t.violations, err = m.Int64Counter("gateway.safety.violations",
		metric.WithDescription("action values outside their limits, by embodiment, group, kind (min, max, gripper, max_step_delta, max_jump, non_finite) and policy")); err != nil {
		return nil, err
	}
	if err := registerRecorderMetrics(m, s); err != nil {
		return nil, err
	}
	return &t, nil
}

// countGate records one check.
func (t *trustInstruments) countGate(ctx context.Context, g *entryGate, v *safety.Verdict, err error) {
	outcome := "pass"
	var se *safety.Error
	switch {
	case errors.As(err, &se):
		outcome = "rejected"
	case err != nil:
		outcome = "error"
	case v.Clamped > 0:
		outcome = "clamped"
	}
	t.checks.Add(ctx, 1, g.outcomes[outcome])
	for _, gc := range v.ByGroup {
		for _, k := range safety.Kinds() {
			if n := gc.ByKind[k]; n > 0 {
				t.violations.Add(ctx, int64(n), metric.WithAttributes(g.emb, g.policy, attribute.String("group", gc.Group), attribute.String("kind", k.String())))
			}
		}
	}
}
