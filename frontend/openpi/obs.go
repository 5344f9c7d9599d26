package openpi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/frontend"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

// Observation keys.
const (
	// KeyPrefix prefixes camera and state-group keys: observation/<name>.
	KeyPrefix = "observation/"
	// KeyPrompt is the instruction.
	KeyPrompt = "prompt"
	// KeyEmbodiment optionally names the embodiment (default: the
	// server's).
	KeyEmbodiment = "embodiment"
	// KeySeed optionally seeds the noise (default: the model's seed).
	KeySeed = "seed"
	// KeyOptions optionally holds real-time chunking under upstream's
	// names and the previous chunk (service.RTCFromWire).
	KeyOptions = "options"
	// KeySession optionally names the robot session (a str, see
	// service.CheckSessionID); without it the connection is the session.
	KeySession = "session_id"
)

// invalid (400) and schema (422) name the failing field, as /predict does.
var invalid, schema = service.Invalid, service.SchemaError

// mapObservation decodes one observation frame into a gateway request for
// the contract its embodiment key selects.
func mapObservation(data []byte, g service.Service, lim wire.Limits) (*service.Request, *service.Contract, error) {
	v, err := wire.Decode(data, lim)
	if err != nil {
		return nil, nil, schema("observation", "observation: not valid msgpack: %v", err)
	}
	v, _, err = wire.Resolve(v, "observation")
	if err != nil {
		return nil, nil, invalid("observation", "%v", err)
	}
	m, ok := v.(*wire.Map)
	if !ok {
		return nil, nil, schema("observation", "observation: expected a map of observation/<key>, prompt, got %s", wire.TypeName(v))
	}
	r := &service.Request{Images: map[string][]service.Frame{}, State: map[string][]float64{}, InstructionField: KeyPrompt, StateDtype: "float32"}
	var prompt any
	for i, k := range m.Keys {
		if k.Bin {
			return nil, nil, schema("observation", "observation: bin key %q (want str keys)", k.Name)
		}
		x := m.Values[i]
		switch k.Name {
		case KeyPrompt:
			prompt = x
		case KeyEmbodiment:
			s, ok := x.(string)
			if !ok && x != nil {
				return nil, nil, schema(KeyEmbodiment, "embodiment: expected a str, got %s", wire.TypeName(x))
			}
			r.Embodiment = s
		case KeySeed:
			var seed uint64
			switch n := x.(type) {
			case int64:
				if n < 0 {
					return nil, nil, invalid(KeySeed, "seed: %d is negative", n)
				}
				seed = uint64(n)
			case uint64: // the decoder's type for 2⁶³ and above
				seed = n
			default:
				return nil, nil, schema(KeySeed, "seed: expected a non-negative int, got %s", wire.TypeName(x))
			}
			r.Seed = &seed
		case KeySession:
			if x == nil {
				continue
			}
			id, ok := x.(string)
			if !ok {
				return nil, nil, schema(KeySession, "session_id: expected a str, got %s", wire.TypeName(x))
			}
			if err := service.CheckSessionID(id, KeySession); err != nil {
				return nil, nil, err
			}
			r.Session, r.SessionField = id, KeySession
		case KeyOptions:
			if x == nil {
				continue
			}
			om, ok := x.(*wire.Map)
			if !ok {
				return nil, nil, schema(KeyOptions, "options: expected a map, got %s", wire.TypeName(x))
			}
			if err := service.CheckOptionKeys(om, KeyOptions); err != nil {
				return nil, nil, err
			}
			if r.Options, r.RTCPrev, r.RTCPrevRows, err = service.RTCFromWire(om, KeyOptions); err != nil {
				return nil, nil, err
			}
		}
	}
	c, err := g.Contract(r.Embodiment)
	if err != nil {
		return nil, nil, err
	}
	r.Embodiment = c.Info.Name
	if prompt == nil {
		return nil, nil, invalid(KeyPrompt, "prompt: missing (the instruction, a str)")
	}
	if r.Instruction, ok = prompt.(string); !ok {
		return nil, nil, schema(KeyPrompt, "prompt: expected a str, got %s", wire.TypeName(prompt))
	}
	cams, groups := c.Info.Cameras, c.Info.StateGroups
	t := len(c.Info.VideoDeltaIndices)
	want := func() string {
		return fmt.Sprintf("%s<camera> for %s; %s<group> for %s; prompt; embodiment; seed; options; session_id", KeyPrefix, strings.Join(cams, ", "), KeyPrefix, groupKeys(groups))
	}
	for i, k := range m.Keys {
		name, ok := strings.CutPrefix(k.Name, KeyPrefix)
		if !ok {
			if k.Name != KeyPrompt && k.Name != KeyEmbodiment && k.Name != KeySeed && k.Name != KeyOptions && k.Name != KeySession {
				return nil, nil, invalid(k.Name, "%s: unknown key (want %s)", k.Name, want())
			}
			continue
		}
		x := m.Values[i]
		switch {
		case slices.Contains(cams, name):
			frames, err := videoFrames(k.Name, x, t)
			if err != nil {
				return nil, nil, err
			}
			r.Images[name] = frames
		case slices.ContainsFunc(groups, func(g service.Group) bool { return g.Key == name }):
			dim := 0
			for _, g := range groups {
				if g.Key == name {
					dim = g.Dim
				}
			}
			vals, err := stateValues(k.Name, x, dim)
			if err != nil {
				return nil, nil, err
			}
			r.State[name] = vals
		default:
			return nil, nil, invalid(k.Name, "%s: unknown key (want %s)", k.Name, want())
		}
	}
	for _, cam := range cams {
		if _, ok := r.Images[cam]; !ok {
			return nil, nil, invalid(KeyPrefix+cam, "%s%s: missing camera (want %s)", KeyPrefix, cam, videoShape(t))
		}
	}
	for _, g := range groups {
		if _, ok := r.State[g.Key]; !ok {
			return nil, nil, invalid(KeyPrefix+g.Key, "%s%s: missing state group (want float (%d,))", KeyPrefix, g.Key, g.Dim)
		}
	}
	return r, c, nil
}

func videoShape(t int) string {
	if t == 1 {
		return "uint8 (H, W, 3) or (1, H, W, 3)"
	}
	return fmt.Sprintf("uint8 (%d, H, W, 3)", t)
}

func videoFrames(field string, x any, t int) ([]service.Frame, error) {
	a, ok := x.(*wire.Array)
	if !ok {
		return nil, schema(field, "%s: expected a %s ndarray, got %s", field, videoShape(t), wire.TypeName(x))
	}
	shape := a.Shape
	if t == 1 && len(shape) == 3 {
		shape = append([]int{1}, shape...)
	}
	if a.DType != "|u1" || len(shape) != 4 || shape[0] != t || shape[3] != 3 || shape[1] < 1 || shape[2] < 1 {
		return nil, invalid(field, "%s: expected %s, got %s", field, videoShape(t), a)
	}
	h, w := shape[1], shape[2]
	size := h * w * 3
	out := make([]service.Frame, t)
	for i := range out {
		out[i] = service.Frame{Raw: &service.RawFrame{Pix: a.Data[i*size : (i+1)*size : (i+1)*size], Height: h, Width: w}}
	}
	return out, nil
}

func stateValues(field string, x any, dim int) ([]float64, error) {
	var vals []float64
	switch a := x.(type) {
	case *wire.Array:
		n := a.Len()
		okShape := (len(a.Shape) == 1 && n == dim) || (len(a.Shape) == 2 && a.Shape[0] == 1 && a.Shape[1] == dim)
		if (a.DType != "<f4" && a.DType != "<f8") || !okShape {
			return nil, invalid(field, "%s: expected float32 or float64 (%d,), got %s", field, dim, a)
		}
		vals = a.Float64s()
	case []any:
		if len(a) != dim {
			return nil, invalid(field, "%s: expected %d numbers, got %d", field, dim, len(a))
		}
		vals = make([]float64, dim)
		for i, e := range a {
			switch n := e.(type) {
			case float64:
				vals[i] = n
			case float32:
				vals[i] = float64(n)
			case int64:
				vals[i] = float64(n)
			default:
				return nil, schema(field, "%s[%d]: expected a number, got %s", field, i, wire.TypeName(e))
			}
		}
	default:
		return nil, schema(field, "%s: expected a float (%d,) ndarray, got %s", field, dim, wire.TypeName(x))
	}
	for i, v := range vals {
		v = float64(float32(v)) // served as float32, as the model's state
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, invalid(field, "%s[%d]: %v is not finite", field, i, v)
		}
		vals[i] = v
	}
	return vals, nil
}

func groupKeys(gs []service.Group) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.Key
	}
	return strings.Join(parts, ", ")
}

// infer serves one observation frame and returns the reply frame.
func (s *Server) infer(ctx context.Context, data []byte, rid string, start time.Time, prevTotal time.Duration, peer string, sess *connSession) (out []byte, err error) {
	ctx, end := s.o.Gateway.StartMessage(ctx, service.Message{Protocol: "openpi", Endpoint: "infer", RequestID: rid, Start: start, Peer: peer})
	defer func() {
		code := ""
		if err != nil {
			code = service.CodeInternal
			var he *service.HandlerError
			if errors.As(err, &he) {
				code = he.Code
			}
		}
		end(code, err)
	}()
	r, c, err := mapObservation(data, s.o.Gateway, wire.Limits{MaxElements: s.o.MaxElements})
	if err != nil {
		return nil, err
	}
	if err := sess.bind(s.o.Gateway, r); err != nil {
		return nil, err
	}
	t0 := time.Now()
	resp, err := s.o.Gateway.Predict(ctx, r, service.PredictOptions{RequestID: rid, Protocol: "openpi", Route: "infer"})
	inferMS := float64(time.Since(t0).Microseconds()) / 1e3
	if err != nil {
		return nil, protoError(err)
	}
	h, total := c.Info.ActionHorizon, c.ActionDim()
	flat := make([]float32, h*total)
	groups := wire.NewMap(len(c.Info.ActionGroups))
	off := 0
	for _, g := range c.Info.ActionGroups {
		rows := resp.Actions[g.Key]
		if len(rows) != h {
			return nil, fmt.Errorf("gateway returned %d rows for action group %s, want %d", len(rows), g.Key, h)
		}
		gv := make([]float32, 0, h*g.Dim)
		for i, row := range rows {
			for d, x := range row {
				flat[i*total+off+d] = float32(x)
				gv = append(gv, float32(x))
			}
		}
		groups.Set(g.Key, wire.Float32Array([]int{h, g.Dim}, gv))
		off += g.Dim
	}
	timing := wire.NewMap(2).Set("infer_ms", inferMS)
	if prevTotal >= 0 {
		timing.Set("prev_total_ms", float64(prevTotal.Microseconds())/1e3)
	}
	reply := wire.NewMap(6).Set("actions", wire.Float32Array([]int{h, total}, flat)).Set("action_groups", groups).
		Set("server_timing", timing).Set("request_id", rid).Set("embodiment", c.Info.Name)
	if resp.RTC != nil { // what real-time chunking applied
		reply.Set("rtc", resp.RTC.Wire())
	}
	if resp.Session != "" && r.SessionField == KeySession { // a named session; the connection's own stays internal
		reply.Set("session_id", resp.Session)
	}
	if resp.Safety != nil { // the safety gate's report
		reply.Set("safety", resp.Safety.Wire())
	}
	return wire.Marshal(reply, wire.EncodingOpenPI)
}

// protoError restates a gateway error in the protocol's keys:
// images.<cam>[i] → observation/<cam>[i], state.<g>[i] → observation/<g>[i],
// rtc_prev_action → options.rtc_prev_action.
func protoError(err error) error {
	return frontend.RenameField(err, func(p wire.Path) (wire.Path, bool) {
		switch {
		case p.Below("images") || p.Below("state"):
			return p.WithHead(2, wire.AtKey(KeyPrefix+p[1].Key)), true
		case len(p) == 1 && p.HasPrefix("rtc_prev_action"):
			return p.WithHead(0, wire.AtKey(KeyOptions)), true
		case len(p) == 1 && p.HasPrefix("session"):
			return p.WithHead(1, wire.AtKey(KeySession)), true
		}
		return p, false
	})
}

// metadata is the frame sent on connect: the served embodiments'
// contracts, keyed by tag, in the observation's own key names.
func metadata(s *Server) []byte {
	m := wire.NewMap(8).Set("server", "gr00tgw").Set("protocol", "openpi").Set("version", s.o.Version)
	embs := wire.NewMap(4)
	def := ""
	for _, c := range s.o.Gateway.Contracts() {
		if c.Default {
			def = c.Info.Name
		}
		info := c.Info
		var imageKeys, stateKeys, actionKeys []any
		stateDims, actionDims := wire.NewMap(len(info.StateGroups)), wire.NewMap(len(info.ActionGroups))
		for _, cam := range info.Cameras {
			imageKeys = append(imageKeys, KeyPrefix+cam)
		}
		for _, g := range info.StateGroups {
			stateKeys = append(stateKeys, KeyPrefix+g.Key)
			stateDims.Set(g.Key, g.Dim)
		}
		for _, g := range info.ActionGroups {
			actionKeys = append(actionKeys, g.Key)
			actionDims.Set(g.Key, g.Dim)
		}
		frameShape := strings.TrimPrefix(videoShape(len(info.VideoDeltaIndices)), "uint8 ") // what a frame may be, as errors say it
		e := wire.NewMap(14).Set("embodiment_id", info.ID).Set("plugin", info.Plugin).Set("plugin_version", info.PluginVersion).
			Set("image_keys", imageKeys).Set("frames_per_camera", len(info.VideoDeltaIndices)).Set("video_delta_indices", info.VideoDeltaIndices).
			Set("image_shape", frameShape).Set("state_keys", stateKeys).Set("state_dims", stateDims).
			Set("action_keys", actionKeys).Set("action_dims", actionDims).Set("action_horizon", info.ActionHorizon).
			Set("action_dim", c.ActionDim()).Set("language_key", c.LanguageKey())
		embs.Set(info.Name, e)
	}
	m.Set("default_embodiment", def).Set("embodiments", embs)
	for k, v := range s.o.Metadata {
		m.Set(k, v)
	}
	b, err := wire.Marshal(m, wire.EncodingOpenPI)
	if err != nil {
		b, _ = wire.Marshal(wire.NewMap(1).Set("error", err.Error()), wire.EncodingOpenPI)
	}
	return b
}
