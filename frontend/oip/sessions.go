package oip

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/gr00tgw/gr00tgw/frontend"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

// Request parameters of real-time chunking and sessions (issue 27 point
// 3): upstream's option names as inference request parameters, and
// session_id. The previous chunk comes from the session (OIP has no
// rtc_prev_action: a stateless client uses /predict).
const (
	ParamSession  = "session_id"
	ParamHorizon  = "action_horizon"
	ParamOverlap  = "rtc_overlap_steps"
	ParamFrozen   = "rtc_frozen_steps"
	ParamRampRate = "rtc_ramp_rate"
)

// rtcParams are the request's RTC and session parameters.
type rtcParams struct {
	session string
	opts    service.RTCOptions
	any     bool // an RTC option was sent
}

// parse reads the parameters it knows (others are left to their readers):
// session_id a string (validated), action_horizon an integer, the steps
// an integer or "auto", rtc_ramp_rate a number. Errors name
// parameters.<key>.
func (p *rtcParams) parse(params map[string]json.RawMessage) error {
	if raw, ok := params[ParamSession]; ok && !isNull(raw) {
		f := "parameters." + ParamSession
		if err := json.Unmarshal(raw, &p.session); err != nil {
			return schema(f, "%s: %s, want a string", f, raw)
		}
		if err := service.CheckSessionID(p.session, f); err != nil {
			return err
		}
	}
	for _, k := range []struct {
		name string
		dst  **int
		auto *bool
	}{{ParamHorizon, &p.opts.Horizon, nil}, {ParamOverlap, &p.opts.Overlap, &p.opts.OverlapAuto}, {ParamFrozen, &p.opts.Frozen, &p.opts.FrozenAuto}} {
		raw, ok := params[k.name]
		if !ok || isNull(raw) {
			continue
		}
		f := "parameters." + k.name
		var s string
		if k.auto != nil && json.Unmarshal(raw, &s) == nil && s == "auto" {
			*k.auto, p.any = true, true
			continue
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var n json.Number
		i, err := int64(0), d.Decode(&n)
		if err == nil {
			i, err = n.Int64()
		}
		if err != nil || i < math.MinInt32 || i > math.MaxInt32 {
			want := "an integer"
			if k.auto != nil {
				want += ` or "auto"`
			}
			return schema(f, "%s: %s, want %s", f, raw, want)
		}
		v := int(i)
		*k.dst, p.any = &v, true
	}
	if raw, ok := params[ParamRampRate]; ok && !isNull(raw) {
		f := "parameters." + ParamRampRate
		var x float64
		if err := json.Unmarshal(raw, &x); err != nil {
			return schema(f, "%s: %s, want a number", f, raw)
		}
		p.opts.RampRate, p.any = &x, true
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// apply sets the parameters on r.
func (p *rtcParams) apply(r *service.Request) {
	if p.session != "" {
		r.Session, r.SessionField = p.session, "parameters."+ParamSession
	}
	if p.any {
		o := p.opts
		r.Options = &o
	}
}

// renameParams restates the service's RTC and session fields as this
// protocol's parameters: options.<key> → parameters.<key>, session →
// parameters.session_id.
func renameParams(err error) error {
	return frontend.RenameField(err, func(p wire.Path) (wire.Path, bool) {
		switch {
		case len(p) == 1 && p.HasPrefix("session"):
			return wire.Path{wire.AtKey("parameters"), wire.AtKey(ParamSession)}, true
		case len(p) == 2 && p.Below("options"):
			return p.WithHead(1, wire.AtKey("parameters")), true
		}
		return p, false
	})
}
