package zmq

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

// Form is the shape of a get_action observation.
type Form int

const (
	// FormNested is Isaac-GR00T N1.6/N1.7's Gr00tPolicy observation:
	// {"video": {camera: uint8 (B, T, H, W, 3)}, "state": {group: float32
	// (B, T, D)}, "language": {key: [[str]] (B, 1)}}, inside data =
	// {"observation": ..., "options": ...}; the reply is [action, info]
	// with action {key: float32 (B, horizon, D)}.
	FormNested Form = iota
	// FormFlat is N1.7's Gr00tSimPolicyWrapper observation inside the same
	// envelope: flat keys video.<camera> (B, T, H, W, 3), state.<group>
	// float32 (B, T, D), the language key itself with [str] (B,); the
	// reply is [{"action.<key>": (B, horizon, D)}, info].
	FormFlat
	// FormLegacy is N1.5's: data is the flat observation itself (no
	// "observation" envelope), video (T, H, W, 3) or (B, T, H, W, 3),
	// state (T, D) or (B, T, D) float32 or float64, language [str]; the
	// reply is the flat action map itself, (horizon, D) per key for an
	// unbatched observation.
	FormLegacy
)

// String names the form.
func (f Form) String() string {
	return [...]string{"nested", "flat", "legacy"}[f]
}

// batch is one get_action observation mapped to gateway requests, one per
// sample.
type batch struct {
	reqs     []*service.Request
	form     Form
	batched  bool // false: an unbatched N1.5 observation, answered (horizon, D)
	contract *service.Contract
}

// options are get_action's (and get_modality_config's) options: the
// embodiment tag, an optional seed, and real-time chunking under
// upstream's names (action_horizon, rtc_overlap_steps, rtc_frozen_steps,
// rtc_ramp_rate) with the previous chunk as rtc_prev_action (a float
// array [rows, action_dim] or [1, rows, action_dim], normalised). Any
// other key is refused (a misspelt option must not be silently ignored).
type options struct {
	embodiment string
	seed       *uint64
	rtc        *service.RTCOptions
	prev       []float32
	prevRows   int
	// session is options.session_id: the robot session (its last chunk
	// seeds real-time chunking; reset clears it). "" is none.
	session string
}

// fieldSessionID is the ZeroMQ name of a session id.
const fieldSessionID = "options.session_id"

// invalid (400) and schema (422) name the failing field, as /predict does.
var invalid, schema = service.Invalid, service.SchemaError

func parseOptions(v any, field string) (options, error) {
	var o options
	if v == nil {
		return o, nil
	}
	m, ok := v.(*wire.Map)
	if !ok {
		return o, schema(field, "%s: expected a map or nil, got %s", field, wire.TypeName(v))
	}
	if err := service.CheckOptionKeys(m, field, "embodiment", "seed", "session_id"); err != nil {
		return o, err
	}
	if e, ok := m.Get("embodiment"); ok && e != nil {
		s, ok := e.(string)
		if !ok {
			return o, schema(field+".embodiment", "%s.embodiment: expected a str, got %s", field, wire.TypeName(e))
		}
		o.embodiment = s
	}
	if sv, ok := m.Get("seed"); ok && sv != nil {
		var seed uint64
		switch n := sv.(type) {
		case int64:
			if n < 0 {
				return o, invalid(field+".seed", "%s.seed: %d is negative", field, n)
			}
			seed = uint64(n)
		case uint64:
			seed = n
		default:
			return o, schema(field+".seed", "%s.seed: expected an int, got %s", field, wire.TypeName(sv))
		}
		o.seed = &seed
	}
	if sv, ok := m.Get("session_id"); ok && sv != nil {
		id, ok := sv.(string)
		if !ok {
			return o, schema(field+".session_id", "%s.session_id: expected a str, got %s", field, wire.TypeName(sv))
		}
		if err := service.CheckSessionID(id, field+".session_id"); err != nil {
			return o, err
		}
		o.session = id
	}
	var err error
	o.rtc, o.prev, o.prevRows, err = service.RTCFromWire(m, field)
	return o, err
}

// observationMapper maps one observation against a contract.
type observationMapper struct {
	c        *service.Contract
	form     Form
	maxBatch int
	b        int    // batch size, -1 until the first modality sets it
	bFrom    string // the field that set it
	batched  bool
}

// mapObservation checks obs (arrays already resolved) against the
// contract and builds one gateway request per sample. Every error names
// the field in the protocol's terms, e.g. "video.wrist_image_left:
// expected uint8 (B, 2, H, W, 3), got float32 (1, 1, 180, 320, 3)".
func mapObservation(obs *wire.Map, c *service.Contract, form Form, maxBatch int, o options) (*batch, error) {
	m := &observationMapper{c: c, form: form, maxBatch: maxBatch, b: -1, batched: true}
	var (
		video = map[string]any{}
		state = map[string]any{}
		lang  any
		langF string
	)
	cams, groups := c.Info.Cameras, c.Info.StateGroups
	langKey := c.LanguageKey()
	if form == FormNested {
		for i, k := range obs.Keys {
			v := obs.Values[i]
			switch {
			case k.Bin:
				return nil, schema("observation", "observation: bin key %q (want str keys video, state, language)", k.Name)
			case k.Name == "video" || k.Name == "state":
				sub, ok := v.(*wire.Map)
				if !ok {
					return nil, schema(k.Name, "%s: expected a map of %s, got %s", k.Name, map[string]string{"video": "camera → uint8 ndarray", "state": "group → float32 ndarray"}[k.Name], wire.TypeName(v))
				}
				dst := video
				if k.Name == "state" {
					dst = state
				}
				for j, sk := range sub.Keys {
					dst[sk.Name] = sub.Values[j]
				}
			case k.Name == "language":
				sub, ok := v.(*wire.Map)
				if !ok {
					return nil, schema("language", "language: expected a map {%q: [[str]]}, got %s", langKey, wire.TypeName(v))
				}
				for j, sk := range sub.Keys {
					if sk.Name != langKey {
						return nil, invalid("language."+sk.Name, "language.%s: unknown language key (want %s)", sk.Name, langKey)
					}
					lang = sub.Values[j]
				}
				langF = "language." + langKey
			default:
				return nil, invalid("observation."+k.Name, "observation.%s: unknown key (want video, state, language)", k.Name)
			}
		}
		if _, ok := obs.Get("language"); !ok || lang == nil {
			return nil, invalid("language."+langKey, "language.%s: missing (want [[str]] of shape (B, 1))", langKey)
		}
	} else {
		var annotations []string
		for i, k := range obs.Keys {
			v := obs.Values[i]
			switch {
			case strings.HasPrefix(k.Name, "video."):
				video[strings.TrimPrefix(k.Name, "video.")] = v
			case strings.HasPrefix(k.Name, "state."):
				state[strings.TrimPrefix(k.Name, "state.")] = v
			case k.Name == langKey || strings.HasPrefix(k.Name, "annotation.") || k.Name == "task":
				annotations = append(annotations, k.Name)
				lang, langF = v, k.Name
			default:
				return nil, invalid(k.Name, "%s: unknown key (want video.<camera> for %s; state.<group> for %s; %s)", k.Name,
					strings.Join(cams, ", "), groupKeys(groups), langKey)
			}
		}
		if len(annotations) > 1 {
			if slices.Contains(annotations, langKey) {
				lang, _ = obs.Get(langKey)
				langF = langKey
			} else {
				return nil, invalid(annotations[1], "%s: more than one language key (%s); send %s", annotations[1], strings.Join(annotations, ", "), langKey)
			}
		}
		if lang == nil {
			return nil, invalid(langKey, "%s: missing (want [str] of length B)", langKey)
		}
	}
	vf := func(cam string) string { return "video." + cam }
	sf := func(g string) string { return "state." + g }
	for cam := range video {
		if !slices.Contains(cams, cam) {
			return nil, invalid(vf(cam), "%s: unknown camera (want %s)", vf(cam), strings.Join(cams, ", "))
		}
	}
	for g := range state {
		if !slices.ContainsFunc(groups, func(x service.Group) bool { return x.Key == g }) {
			return nil, invalid(sf(g), "%s: unknown state group (want %s)", sf(g), groupKeys(groups))
		}
	}

	// Video: (B, T, H, W, 3) uint8 per camera, the embodiment's T.
	t := len(c.Info.VideoDeltaIndices)
	type camFrames struct {
		a    *wire.Array
		h, w int
	}
	frames := make([]camFrames, len(cams))
	for i, cam := range cams {
		v, ok := video[cam]
		if !ok {
			return nil, invalid(vf(cam), "%s: missing camera (want %s)", vf(cam), strings.Join(cams, ", "))
		}
		a, err := m.video(vf(cam), v, t)
		if err != nil {
			return nil, err
		}
		r := len(a.Shape)
		frames[i] = camFrames{a: a, h: a.Shape[r-3], w: a.Shape[r-2]}
	}

	// State: (B, Ts, D) float32 per group.
	ts := c.StateSteps()
	stateVals := make([][]float64, len(groups))
	for i, g := range groups {
		v, ok := state[g.Key]
		if !ok {
			return nil, invalid(sf(g.Key), "%s: missing state group (want %s)", sf(g.Key), groupKeys(groups))
		}
		vals, err := m.state(sf(g.Key), v, ts, g.Dim)
		if err != nil {
			return nil, err
		}
		stateVals[i] = vals
	}

	// Language.
	texts, err := m.language(langF, lang)
	if err != nil {
		return nil, err
	}

	if (o.rtc != nil || o.prev != nil) && m.b > 1 {
		return nil, invalid("options.rtc_prev_action", "options: real-time chunking takes one observation per call (this one has a batch of %d)", m.b)
	}
	if o.session != "" && m.b > 1 {
		return nil, invalid(fieldSessionID, "%s: a session is one robot: send one observation per call (this one has a batch of %d)", fieldSessionID, m.b)
	}
	out := &batch{form: form, batched: m.batched, contract: c, reqs: make([]*service.Request, m.b)}
	for b := range m.b {
		r := &service.Request{
			Images: make(map[string][]service.Frame, len(cams)), State: make(map[string][]float64, len(groups)),
			Instruction: texts[b], InstructionField: indexed(langF, b, m.batched),
			Embodiment: c.Info.Name, StateDtype: "float32", Seed: o.seed,
			Options: o.rtc, RTCPrev: o.prev, RTCPrevRows: o.prevRows,
		}
		if o.session != "" {
			r.Session, r.SessionField = o.session, fieldSessionID
		}
		for i, cam := range cams {
			f := frames[i]
			size := f.h * f.w * 3
			list := make([]service.Frame, t)
			for k := range t {
				off := (b*t + k) * size
				list[k] = service.Frame{Raw: &service.RawFrame{Pix: f.a.Data[off : off+size : off+size], Height: f.h, Width: f.w}}
			}
			r.Images[cam] = list
		}
		for i, g := range groups {
			// The last state step is the current one (Ts is 1 for every
			// released embodiment).
			off := (b*ts + ts - 1) * g.Dim
			r.State[g.Key] = stateVals[i][off : off+g.Dim]
		}
		out.reqs[b] = r
	}
	return out, nil
}

func groupKeys(gs []service.Group) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.Key
	}
	return strings.Join(parts, ", ")
}

// indexed appends a batch index to a field of a batched observation.
func indexed(field string, b int, batched bool) string {
	if !batched {
		return field
	}
	return field + "[" + strconv.Itoa(b) + "]"
}

// setBatch records the batch size a field implies and checks it against
// the others and the maximum.
func (m *observationMapper) setBatch(field string, b int) error {
	if b < 1 {
		return invalid(field, "%s: batch size %d (want at least one observation)", field, b)
	}
	if m.b < 0 {
		if b > m.maxBatch {
			return invalid(field, "%s: batch of %d observations, at most %d (zmq.max_batch)", field, b, m.maxBatch)
		}
		m.b, m.bFrom = b, field
		return nil
	}
	if b != m.b {
		return invalid(field, "%s: batch size %d, but %s has %d", field, b, m.bFrom, m.b)
	}
	return nil
}

func (m *observationMapper) video(field string, v any, t int) (*wire.Array, error) {
	want := fmt.Sprintf("uint8 (B, %d, H, W, 3)", t)
	if m.form == FormLegacy {
		want = fmt.Sprintf("uint8 (%d, H, W, 3) or (B, %d, H, W, 3)", t, t)
	}
	a, ok := v.(*wire.Array)
	if !ok {
		return nil, schema(field, "%s: expected %s ndarray, got %s", field, want, wire.TypeName(v))
	}
	shape := a.Shape
	if m.form == FormLegacy && len(shape) == 4 {
		shape = append([]int{1}, shape...)
		m.batched = false
	}
	if a.DType != "|u1" || len(shape) != 5 || shape[1] != t || shape[4] != 3 || shape[2] < 1 || shape[3] < 1 {
		return nil, invalid(field, "%s: expected %s, got %s", field, want, a)
	}
	if err := m.setBatch(field, shape[0]); err != nil {
		return nil, err
	}
	return &wire.Array{DType: a.DType, Shape: shape, Data: a.Data}, nil
}

func (m *observationMapper) state(field string, v any, ts, dim int) ([]float64, error) {
	want := fmt.Sprintf("float32 (B, %d, %d)", ts, dim)
	if m.form == FormLegacy {
		want = fmt.Sprintf("float32 or float64 (%d, %d) or (B, %d, %d)", ts, dim, ts, dim)
	}
	a, ok := v.(*wire.Array)
	if !ok {
		return nil, schema(field, "%s: expected %s ndarray, got %s", field, want, wire.TypeName(v))
	}
	shape := a.Shape
	if m.form == FormLegacy && len(shape) == 2 {
		shape = append([]int{1}, shape...)
	}
	okType := a.DType == "<f4" || (m.form == FormLegacy && a.DType == "<f8")
	if !okType || len(shape) != 3 || shape[1] != ts || shape[2] != dim {
		return nil, invalid(field, "%s: expected %s, got %s", field, want, a)
	}
	if err := m.setBatch(field, shape[0]); err != nil {
		return nil, err
	}
	vals := a.Float64s()
	for i, x := range vals {
		if a.DType == "<f8" {
			x = float64(float32(x)) // served as float32, as N1.7 requires
			vals[i] = x
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			b, rest := i/(ts*dim), i%(ts*dim)
			idx := fmt.Sprintf("[%d, %d, %d]", b, rest/dim, rest%dim)
			if !m.batched {
				idx = fmt.Sprintf("[%d, %d]", rest/dim, rest%dim)
			}
			return nil, invalid(field, "%s%s: %v is not finite", field, idx, x)
		}
	}
	return vals, nil
}

func (m *observationMapper) language(field string, v any) ([]string, error) {
	nested := m.form == FormNested
	want := "[str] of length B"
	if nested {
		want = "[[str]] of shape (B, 1)"
	}
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case string:
		if m.form == FormLegacy {
			list = []any{x}
			break
		}
		return nil, schema(field, "%s: expected %s, got str", field, want)
	default:
		return nil, schema(field, "%s: expected %s, got %s", field, want, wire.TypeName(v))
	}
	if m.form == FormLegacy && !m.batched && len(list) == 1 {
		// unbatched: one instruction
	} else if err := m.setBatch(field, len(list)); err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, item := range list {
		if nested {
			inner, ok := item.([]any)
			if !ok || len(inner) != 1 {
				got := wire.TypeName(item)
				if ok {
					got = fmt.Sprintf("%d items", len(inner))
				}
				return nil, invalid(field, "%s[%d]: expected [str] (one instruction per observation), got %s", field, i, got)
			}
			item = inner[0]
		}
		s, ok := item.(string)
		if !ok {
			return nil, schema(field, "%s[%d]: expected a str, got %s", field, i, wire.TypeName(item))
		}
		out[i] = s
	}
	return out, nil
}
