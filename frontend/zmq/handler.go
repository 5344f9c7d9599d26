package zmq

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/frontend"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

// Endpoints served, as Isaac-GR00T's PolicyServer registers them.
var Endpoints = []string{"ping", "get_modality_config", "get_action", "reset", "kill"}

// Unauthorized is upstream's reply text for a missing or wrong api_token
// (clients match it).
const Unauthorized = "Unauthorized: Invalid API token"

// errUnauthorized is the refusal of a missing or wrong api_token: upstream's
// text, wrapping service.ErrUnauthorized for errors.Is.
var errUnauthorized = &unauthorizedError{}

type unauthorizedError struct{}

func (*unauthorizedError) Error() string { return Unauthorized }
func (*unauthorizedError) Unwrap() error { return service.ErrUnauthorized }

// authorized reports whether tok is the zmq.api_token or one of the
// keyring's keys (each compared in constant time; both are tried).
func (s *Server) authorized(tok string) bool {
	ok := false
	if s.o.Token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.o.Token)) == 1 {
		ok = true
	}
	if _, match := s.o.Keys.Check(tok); match {
		ok = true
	}
	return ok
}

// reply is one answer: its value and how its arrays are encoded.
type reply struct {
	v   any
	enc wire.Encoding
}

// errorReply renders err as upstream's {"error": text}, plus code, field
// and the request id.
func errorReply(err error, rid string) (reply, string) {
	var he *service.HandlerError
	if !errors.As(err, &he) {
		he = &service.HandlerError{Status: http.StatusInternalServerError, Code: service.CodeInternal, Err: err}
	}
	m := wire.NewMap(4).Set("error", he.Err.Error()).Set("code", he.Code)
	if he.Field != "" {
		m.Set("field", he.Field)
	}
	m.Set("request_id", rid)
	return reply{v: m}, he.Code
}

// handle answers one request message: decode, authenticate, dispatch.
func (s *Server) handle(ctx context.Context, payload []byte, peer string, start time.Time) []byte {
	rid := service.NewRequestID()
	rep, _, endpoint, err := s.dispatch(ctx, payload, peer, rid, start)
	if err != nil {
		var code string
		rep, code = errorReply(err, rid)
		lvl := s.log.Info
		if code == service.CodeInternal || code == service.CodeDevice {
			lvl = s.log.Error
		}
		lvl("zmq request failed", "request_id", rid, "endpoint", endpoint, "peer", peer, "code", code, "err", err.Error(),
			"duration_ms", float64(time.Since(start).Microseconds())/1e3)
	} else {
		lvl := s.log.Debug // ping, get_modality_config, reset: not worth a line each
		if endpoint == "get_action" {
			lvl = s.log.Info // as HTTP logs each /predict
		}
		lvl("zmq request", "request_id", rid, "endpoint", endpoint, "peer", peer,
			"duration_ms", float64(time.Since(start).Microseconds())/1e3)
	}
	return marshalReply(rep, rid)
}

// dispatch decodes the request and runs its endpoint under one message
// span. err is the client's (or the server's) error to reply with.
func (s *Server) dispatch(ctx context.Context, payload []byte, peer, rid string, start time.Time) (rep reply, code, endpoint string, err error) {
	endpoint = "invalid"
	v, derr := wire.Decode(payload, wire.Limits{MaxElements: s.o.MaxElements})
	var top *wire.Map
	if derr == nil {
		var ok bool
		if top, ok = v.(*wire.Map); !ok {
			derr = fmt.Errorf("expected a map {endpoint, data, api_token}, got %s", wire.TypeName(v))
		}
	}
	if derr == nil {
		endpoint = "get_action" // upstream's default for a missing endpoint
		if ev, ok := top.Get("endpoint"); ok {
			es, isStr := ev.(string)
			switch {
			case !isStr:
				derr = fmt.Errorf("endpoint: expected a str, got %s", wire.TypeName(ev))
				endpoint = "invalid"
			case !contains(Endpoints, es):
				endpoint = "unknown"
			default:
				endpoint = es
			}
		}
	}
	ctx, end := s.o.Gateway.StartMessage(ctx, service.Message{Protocol: "zmq", Endpoint: endpoint, RequestID: rid, Start: start, Peer: peer})
	defer func() {
		if err != nil {
			var he *service.HandlerError
			code = service.CodeInternal
			if errors.As(err, &he) {
				code = he.Code
			}
		}
		end(code, err)
	}()
	if derr != nil {
		return reply{}, "", endpoint, schema("request", "request: not a valid Isaac-GR00T policy request: %v", derr)
	}
	if s.o.Token != "" || s.o.Keys.Enabled() {
		tok, _ := top.Get("api_token")
		ts, _ := tok.(string)
		if !s.authorized(ts) {
			return reply{}, "", endpoint, &service.HandlerError{Status: http.StatusUnauthorized, Code: service.CodeUnauthorized, Field: "api_token", Err: errUnauthorized}
		}
	}
	data, _ := top.Get("data")
	data, enc, rerr := wire.Resolve(data, "data")
	if rerr != nil {
		return reply{}, "", endpoint, invalid("data", "%v", rerr)
	}
	switch endpoint {
	case "ping":
		if !s.o.Gateway.Ready() {
			return reply{v: wire.NewMap(2).Set("status", "starting").Set("message", "model is starting (warm-up not complete)")}, "", endpoint, nil
		}
		return reply{v: wire.NewMap(2).Set("status", "ok").Set("message", "Server is running")}, "", endpoint, nil
	case "kill":
		if !s.o.AllowKill {
			return reply{}, "", endpoint, &service.HandlerError{Status: http.StatusForbidden, Code: service.CodeUnauthorized,
				Err: errors.New("kill: refused: remote shutdown is disabled on this server (zmq.allow_kill)")}
		}
		s.log.Warn("zmq kill: shutting down on a client's request", "peer", peer, "request_id", rid)
		if s.o.OnKill != nil {
			go s.o.OnKill()
		}
		return reply{v: nil}, "", endpoint, nil
	case "reset":
		// Answered {} as upstream's policy.reset: with options.session_id
		// the session's state is dropped (an unknown one is no error: the
		// state is gone either way); without one there is nothing to clear.
		if data != nil {
			m, ok := data.(*wire.Map)
			if !ok {
				return reply{}, "", endpoint, schema("data", "data: expected a map {options}, got %s", wire.TypeName(data))
			}
			if ov, ok := m.Get("options"); ok {
				o, err := parseOptions(ov, "options")
				if err != nil {
					return reply{}, "", endpoint, err
				}
				if o.session != "" {
					if _, err := s.o.Gateway.ResetSession(o.session, fieldSessionID); err != nil {
						return reply{}, "", endpoint, err
					}
				}
			}
		}
		return reply{v: wire.NewMap(0)}, "", endpoint, nil
	case "get_modality_config":
		o, err := modalityOptions(data)
		if err != nil {
			return reply{}, "", endpoint, err
		}
		c, err := s.o.Gateway.Contract(o.embodiment)
		if err != nil {
			return reply{}, "", endpoint, protoError(err, 0, false)
		}
		return reply{v: modalityReply(c)}, "", endpoint, nil
	case "get_action":
		rep, err := s.getAction(ctx, data, enc, rid)
		return rep, "", endpoint, err
	}
	name, _ := top.Get("endpoint")
	return reply{}, "", endpoint, invalid("endpoint", "Unknown endpoint: %v (served: %s)", name, strings.Join(Endpoints, ", "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// modalityOptions reads get_modality_config's optional embodiment: data
// {"options": {"embodiment": tag}} or {"embodiment": tag}.
func modalityOptions(data any) (options, error) {
	if data == nil {
		return options{}, nil
	}
	m, ok := data.(*wire.Map)
	if !ok {
		return options{}, schema("data", "data: expected a map {options: {embodiment}} or nil, got %s", wire.TypeName(data))
	}
	if ov, ok := m.Get("options"); ok && ov != nil {
		return parseOptions(ov, "options")
	}
	return parseOptions(m, "data")
}

// orNil keeps upstream's None for a nil slice.
func orNil[T any](s []T) any {
	if s == nil {
		return nil
	}
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// modalityReply is get_modality_config's answer: modality → the
// ModalityConfig marker map upstream's MsgSerializer writes, with both
// markers (N1.6/N1.7 release "__ModalityConfig_class__", HEAD
// "__ModalityConfig__"; each decoder tests only its own) and "as_json"
// holding exactly the dataclass's five fields.
func modalityReply(c *service.Contract) *wire.Map {
	out := wire.NewMap(len(service.ModalityNames))
	for _, name := range service.ModalityNames {
		mc, ok := c.Modality[name]
		if !ok {
			continue
		}
		var acs any
		if mc.ActionConfigs != nil {
			list := make([]any, len(mc.ActionConfigs))
			for i, a := range mc.ActionConfigs {
				var sk any
				if a.StateKey != nil {
					sk = *a.StateKey
				}
				list[i] = wire.NewMap(4).Set("rep", a.Rep).Set("type", a.Type).Set("format", a.Format).Set("state_key", sk)
			}
			acs = list
		}
		aj := wire.NewMap(5).Set("delta_indices", orNil(mc.DeltaIndices)).Set("modality_keys", orNil(mc.ModalityKeys)).
			Set("sin_cos_embedding_keys", orNil(mc.SinCosEmbeddingKeys)).Set("mean_std_embedding_keys", orNil(mc.MeanStdEmbeddingKeys)).
			Set("action_configs", acs)
		out.Set(name, wire.NewMap(3).Set("__ModalityConfig_class__", true).Set("__ModalityConfig__", true).Set("as_json", aj))
	}
	return out
}

// getAction maps the observation, serves each sample through the
// gateway, and builds the reply in the request's form and encoding.
func (s *Server) getAction(ctx context.Context, data any, enc wire.Encoding, rid string) (reply, error) {
	m, ok := data.(*wire.Map)
	if !ok {
		return reply{}, schema("data", "data: expected a map {observation, options}, got %s", wire.TypeName(data))
	}
	form := FormLegacy
	obsV, hasObs := m.Get("observation")
	var o options
	if hasObs {
		for _, k := range m.Keys {
			if k.Bin || (k.Name != "observation" && k.Name != "options") {
				return reply{}, invalid("data."+k.Name, "data.%s: unknown key (want observation, options)", k.Name)
			}
		}
		obs, ok := obsV.(*wire.Map)
		if !ok {
			return reply{}, schema("observation", "observation: expected a map, got %s", wire.TypeName(obsV))
		}
		ov, _ := m.Get("options")
		var err error
		if o, err = parseOptions(ov, "options"); err != nil {
			return reply{}, err
		}
		form = FormFlat
		for _, k := range []string{"video", "state", "language"} {
			if v, ok := obs.Get(k); ok {
				if _, isMap := v.(*wire.Map); isMap {
					form = FormNested
				}
			}
		}
		m = obs
	}
	c, err := s.o.Gateway.Contract(o.embodiment)
	if err != nil {
		return reply{}, protoError(err, 0, false)
	}
	b, err := mapObservation(m, c, form, s.o.MaxBatch, o)
	if err != nil {
		return reply{}, err
	}
	resps := make([]*service.PredictResponse, len(b.reqs))
	for i, r := range b.reqs {
		id := rid
		if len(b.reqs) > 1 {
			id = rid + "." + strconv.Itoa(i)
		}
		resp, err := s.o.Gateway.Predict(ctx, r, service.PredictOptions{RequestID: id, Protocol: "zmq", Route: "get_action"})
		if err != nil {
			return reply{}, protoError(err, i, b.batched)
		}
		resps[i] = resp
	}
	if enc == wire.EncodingNone {
		enc = wire.EncodingNPY
	}
	acts := wire.NewMap(len(c.Info.ActionGroups))
	for _, g := range c.Info.ActionGroups {
		h := c.Info.ActionHorizon
		vals := make([]float32, 0, len(resps)*h*g.Dim)
		for _, resp := range resps {
			rows := resp.Actions[g.Key]
			if len(rows) != h {
				return reply{}, fmt.Errorf("gateway returned %d rows for action group %s, want %d", len(rows), g.Key, h)
			}
			for _, row := range rows {
				for _, x := range row {
					vals = append(vals, float32(x))
				}
			}
		}
		shape := []int{len(resps), h, g.Dim}
		if !b.batched {
			shape = shape[1:]
		}
		key := g.Key
		if form != FormNested {
			key = "action." + g.Key
		}
		acts.Set(key, wire.Float32Array(shape, vals))
	}
	if form == FormLegacy {
		return reply{v: acts, enc: enc}, nil
	}
	info := wire.NewMap(1)
	if len(resps) == 1 && resps[0].RTC != nil { // what real-time chunking applied
		info.Set("rtc", resps[0].RTC.Wire())
	}
	if len(resps) == 1 && resps[0].Session != "" {
		info.Set("session_id", resps[0].Session)
	}
	if len(resps) == 1 && resps[0].Safety != nil { // the safety gate's report
		info.Set("safety", resps[0].Safety.Wire())
	}
	return reply{v: []any{acts, info}, enc: enc}, nil
}

// protoError restates a gateway error in the protocol's terms: fields
// images.<cam>[i] → video.<cam>[b, i], state.<g>[i] → state.<g>[b, 0, i],
// embodiment → options.embodiment, seed → options.seed, rtc_prev_action
// → options.rtc_prev_action (b: the sample of a batched observation).
func protoError(err error, b int, batched bool) error {
	return frontend.RenameField(err, func(p wire.Path) (wire.Path, bool) {
		var bi []int
		if batched {
			bi = []int{b}
		}
		switch {
		case len(p) == 1 && (p.HasPrefix("embodiment") || p.HasPrefix("seed") || p.HasPrefix("rtc_prev_action")):
			return p.WithHead(0, wire.AtKey("options")), true
		case len(p) == 1 && p.HasPrefix("session"): // the session's own chunk or state
			return p.WithHead(1, wire.AtKey("options"), wire.AtKey("session_id")), true
		case p.Below("images"):
			q := p.WithHead(1, wire.AtKey("video"))
			if r, ok := q.PrependIndex(bi...); ok {
				return r, true
			}
			return q, true
		case p.Below("state"):
			return p.PrependIndex(append(bi, 0)...)
		}
		return p, false
	})
}
