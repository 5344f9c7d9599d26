package service

import (
	"math"
	"slices"
	"strings"

	"github.com/gr00tgw/gr00tgw/wire"
)

// RTCFromWire reads real-time chunking from a robot protocol's options map
// m (upstream's names: action_horizon, rtc_overlap_steps, rtc_frozen_steps,
// rtc_ramp_rate, and the previous chunk rtc_prev_action as a float array
// (rows, action_dim) or (1, rows, action_dim)). It checks types only
// (errors name field.<key>); Predict checks the values. nil options and a
// nil chunk when m holds none.
func RTCFromWire(m *wire.Map, field string) (opts *RTCOptions, prev []float32, prevRows int, err error) {
	var autoO, autoF bool
	intOpt := func(k string, dst **int) error {
		v, ok := m.Get(k)
		if !ok || v == nil {
			return nil
		}
		var n int64
		switch x := v.(type) {
		case string:
			if x != optAuto || k == optHorizon {
				return SchemaError(field+"."+k, "%s.%s: expected an int%s, got str %q", field, k, autoHint(k), x)
			}
			if k == optOverlap {
				autoO = true
			} else {
				autoF = true
			}
			return nil
		case int64:
			n = x
		case uint64:
			if x > math.MaxInt32 {
				return Invalid(field+"."+k, "%s.%s: %d is too large", field, k, x)
			}
			n = int64(x)
		default:
			return SchemaError(field+"."+k, "%s.%s: expected an int%s, got %s", field, k, autoHint(k), wire.TypeName(v))
		}
		if n < math.MinInt32 || n > math.MaxInt32 {
			return Invalid(field+"."+k, "%s.%s: %d is out of range", field, k, n)
		}
		i := int(n)
		*dst = &i
		return nil
	}
	r := &RTCOptions{}
	for _, kd := range []struct {
		k   string
		dst **int
	}{{"action_horizon", &r.Horizon}, {"rtc_overlap_steps", &r.Overlap}, {"rtc_frozen_steps", &r.Frozen}} {
		if err := intOpt(kd.k, kd.dst); err != nil {
			return nil, nil, 0, err
		}
	}
	if v, ok := m.Get("rtc_ramp_rate"); ok && v != nil {
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		default:
			return nil, nil, 0, SchemaError(field+".rtc_ramp_rate", "%s.rtc_ramp_rate: expected a float, got %s", field, wire.TypeName(v))
		}
		r.RampRate = &f
	}
	r.OverlapAuto, r.FrozenAuto = autoO, autoF
	if *r != (RTCOptions{}) {
		opts = r
	}
	if v, ok := m.Get("rtc_prev_action"); ok && v != nil {
		f := field + ".rtc_prev_action"
		a, ok := v.(*wire.Array)
		if !ok {
			return nil, nil, 0, SchemaError(f, "%s: expected a float array (rows, action_dim), got %s", f, wire.TypeName(v))
		}
		shape := a.Shape
		if len(shape) == 3 && shape[0] == 1 {
			shape = shape[1:]
		}
		if len(shape) != 2 {
			return nil, nil, 0, Invalid(f, "%s: expected (rows, action_dim) or (1, rows, action_dim), got %s", f, a)
		}
		vals, err := a.Float32s()
		if err != nil {
			return nil, nil, 0, SchemaError(f, "%s: %v", f, err)
		}
		for i, x := range vals {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, nil, 0, Invalid(f, "%s[%d, %d]: %v is not finite", f, i/shape[1], i%shape[1], x)
			}
		}
		prev, prevRows = vals, shape[0]
	}
	return opts, prev, prevRows, nil
}

// Wire is the report as a robot protocol's map (ZeroMQ's info, openpi's
// reply): action_horizon, overlap, frozen, ramp_rate, source, and when set
// latency_ms_estimate, skipped, dropped.
func (r *RTCReport) Wire() *wire.Map {
	m := wire.NewMap(8).Set("action_horizon", int64(r.Horizon)).Set("overlap", int64(r.Overlap)).
		Set("frozen", int64(r.Frozen)).Set("ramp_rate", r.RampRate).Set("source", r.Source)
	if r.LatencyMSEstimate != nil {
		m.Set("latency_ms_estimate", *r.LatencyMSEstimate)
	}
	if r.Skipped != "" {
		m.Set("skipped", r.Skipped)
	}
	if r.Dropped != "" {
		m.Set("dropped", r.Dropped)
	}
	if r.Mode != "" {
		m.Set("mode", r.Mode).Set("shift", int64(r.Shift))
	}
	return m
}

// CheckOptionKeys refuses a key of a robot protocol's options map m that is
// neither a real-time chunking option (action_horizon, rtc_overlap_steps,
// rtc_frozen_steps, rtc_ramp_rate, rtc_prev_action) nor one of extra (the
// protocol's own, e.g. ZeroMQ's embodiment, seed, session_id): a misspelt
// option is a schema error naming field, as /predict's options are, never
// silently ignored.
func CheckOptionKeys(m *wire.Map, field string, extra ...string) error {
	for _, k := range m.Keys {
		if k.Bin || !(slices.Contains(rtcOptionKeys, k.Name) || k.Name == fieldRTCPrev || slices.Contains(extra, k.Name)) {
			want := append(append(slices.Clone(extra), rtcOptionKeys...), fieldRTCPrev)
			return SchemaError(field, "%s: unknown key %q (want %s)", field, k.Name, strings.Join(want, ", "))
		}
	}
	return nil
}
