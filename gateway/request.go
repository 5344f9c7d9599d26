package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gr00tgw/gr00tgw/core/b64"
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
// message to before Server.Predict. Values are schema-checked but not yet
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
}

// RTCOptions are the real-time chunking options a request sent (nil: not
// sent); validate checks them against the previous chunk and the model.
type RTCOptions struct {
	Horizon, Overlap, Frozen *int
	RampRate                 *float64
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
		fieldStateDtype: true, fieldReturnNormalized: true, fieldOptions: true, fieldRTCPrev: true,
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

	// images (required).
	iv, ok := top[fieldImages]
	if !ok || iv == nil {
		return nil, schemaError(fieldImages, "field required: images")
	}
	im, err := asObject(iv, fieldImages)
	if err != nil {
		return nil, err
	}
	r.Images = make(map[string][]Frame, len(im))
	for cam, fv := range im {
		field := fieldImages + "." + cam
		if !utf8.ValidString(cam) {
			return nil, schemaError(fieldImages, "camera key is not valid UTF-8")
		}
		list, ok := fv.([]any)
		if !ok {
			return nil, schemaError(field, "%s: expected an array of base64 images, got %s", field, typeName(fv))
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
					return nil, err
				}
				frames[i] = Frame{Raw: raw}
			default:
				f := fmt.Sprintf("%s[%d]", field, i)
				return nil, schemaError(f, "%s: expected a base64 string, encoded bytes or a raw frame {data, shape}, got %s", f, typeName(x))
			}
		}
		r.Images[cam] = frames
	}

	// state (required).
	sv, ok := top[fieldState]
	if !ok || sv == nil {
		return nil, schemaError(fieldState, "field required: state")
	}
	switch s := sv.(type) {
	case []any:
		vals, err := parseStateRows(s, fieldState)
		if err != nil {
			return nil, err
		}
		r.StateList = vals
	default:
		sm, err := asObject(sv, fieldState)
		if err != nil {
			return nil, err
		}
		r.State = make(map[string][]float64, len(sm))
		for g, gv := range sm {
			field := fieldState + "." + g
			list, ok := gv.([]any)
			if !ok {
				return nil, schemaError(field, "%s: expected an array of numbers, got %s", field, typeName(gv))
			}
			vals, err := parseStateRows(list, field)
			if err != nil {
				return nil, err
			}
			r.State[g] = vals
		}
	}

	// instruction and its aliases (exactly one required).
	for _, a := range instructionAliases {
		x, ok := top[a]
		if !ok || x == nil {
			continue
		}
		if r.InstructionField != "" {
			return nil, schemaError(a, "%s and %s are aliases: send only one", r.InstructionField, a)
		}
		s, ok := x.(string)
		if !ok {
			return nil, schemaError(a, "%s: expected a string, got %s", a, typeName(x))
		}
		if !utf8.ValidString(s) {
			return nil, schemaError(a, "%s is not valid UTF-8", a)
		}
		r.Instruction, r.InstructionField = s, a
	}
	if r.InstructionField == "" {
		return nil, schemaError(fieldInstruction, "field required: instruction (or language, prompt)")
	}

	if x, ok := top[fieldEmbodiment]; ok && x != nil {
		s, ok := x.(string)
		if !ok {
			return nil, schemaError(fieldEmbodiment, "embodiment: expected a string, got %s", typeName(x))
		}
		r.Embodiment = s
	}
	if x, ok := top[fieldStateDtype]; ok && x != nil {
		s, ok := x.(string)
		if !ok {
			return nil, schemaError(fieldStateDtype, "state_dtype: expected a string, got %s", typeName(x))
		}
		r.StateDtype = s
	}
	if x, ok := top[fieldReturnNormalized]; ok && x != nil {
		b, ok := x.(bool)
		if !ok {
			return nil, schemaError(fieldReturnNormalized, "return_normalized: expected a boolean, got %s", typeName(x))
		}
		r.ReturnNormalized = b
	}
	if x, ok := top[fieldOptions]; ok && x != nil {
		o, err := parseOptions(x)
		if err != nil {
			return nil, err
		}
		r.Options = o
	}
	if x, ok := top[fieldRTCPrev]; ok && x != nil {
		vals, shape, err := parseMatrix(x, fieldRTCPrev)
		if err != nil {
			return nil, err
		}
		if len(shape) != 2 {
			return nil, invalid(fieldRTCPrev, "rtc_prev_action: expected [rows, action_dim], got shape %v", shape)
		}
		r.RTCPrev, r.RTCPrevRows = vals, shape[0]
	}
	if x, ok := top[fieldSeed]; ok && x != nil {
		seed, err := parseSeed(x)
		if err != nil {
			return nil, err
		}
		r.Seed = &seed
	}
	if x, ok := top[fieldNoise]; ok && x != nil {
		if err := parseNoise(r, x); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// parseStateRows accepts [D numbers] or [[D numbers]] (one time step).
func parseStateRows(list []any, field string) ([]float64, error) {
	if len(list) > 0 {
		if inner, ok := list[0].([]any); ok {
			if len(list) != 1 {
				return nil, invalid(field, "%s: expected one time step, got %d rows", field, len(list))
			}
			list = inner
			field += "[0]"
		}
	}
	vals := make([]float64, len(list))
	for i, x := range list {
		f, err := number(x, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		vals[i] = f
	}
	return vals, nil
}

// number converts a JSON number (json.Number) or a msgpack numeric value to
// float64. Wrong types are schema errors (422); values JSON cannot carry as
// finite doubles (1e400) are validation errors (400).
// plainNumber is number's common case without an error path: a JSON
// number that parses, or a msgpack float.
func plainNumber(x any) (float64, bool) {
	switch n := x.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	return 0, false
}

func number(x any, field string) (float64, error) {
	switch n := x.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return 0, invalid(field, "%s: %s is not a finite number", field, n)
		}
		return f, nil
	case float64:
		return n, nil
	case float32:
		return float64(n), nil
	case int8:
		return float64(n), nil
	case int16:
		return float64(n), nil
	case int32:
		return float64(n), nil
	case int64:
		return float64(n), nil
	case int:
		return float64(n), nil
	case uint8:
		return float64(n), nil
	case uint16:
		return float64(n), nil
	case uint32:
		return float64(n), nil
	case uint64:
		return float64(n), nil
	}
	return 0, schemaError(field, "%s: expected a number, got %s", field, typeName(x))
}

// parseRawFrame reads a raw frame (msgpack): {"data": bin (uint8 RGB,
// row-major), "shape": [H, W, 3], "dtype": "uint8" (optional)}.
func parseRawFrame(m map[string]any, field string) (*RawFrame, error) {
	for k := range m {
		if k != "data" && k != "shape" && k != "dtype" {
			return nil, schemaError(field+"."+k, "%s: unknown field %q in a raw frame (want data, shape, dtype)", field, k)
		}
	}
	data, ok := m["data"].([]byte)
	if !ok {
		return nil, schemaError(field+".data", "%s.data: expected bin (uint8 RGB bytes), got %s", field, typeName(m["data"]))
	}
	if dt, ok := m["dtype"]; ok && dt != "uint8" && dt != "|u1" {
		return nil, invalid(field+".dtype", "%s.dtype: %v, want uint8", field, dt)
	}
	shape, ok := m["shape"].([]any)
	if !ok || len(shape) != 3 {
		return nil, schemaError(field+".shape", "%s.shape: expected [height, width, 3]", field)
	}
	var dims [3]int
	for i, x := range shape {
		f, ok := plainInt(x)
		if !ok || f <= 0 || f > 1<<16 {
			return nil, invalid(field+".shape", "%s.shape: %v is not [height, width, 3] with positive sides", field, shape)
		}
		dims[i] = f
	}
	if dims[2] != 3 {
		return nil, invalid(field+".shape", "%s.shape: %v: %d channels, want 3 (RGB)", field, dims, dims[2])
	}
	if len(data) != dims[0]*dims[1]*3 {
		return nil, invalid(field+".data", "%s.data: %d bytes for shape %v (want %d)", field, len(data), dims, dims[0]*dims[1]*3)
	}
	return &RawFrame{Pix: data, Height: dims[0], Width: dims[1]}, nil
}

// plainInt reads a non-negative integer of any msgpack or JSON width.
func plainInt(x any) (int, bool) {
	switch n := x.(type) {
	case int64:
		return int(n), n >= 0 && n <= 1<<31
	case uint64:
		return int(n), n <= 1<<31
	case int:
		return n, n >= 0
	case int8, int16, int32, uint8, uint16, uint32:
		v, _ := number(n, "")
		return int(v), v >= 0
	case json.Number:
		v, err := strconv.Atoi(string(n))
		return v, err == nil && v >= 0
	}
	return 0, false
}

func parseSeed(x any) (uint64, error) {
	switch n := x.(type) {
	case json.Number:
		s := string(n)
		if strings.ContainsAny(s, ".eE") {
			return 0, schemaError(fieldSeed, "seed: expected an integer, got %s", s)
		}
		if strings.HasPrefix(s, "-") {
			return 0, invalid(fieldSeed, "seed: %s is negative (must be >= 0)", s)
		}
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, invalid(fieldSeed, "seed: %s does not fit in 64 bits", s)
		}
		return u, nil
	case int8, int16, int32, int64, int:
		var i int64
		switch v := n.(type) {
		case int8:
			i = int64(v)
		case int16:
			i = int64(v)
		case int32:
			i = int64(v)
		case int64:
			i = v
		case int:
			i = int64(v)
		}
		if i < 0 {
			return 0, invalid(fieldSeed, "seed: %d is negative (must be >= 0)", i)
		}
		return uint64(i), nil
	case uint8:
		return uint64(n), nil
	case uint16:
		return uint64(n), nil
	case uint32:
		return uint64(n), nil
	case uint64:
		return n, nil
	}
	return 0, schemaError(fieldSeed, "seed: expected an integer, got %s", typeName(x))
}

// parseNoise accepts [H][D] or [1][H][D] numbers; the shape is checked
// against the model later (validate).
func parseNoise(r *Request, x any) error {
	vals, shape, err := parseMatrix(x, fieldNoise)
	if err != nil {
		return err
	}
	r.Noise, r.NoiseShape = vals, shape
	return nil
}

// parseOptions reads a request's options: the RTC keys under upstream's
// names, integers for the steps, a number for the ramp rate; any other key
// is refused, naming it.
func parseOptions(x any) (*RTCOptions, error) {
	m, err := asObject(x, fieldOptions)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	o := &RTCOptions{}
	for _, k := range keys {
		v, field := m[k], fieldOptions+"."+k
		switch k {
		case optHorizon, optOverlap, optFrozen:
			n, err := integer(v, field)
			if err != nil {
				return nil, err
			}
			switch k {
			case optHorizon:
				o.Horizon = &n
			case optOverlap:
				o.Overlap = &n
			default:
				o.Frozen = &n
			}
		case optRampRate:
			f, err := number(v, field)
			if err != nil {
				return nil, err
			}
			o.RampRate = &f
		default:
			return nil, schemaError(field, "options: unknown key %q (want %s)", k, strings.Join(rtcOptionKeys, ", "))
		}
	}
	return o, nil
}

// integer reads an integer option (JSON without fraction or exponent, a
// msgpack int) that fits an int.
func integer(x any, field string) (int, error) {
	if n, ok := x.(json.Number); ok {
		if i, err := strconv.Atoi(string(n)); err == nil {
			return i, nil
		}
		return 0, schemaError(field, "%s: expected an integer, got %s", field, n)
	}
	f, err := number(x, field)
	if err != nil {
		return 0, err
	}
	switch x.(type) {
	case float32, float64:
		return 0, schemaError(field, "%s: expected an integer, got %v", field, f)
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return 0, schemaError(field, "%s: expected an integer, got %v", field, f)
	}
	return int(f), nil
}

// parseMatrix accepts [H][D] or [1][H][D] finite float32 numbers (field
// names the body key in errors) and returns them flattened with the shape
// as sent.
func parseMatrix(x any, field string) ([]float32, []int, error) {
	rows, ok := x.([]any)
	if !ok {
		return nil, nil, schemaError(field, "%s: expected an array, got %s", field, typeName(x))
	}
	var shape []int
	prefix := field // the JSON path of the [H][D] rows, for error fields
	if len(rows) == 1 {
		if inner, ok := rows[0].([]any); ok && len(inner) > 0 {
			if _, ok := inner[0].([]any); ok {
				rows = inner
				shape = []int{1}
				prefix = field + "[0]"
			}
		}
	}
	if len(rows) == 0 {
		return nil, nil, invalid(field, "%s: empty", field)
	}
	first, ok := rows[0].([]any)
	if !ok {
		what := "rows"
		if field == fieldNoise {
			what = "horizon"
		}
		return nil, nil, invalid(field, "%s: expected [%s, action_dim] or [1, %s, action_dim], got a flat array", field, what, what)
	}
	d := len(first)
	shape = append(shape, len(rows), d)
	out := make([]float32, 0, len(rows)*d)
	for i, rv := range rows {
		row, ok := rv.([]any)
		if !ok {
			return nil, nil, schemaError(fmt.Sprintf("%s[%d]", prefix, i), "%s[%d]: expected an array, got %s", prefix, i, typeName(rv))
		}
		if len(row) != d {
			return nil, nil, invalid(field, "%s: ragged: row %d has %d values, row 0 has %d", field, i, len(row), d)
		}
		for j, v := range row {
			// The field name is formatted only on failure: a DROID noise
			// array has 5280 values.
			f, ok := plainNumber(v)
			if !ok {
				var err error
				if f, err = number(v, fmt.Sprintf("%s[%d][%d]", prefix, i, j)); err != nil {
					return nil, nil, err
				}
			}
			f32 := float32(f)
			if math.IsNaN(f) || math.IsInf(float64(f32), 0) {
				return nil, nil, invalid(field, "%s[%d][%d]: %v is not a finite float32", prefix, i, j, f)
			}
			out = append(out, f32)
		}
	}
	return out, shape, nil
}

// validated is a request checked against the served embodiment and model.
type validated struct {
	req   *Request
	cams  []CameraFrames // embodiment order, base64 decoded later
	state map[string][]float64
}

// validate checks the request against the served embodiment and model: the
// cheap 400s that need no pixels (cameras and frame counts, state groups
// and widths and finiteness, instruction length, embodiment, seed xor
// noise, noise shape, state dtype). It rounds state to state_dtype.
func validate(r *Request, info *EmbodimentInfo, model *ModelInfo) (*validated, error) {
	n := utf8.RuneCountInString(r.Instruction)
	if strings.TrimSpace(r.Instruction) == "" {
		return nil, invalid(r.InstructionField, "%s: empty", r.InstructionField)
	}
	lo, hi := info.instructionChars()
	if n < lo {
		return nil, invalid(r.InstructionField, "%s: %d characters, at least %d", r.InstructionField, n, lo)
	}
	if n > hi {
		return nil, invalid(r.InstructionField, "%s: %d characters, at most %d", r.InstructionField, n, hi)
	}
	if r.Embodiment != "" && r.Embodiment != info.Name {
		return nil, invalid(fieldEmbodiment, "embodiment: %q is not served (serving %q)", r.Embodiment, info.Name)
	}
	if r.Seed != nil && r.Noise != nil {
		return nil, invalid(fieldSeed, "seed and noise are exclusive: send one")
	}
	if r.Noise != nil {
		// The model denoises its own horizon whatever the embodiment
		// decodes, so noise covers the model's whole chunk.
		h, d := r.NoiseShape[len(r.NoiseShape)-2], r.NoiseShape[len(r.NoiseShape)-1]
		if mh := model.chunkHorizon(info); h != mh || d != model.ActionDim {
			return nil, invalid(fieldNoise, "noise: shape %v, want [%d, %d] or [1, %d, %d] (the model's denoised chunk)", r.NoiseShape,
				mh, model.ActionDim, mh, model.ActionDim)
		}
	}
	if err := validateRTC(r, info, model); err != nil {
		return nil, err
	}
	if r.StateDtype != "float32" && r.StateDtype != "float64" {
		return nil, invalid(fieldStateDtype, "state_dtype: %q is not float32 or float64", r.StateDtype)
	}

	// Cameras: exactly the embodiment's keys, exactly len(delta) frames each.
	want := len(info.VideoDeltaIndices)
	for cam := range r.Images {
		if !contains(info.Cameras, cam) {
			return nil, invalid(fieldImages+"."+cam, "images: unknown camera %q (want %s)", cam, strings.Join(info.Cameras, ", "))
		}
	}
	v := &validated{req: r, cams: make([]CameraFrames, 0, len(info.Cameras))}
	for _, cam := range info.Cameras {
		frames, ok := r.Images[cam]
		if !ok {
			return nil, invalid(fieldImages+"."+cam, "images: missing camera %q (want %s)", cam, strings.Join(info.Cameras, ", "))
		}
		if want > 0 && len(frames) != want {
			return nil, invalid(fieldImages+"."+cam, "images.%s: %d frames, want exactly %d (delta indices %v, oldest first)", cam, len(frames), want, info.VideoDeltaIndices)
		}
		v.cams = append(v.cams, CameraFrames{Key: cam})
	}

	// State: the embodiment's groups with their widths, finite.
	state := r.State
	if r.StateList != nil {
		total := 0
		for _, g := range info.StateGroups {
			total += g.Dim
		}
		if len(r.StateList) != total {
			return nil, invalid(fieldState, "state: %d values, want %d (%s)", len(r.StateList), total, groupList(info.StateGroups))
		}
		state = make(map[string][]float64, len(info.StateGroups))
		off := 0
		for _, g := range info.StateGroups {
			state[g.Key] = r.StateList[off : off+g.Dim]
			off += g.Dim
		}
	}
	for g := range state {
		if !containsGroup(info.StateGroups, g) {
			return nil, invalid(fieldState+"."+g, "state: unknown group %q (want %s)", g, groupList(info.StateGroups))
		}
	}
	v.state = make(map[string][]float64, len(state))
	for _, g := range info.StateGroups {
		vals, ok := state[g.Key]
		field := fieldState + "." + g.Key
		if !ok {
			return nil, invalid(field, "state: missing group %q (want %s)", g.Key, groupList(info.StateGroups))
		}
		if len(vals) != g.Dim {
			return nil, invalid(field, "state.%s: %d values, want %d", g.Key, len(vals), g.Dim)
		}
		out := make([]float64, len(vals))
		for i, x := range vals {
			if r.StateDtype == "float32" {
				x = float64(float32(x))
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, invalid(field, "state.%s[%d]: %v is not finite", g.Key, i, vals[i])
			}
			out[i] = x
		}
		v.state[g.Key] = out
	}
	return v, nil
}

// decodeFrames base64-decodes the validated request's frames in place.
func decodeFrames(v *validated) error {
	for ci := range v.cams {
		c := &v.cams[ci]
		src := v.req.Images[c.Key]
		c.Frames = make([][]byte, len(src))
		for i, f := range src {
			if f.Raw != nil {
				if c.Raw == nil {
					c.Raw = make([]RawFrame, len(src))
				}
				c.Raw[i] = *f.Raw
				continue
			}
			if f.Encoded != nil {
				c.Frames[i] = f.Encoded
				continue
			}
			s := f.B64
			// Tolerate data URLs ("data:image/png;base64,....").
			if strings.HasPrefix(s, "data:") {
				if _, rest, ok := strings.Cut(s, ","); ok {
					s = rest
				}
			}
			buf := make([]byte, b64.DecodedLen(len(s)))
			n, err := b64.DecodeString(buf, s)
			if err != nil {
				return invalid(fmt.Sprintf("images.%s[%d]", c.Key, i), "images.%s[%d]: not valid base64: %v", c.Key, i, err)
			}
			if n == 0 {
				return invalid(fmt.Sprintf("images.%s[%d]", c.Key, i), "images.%s[%d]: empty image", c.Key, i)
			}
			c.Frames[i] = buf[:n]
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsGroup(list []Group, s string) bool {
	for _, g := range list {
		if g.Key == s {
			return true
		}
	}
	return false
}

func groupList(gs []Group) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = fmt.Sprintf("%s[%d]", g.Key, g.Dim)
	}
	return strings.Join(parts, ", ")
}

// validateRTC checks real-time chunking's options and previous chunk
// against the embodiment and the model (../shared/spec/rtc.md §2): every
// option with the previous chunk, integers 0 ≤ rtc_frozen_steps ≤
// rtc_overlap_steps ≤ action_horizon ≤ the chunk's rows and the
// embodiment's horizon, a finite rtc_ramp_rate > 0, a chunk of [rows ≤ the
// model's horizon, action_dim]. Each refusal names the option.
func validateRTC(r *Request, info *EmbodimentInfo, model *ModelInfo) error {
	if r.Options == nil && r.RTCPrev == nil {
		return nil
	}
	if r.RTCPrev == nil {
		return invalid(fieldRTCPrev, "rtc_prev_action: required with options (the previous chunk, normalised [rows, %d]: "+
			"the previous response's action_pred_normalized with return_normalized)", model.ActionDim)
	}
	if r.Options == nil {
		return invalid(fieldOptions, "options: rtc_prev_action needs %s", strings.Join(rtcOptionKeys, ", "))
	}
	o := r.Options
	for i, missing := range [...]bool{o.Horizon == nil, o.Overlap == nil, o.Frozen == nil, o.RampRate == nil} { // rtcOptionKeys' order
		if missing {
			k := rtcOptionKeys[i]
			return invalid(fieldOptions+"."+k, "options.%s: required with rtc_prev_action", k)
		}
	}
	mh := model.chunkHorizon(info)
	rows := r.RTCPrevRows
	if rows < 1 || rows > mh || len(r.RTCPrev) != rows*model.ActionDim {
		return invalid(fieldRTCPrev, "rtc_prev_action: shape [%d, %d], want [rows ≤ %d, %d] (the model's normalised chunk)",
			rows, len(r.RTCPrev)/max(rows, 1), mh, model.ActionDim)
	}
	h, ov, fr, rr := *o.Horizon, *o.Overlap, *o.Frozen, *o.RampRate
	upper := rows
	if eh := info.ActionHorizon; eh > 0 && eh < upper {
		upper = eh
	}
	switch {
	case h < 1 || h > upper:
		return invalid(fieldOptions+"."+optHorizon, "options.action_horizon: %d is outside 1..%d (rtc_prev_action's %d rows; the embodiment's horizon %d)",
			h, upper, rows, info.ActionHorizon)
	case ov < 0 || ov > h:
		return invalid(fieldOptions+"."+optOverlap, "options.rtc_overlap_steps: %d is outside 0..action_horizon %d", ov, h)
	case fr < 0 || fr > ov:
		return invalid(fieldOptions+"."+optFrozen, "options.rtc_frozen_steps: %d is outside 0..rtc_overlap_steps %d", fr, ov)
	case math.IsNaN(rr) || math.IsInf(rr, 0) || rr <= 0:
		return invalid(fieldOptions+"."+optRampRate, "options.rtc_ramp_rate: %v is not a finite number > 0", rr)
	}
	return nil
}
