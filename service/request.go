package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"unicode/utf8"
)

// Request field names, as the reference server spells them.
const (
	fieldImages           = "images"
	fieldState            = "state"
	fieldInstruction      = "instruction"
	fieldEmbodiment       = "embodiment"
	fieldSeed             = "seed"
	fieldNoise            = "noise"
	fieldStateDtype       = "state_dtype"
	fieldReturnNormalized = "return_normalized"
	fieldOptions          = "options"
	fieldRTCPrev          = "rtc_prev_action"
	fieldSession          = "session"
)

// Real-time chunking options, upstream's names (PolicyClient.get_action's
// options; ../shared/spec/rtc.md §3).
const (
	optHorizon  = "action_horizon"
	optOverlap  = "rtc_overlap_steps"
	optFrozen   = "rtc_frozen_steps"
	optRampRate = "rtc_ramp_rate"
)

var rtcOptionKeys = []string{optHorizon, optOverlap, optFrozen, optRampRate}

// instructionAliases are the accepted names of the instruction field, in
// the order the reference server documents them.
var instructionAliases = []string{"instruction", "language", "prompt"}

// MaxInstructionChars bounds the instruction (characters, not bytes) of an
// embodiment whose plugin states no limit (EmbodimentInfo.InstructionChars).
const MaxInstructionChars = 2000

// Frame is one camera frame as a request sent it: a base64 string (JSON,
// msgpack str), encoded bytes (msgpack bin), or raw RGB pixels (msgpack
// {data, shape [H, W, 3]}, the robot protocols' uint8 arrays). Exactly one
// is set.
type Frame struct {
	B64     string
	Encoded []byte    // PNG or JPEG
	Raw     *RawFrame // uint8 RGB, skips image decoding
}

// Request is one prediction request in the gateway's own terms: what every
// front end (HTTP JSON and msgpack, the robot protocols) translates its
// message to before Core.Predict. Values are schema-checked but not yet
// checked against the served embodiment (the gateway does that).
type Request struct {
	// Images maps camera key → frames, oldest first.
	Images map[string][]Frame
	// State maps group → raw values (one time step); StateList is set
	// instead when the body sent state as [D_total] or [[D_total]].
	State     map[string][]float64
	StateList []float64
	// Instruction is the task text; InstructionField is the name it came
	// under (instruction, language, prompt, or a protocol's own key), for
	// error messages.
	Instruction      string
	InstructionField string
	// Embodiment is the embodiment tag; "" is the default.
	Embodiment string
	// Seed is set when the body sent one.
	Seed *uint64
	// Noise is the explicit noise, flattened, with its sent shape.
	Noise      []float32
	NoiseShape []int
	// StateDtype is "float32" (default) or "float64".
	StateDtype string
	// ReturnNormalized asks for action_pred_normalized and action_pred_valid_hd.
	ReturnNormalized bool
	// Options are the request's options (only the RTC keys are known);
	// nil when it sent none.
	Options *RTCOptions
	// RTCPrev is the previous chunk a stateless client sends for real-time
	// chunking (normalised, [RTCPrevRows, action_dim] flattened); nil: none.
	RTCPrev     []float32
	RTCPrevRows int
	// Session names the robot session the request belongs to (issue 27:
	// the /predict body's session or X-Session-ID, ZeroMQ's
	// options.session_id, OIP's session_id, an openpi connection); ""
	// is none. SessionField is the name it came under, for errors (""
	// means "session"). The service validates it (session.ValidateID).
	Session      string
	SessionField string
}

// RTCOptions are the real-time chunking options a request sent (nil: not
// sent); validate checks them against the previous chunk and the model.
type RTCOptions struct {
	Horizon, Overlap, Frozen *int
	RampRate                 *float64
	// OverlapAuto and FrozenAuto are set when the option was sent as
	// "auto" (its pointer is then nil): the service derives it from the
	// session's measurements (sessions.go).
	OverlapAuto, FrozenAuto bool
}

// maxBodyValues bounds the values (numbers, strings, array and map
// elements) of one request body. Each costs tens of bytes parsed whatever
// its encoded size, so without a bound a body of one-byte values under
// max_body_bytes parsed into 35–45× its size (~1 GB live for 30 MB); a
// DROID request has ~5,300 and raw frames as numbers ~700,000.
const maxBodyValues = 1 << 20

var errTooManyValues = fmt.Errorf("more than %d values in one body", maxBodyValues)

// decodeJSON parses a JSON body strictly: valid UTF-8, exactly one value,
// numbers kept as text until the schema decides their type.
func decodeJSON(body []byte) (*Request, error) {
	if !utf8.Valid(body) {
		return nil, schemaError("body", "body is not valid UTF-8")
	}
	v, err := parseJSON(body)
	if err != nil {
		return nil, bodyError("JSON", err)
	}
	return parseRequest(v)
}

// decodeMsgpack parses a msgpack body with the same schema as JSON; frames
// may be bin (raw image bytes) or str (base64).
func decodeMsgpack(body []byte) (*Request, error) {
	v, err := parseMsgpack(body)
	if err != nil {
		return nil, bodyError("msgpack", err)
	}
	return parseRequest(v)
}

func bodyError(format string, err error) error {
	if errors.Is(err, errTooManyValues) {
		return &HandlerError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Field: "body", Err: fmt.Errorf("body: %w", err)}
	}
	return schemaError("body", "body is not valid %s: %v", format, err)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case []byte:
		return "bytes"
	case bool:
		return "boolean"
	case json.Number, float32, float64, int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		return "number"
	case []any:
		return "array"
	case map[string]any, map[any]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// asObject returns v as a string-keyed map.
func asObject(v any, field string) (map[string]any, error) {
	switch m := v.(type) {
	case map[string]any:
		return m, nil
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, x := range m {
			ks, ok := k.(string)
			if !ok {
				return nil, schemaError(field, "%s: object keys must be strings, got %s", field, typeName(k))
			}
			out[ks] = x
		}
		return out, nil
	}
	return nil, schemaError(field, "%s: expected an object, got %s", field, typeName(v))
}

func parseRequest(v any) (*Request, error) {
	top, err := asObject(v, "body")
	if err != nil {
		return nil, err
	}
	known := map[string]bool{
		fieldImages: true, fieldState: true, fieldEmbodiment: true, fieldSeed: true, fieldNoise: true,
		fieldStateDtype: true, fieldReturnNormalized: true, fieldOptions: true, fieldRTCPrev: true, fieldSession: true,
	}
	for _, a := range instructionAliases {
		known[a] = true
	}
	// Deterministic order for error messages.
	names := make([]string, 0, len(top))
	for k := range top {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !known[k] {
			f := k
			if f == "" || !utf8.ValidString(f) {
				f = "body"
			}
			return nil, schemaError(f, "unknown field %q", k)
		}
		if !utf8.ValidString(k) {
			return nil, schemaError("body", "field name is not valid UTF-8")
		}
	}
	r := &Request{StateDtype: "float32"}

	for _, parse := range []func(map[string]any, *Request) error{parseImages, parseState, parseInstruction, parseOptional} {
		if err := parse(top, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// parseImages reads images (required): camera key → frames, each a base64
// string, encoded bytes or a raw frame.
func parseImages(top map[string]any, r *Request) error {
	iv, ok := top[fieldImages]
	if !ok || iv == nil {
		return schemaError(fieldImages, "field required: images")
	}
	im, err := asObject(iv, fieldImages)
	if err != nil {
		return err
	}
	r.Images = make(map[string][]Frame, len(im))
	for cam, fv := range im {
		field := fieldImages + "." + cam
		if !utf8.ValidString(cam) {
			return schemaError(fieldImages, "camera key is not valid UTF-8")
		}
		list, ok := fv.([]any)
		if !ok {
			return schemaError(field, "%s: expected an array of base64 images, got %s", field, typeName(fv))
		}
		frames := make([]Frame, len(list))
		for i, x := range list {
			switch s := x.(type) {
			case string:
				frames[i] = Frame{B64: s}
			case []byte:
				frames[i] = Frame{Encoded: s}
			case map[string]any:
				raw, err := parseRawFrame(s, fmt.Sprintf("%s[%d]", field, i))
				if err != nil {
					return err
				}
				frames[i] = Frame{Raw: raw}
			default:
				f := fmt.Sprintf("%s[%d]", field, i)
				return schemaError(f, "%s: expected a base64 string, encoded bytes or a raw frame {data, shape}, got %s", f, typeName(x))
			}
		}
		r.Images[cam] = frames
	}
	return nil
}

// parseState reads state (required): group → values, or one flat list.
func parseState(top map[string]any, r *Request) error {
	sv, ok := top[fieldState]
	if !ok || sv == nil {
		return schemaError(fieldState, "field required: state")
	}
	switch s := sv.(type) {
	case []any:
		vals, err := parseStateRows(s, fieldState)
		if err != nil {
			return err
		}
		r.StateList = vals
	default:
		sm, err := asObject(sv, fieldState)
		if err != nil {
			return err
		}
		r.State = make(map[string][]float64, len(sm))
		for g, gv := range sm {
			field := fieldState + "." + g
			list, ok := gv.([]any)
			if !ok {
				return schemaError(field, "%s: expected an array of numbers, got %s", field, typeName(gv))
			}
			vals, err := parseStateRows(list, field)
			if err != nil {
				return err
			}
			r.State[g] = vals
		}
	}
	return nil
}

// parseInstruction reads the instruction under exactly one of its aliases.
func parseInstruction(top map[string]any, r *Request) error {
	for _, a := range instructionAliases {
		x, ok := top[a]
		if !ok || x == nil {
			continue
		}
		if r.InstructionField != "" {
			return schemaError(a, "%s and %s are aliases: send only one", r.InstructionField, a)
		}
		s, ok := x.(string)
		if !ok {
			return schemaError(a, "%s: expected a string, got %s", a, typeName(x))
		}
		if !utf8.ValidString(s) {
			return schemaError(a, "%s is not valid UTF-8", a)
		}
		r.Instruction, r.InstructionField = s, a
	}
	if r.InstructionField == "" {
		return schemaError(fieldInstruction, "field required: instruction (or language, prompt)")
	}
	return nil
}

// parseOptional reads the optional fields: embodiment, state_dtype,
// return_normalized, options, rtc_prev_action, seed, noise.
func parseOptional(top map[string]any, r *Request) error {
	if x, ok := top[fieldEmbodiment]; ok && x != nil {
		s, ok := x.(string)
		if !ok {
			return schemaError(fieldEmbodiment, "embodiment: expected a string, got %s", typeName(x))
		}
		r.Embodiment = s
	}
	if x, ok := top[fieldStateDtype]; ok && x != nil {
		s, ok := x.(string)
		if !ok {
			return schemaError(fieldStateDtype, "state_dtype: expected a string, got %s", typeName(x))
		}
		r.StateDtype = s
	}
	if x, ok := top[fieldReturnNormalized]; ok && x != nil {
		b, ok := x.(bool)
		if !ok {
			return schemaError(fieldReturnNormalized, "return_normalized: expected a boolean, got %s", typeName(x))
		}
		r.ReturnNormalized = b
	}
	if x, ok := top[fieldOptions]; ok && x != nil {
		o, err := parseOptions(x)
		if err != nil {
			return err
		}
		r.Options = o
	}
	if x, ok := top[fieldRTCPrev]; ok && x != nil {
		vals, shape, err := parseMatrix(x, fieldRTCPrev)
		if err != nil {
			return err
		}
		if len(shape) != 2 {
			return invalid(fieldRTCPrev, "rtc_prev_action: expected [rows, action_dim], got shape %v", shape)
		}
		r.RTCPrev, r.RTCPrevRows = vals, shape[0]
	}
	if x, ok := top[fieldSession]; ok && x != nil {
		s, ok := x.(string)
		if !ok {
			return schemaError(fieldSession, "session: expected a string, got %s", typeName(x))
		}
		r.Session, r.SessionField = s, fieldSession
	}
	if x, ok := top[fieldSeed]; ok && x != nil {
		seed, err := parseSeed(x)
		if err != nil {
			return err
		}
		r.Seed = &seed
	}
	if x, ok := top[fieldNoise]; ok && x != nil {
		if err := parseNoise(r, x); err != nil {
			return err
		}
	}
	return nil
}

// DecodeJSON parses a /predict JSON body into a Request: strictly (valid
// UTF-8, exactly one value, the schema's types; errors are 422 or 400
// HandlerErrors naming the field, 413 past the value bound).
func DecodeJSON(body []byte) (*Request, error) { return decodeJSON(body) }

// DecodeMsgpack parses a /predict msgpack body into a Request with the
// JSON schema; frames may be bin (encoded image bytes), str (base64) or
// raw {data, shape}.
func DecodeMsgpack(body []byte) (*Request, error) { return decodeMsgpack(body) }
