package oip

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	oipapi "github.com/gr00tgw/gr00tgw/api/oip"
	"github.com/gr00tgw/gr00tgw/service"
)

// Input and output names, tensor data types: api/oip's, the vocabulary
// the server shares with its clients.
const (
	PrefixImages      = oipapi.PrefixImages
	PrefixState       = oipapi.PrefixState
	PrefixActions     = oipapi.PrefixActions
	InputInstruction  = oipapi.InputInstruction
	InputSeed         = oipapi.InputSeed
	InputNoise        = oipapi.InputNoise
	ParamBinarySize   = oipapi.ParamBinarySize
	ParamBinary       = oipapi.ParamBinary
	ParamBinaryOutput = oipapi.ParamBinaryOutput

	TypeUINT8  = oipapi.TypeUINT8
	TypeFP32   = oipapi.TypeFP32
	TypeINT64  = oipapi.TypeINT64
	TypeUINT64 = oipapi.TypeUINT64
	TypeBYTES  = oipapi.TypeBYTES
)

// Infer is one parsed inference request.
type Infer struct {
	// ID is the request's "id" ("" when it sent none); HasID reports
	// whether it sent one (the response echoes it).
	ID    string
	HasID bool
	// Request is the gateway request for the embodiment of the path.
	Request *service.Request
	// Outputs are the requested outputs in order; nil asks for every
	// action group in the contract's order.
	Outputs []Output
	// BinaryOutput is the request's binary_data_output parameter: outputs
	// not naming binary_data themselves are returned as binary data.
	BinaryOutput bool
}

// Output is one requested output.
type Output struct {
	// Name is actions.<group>.
	Name string
	// Binary is its binary_data parameter, or nil.
	Binary *bool
}

// invalid (400) and schema (422) name the failing field, as /predict does.
var invalid, schema = service.Invalid, service.SchemaError

type wireRequest struct {
	ID           *string                    `json:"id"`
	Parameters   map[string]json.RawMessage `json:"parameters"`
	Inputs       []wireInput                `json:"inputs"`
	Outputs      []json.RawMessage          `json:"outputs"`
	ModelName    string                     `json:"model_name"`    // accepted (Triton clients send it), the path decides
	ModelVersion string                     `json:"model_version"` // likewise
}

type wireInput struct {
	Name       string                     `json:"name"`
	Shape      []int64                    `json:"shape"`
	Datatype   string                     `json:"datatype"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Data       json.RawMessage            `json:"data"`
}

type wireOutput struct {
	Name       string                     `json:"name"`
	Parameters map[string]json.RawMessage `json:"parameters"`
}

// input is one request input with its shape checked and its binary data
// (when it has some) cut out of the body.
type input struct {
	wireInput
	shape []int
	n     int    // elements
	bin   []byte // binary data, nil for JSON data
}

func strict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// Parse parses an inference request body for contract c. headerLen is the
// Inference-Header-Content-Length (the JSON object's length, the binary
// tensor data following it), or -1 when the request has no such header.
// Errors are *service.HandlerError: 422 for a body that is not an
// inference request object, 400 naming the input (field) for an input of
// the wrong name, datatype, shape or data, or a missing one. The request's
// frames and binary values alias body.
func Parse(body []byte, headerLen int, c *service.Contract) (*Infer, error) {
	js, bin := body, []byte(nil)
	if headerLen >= 0 {
		if headerLen > len(body) {
			return nil, invalid("body", "header Inference-Header-Content-Length: %d is over the body's %d bytes", headerLen, len(body))
		}
		js, bin = body[:headerLen], body[headerLen:]
	}
	if len(bytes.TrimSpace(js)) == 0 {
		return nil, schema("body", "empty body: send an inference request object {\"inputs\": [...]}")
	}
	if !utf8.Valid(js) {
		return nil, schema("body", "inference request is not valid UTF-8")
	}
	// One strict pass over the body (frames as JSON numbers are megabytes);
	// only when it fails, a second finds the input to blame.
	var w wireRequest
	if err := strict(js, &w); err != nil {
		return nil, blame(js, err)
	}
	inf := &Infer{}
	if w.ID != nil {
		inf.ID, inf.HasID = *w.ID, true
	}
	if raw, ok := w.Parameters[ParamBinaryOutput]; ok {
		if err := json.Unmarshal(raw, &inf.BinaryOutput); err != nil {
			return nil, invalid("parameters."+ParamBinaryOutput, "parameters.%s: %s, want a boolean", ParamBinaryOutput, raw)
		}
	}
	if w.Inputs == nil {
		return nil, schema("inputs", "inputs: missing (want %s)", want(c))
	}
	var rtc rtcParams
	if err := rtc.parse(w.Parameters); err != nil {
		return nil, err
	}

	// Headers first: the binary data of the inputs lies in their order.
	ins := make([]input, len(w.Inputs))
	seen := map[string]bool{}
	off := 0
	for i := range w.Inputs {
		in := &ins[i]
		in.wireInput = w.Inputs[i]
		if bytes.Equal(bytes.TrimSpace(in.Data), []byte("null")) {
			in.Data = nil
		}
		name := in.Name
		if name == "" {
			return nil, schema(fmt.Sprintf("inputs[%d]", i), "input[%d]: no name", i)
		}
		if seen[name] {
			return nil, invalid(name, "input[%s]: sent twice", name)
		}
		seen[name] = true
		var err error
		if in.shape, in.n, err = checkShape(name, in.Shape, len(body)); err != nil {
			return nil, err
		}
		size, hasSize, err := binarySize(name, in.Parameters)
		if err != nil {
			return nil, err
		}
		switch {
		case hasSize && in.Data != nil:
			return nil, invalid(name, "input[%s]: both data and parameters.%s", name, ParamBinarySize)
		case hasSize && headerLen < 0:
			return nil, invalid(name, "input[%s]: parameters.%s without an Inference-Header-Content-Length header", name, ParamBinarySize)
		case hasSize:
			if size > len(bin)-off {
				return nil, invalid(name, "input[%s]: %s %d is past the binary data (%d bytes left)", name, ParamBinarySize, size, len(bin)-off)
			}
			in.bin = bin[off : off+size : off+size]
			off += size
		case in.Data == nil:
			return nil, invalid(name, "input[%s]: no data (send \"data\" or parameters.%s)", name, ParamBinarySize)
		}
	}
	if off != len(bin) {
		return nil, invalid("body", "binary data: %d bytes after the JSON object, the inputs' %s add up to %d", len(bin), ParamBinarySize, off)
	}

	r := &service.Request{Images: map[string][]service.Frame{}, State: map[string][]float64{}, StateDtype: "float32",
		InstructionField: InputInstruction, Embodiment: c.Info.Name}
	instruction := false
	for i := range ins {
		in := &ins[i]
		name := in.Name
		var err error
		switch {
		case strings.HasPrefix(name, PrefixImages) && slices.Contains(c.Info.Cameras, name[len(PrefixImages):]):
			r.Images[name[len(PrefixImages):]], err = frames(in, len(c.Info.VideoDeltaIndices))
		case strings.HasPrefix(name, PrefixState) && group(c.Info.StateGroups, name[len(PrefixState):]) > 0:
			r.State[name[len(PrefixState):]], err = state(in, group(c.Info.StateGroups, name[len(PrefixState):]))
		case name == InputInstruction:
			r.Instruction, err = text(in)
			instruction = true
		case name == InputSeed:
			var seed uint64
			if seed, err = seedValue(in); err == nil {
				r.Seed = &seed
			}
		case name == InputNoise:
			r.Noise, r.NoiseShape, err = noise(in)
		default:
			err = invalid(name, "input[%s]: unknown input (want %s)", name, want(c))
		}
		if err != nil {
			return nil, err
		}
	}
	for _, cam := range c.Info.Cameras {
		if _, ok := r.Images[cam]; !ok {
			return nil, invalid(PrefixImages+cam, "input[%s%s]: missing (want %s)", PrefixImages, cam, frameShapes(len(c.Info.VideoDeltaIndices)))
		}
	}
	for _, g := range c.Info.StateGroups {
		if _, ok := r.State[g.Key]; !ok {
			return nil, invalid(PrefixState+g.Key, "input[%s%s]: missing (want FP32 [%d])", PrefixState, g.Key, g.Dim)
		}
	}
	if !instruction {
		return nil, invalid(InputInstruction, "input[%s]: missing (want BYTES [1], the task text)", InputInstruction)
	}

	for i, raw := range w.Outputs {
		var o wireOutput
		if err := strict(raw, &o); err != nil {
			return nil, schema(fmt.Sprintf("outputs[%d]", i), "output[%d]: not an output object: %v", i, err)
		}
		if !strings.HasPrefix(o.Name, PrefixActions) || group(c.Info.ActionGroups, o.Name[len(PrefixActions):]) == 0 {
			return nil, invalid(fieldOf(o.Name, i), "output[%s]: unknown output (want %s)", nameOf(o.Name, i), outputs(c))
		}
		if slices.ContainsFunc(inf.Outputs, func(x Output) bool { return x.Name == o.Name }) {
			return nil, invalid(o.Name, "output[%s]: requested twice", o.Name)
		}
		out := Output{Name: o.Name}
		if raw, ok := o.Parameters[ParamBinary]; ok {
			var b bool
			if err := json.Unmarshal(raw, &b); err != nil {
				return nil, invalid(o.Name, "output[%s]: parameters.%s: %s, want a boolean", o.Name, ParamBinary, raw)
			}
			out.Binary = &b
		}
		inf.Outputs = append(inf.Outputs, out)
	}
	if w.Outputs != nil && len(inf.Outputs) == 0 {
		inf.Outputs = []Output{} // "outputs": [] asks for none
	}
	rtc.apply(r)
	inf.Request = r
	return inf, nil
}

// blame turns the strict decoder's error into the answer: the first input
// that is no input tensor object is named, else the body is.
func blame(js []byte, err error) error {
	var loose struct {
		Inputs []json.RawMessage `json:"inputs"`
	}
	if json.Unmarshal(js, &loose) == nil {
		for i, raw := range loose.Inputs {
			var in wireInput
			if ierr := strict(raw, &in); ierr != nil {
				var probe struct {
					Name string `json:"name"`
				}
				_ = json.Unmarshal(raw, &probe)
				return schema(fieldOf(probe.Name, i), "input[%s]: not an input tensor object: %v", nameOf(probe.Name, i), ierr)
			}
		}
	}
	return schema("body", "not an inference request object: %v", err)
}

func nameOf(name string, i int) string {
	if name == "" {
		return strconv.Itoa(i)
	}
	return name
}

func fieldOf(name string, i int) string {
	if name == "" {
		return fmt.Sprintf("inputs[%d]", i)
	}
	return name
}

// want lists the inputs of c, for error messages.
func want(c *service.Contract) string {
	var parts []string
	t := len(c.Info.VideoDeltaIndices)
	for _, cam := range c.Info.Cameras {
		parts = append(parts, PrefixImages+cam+" "+frameShapes(t))
	}
	for _, g := range c.Info.StateGroups {
		parts = append(parts, fmt.Sprintf("%s%s FP32 [%d]", PrefixState, g.Key, g.Dim))
	}
	parts = append(parts, InputInstruction+" BYTES [1]", InputSeed+" INT64|UINT64 [1] (optional)", InputNoise+" FP32 [horizon, D] (optional)")
	return strings.Join(parts, ", ")
}

func outputs(c *service.Contract) string {
	parts := make([]string, len(c.Info.ActionGroups))
	for i, g := range c.Info.ActionGroups {
		parts[i] = PrefixActions + g.Key
	}
	return strings.Join(parts, ", ")
}

func frameShapes(t int) string {
	return fmt.Sprintf("UINT8 [%d, H, W, 3] or BYTES [%d] (PNG/JPEG)", t, t)
}

// group is the width of group key in gs, 0 when absent.
func group(gs []service.Group, key string) int {
	for _, g := range gs {
		if g.Key == key {
			return g.Dim
		}
	}
	return 0
}

// checkShape checks every dimension is non-negative and the element count
// is bounded by limit (every element takes at least one byte of the body),
// so nothing below overflows or allocates more than the body.
func checkShape(name string, shape []int64, limit int) ([]int, int, error) {
	if shape == nil {
		return nil, 0, invalid(name, "input[%s]: no shape", name)
	}
	out := make([]int, len(shape))
	n := 1
	for i, d := range shape {
		if d < 0 {
			return nil, 0, invalid(name, "input[%s]: shape %v: dimension %d is negative", name, shape, i)
		}
		if d > 0 && n > limit/int(min(d, int64(limit)+1)) {
			return nil, 0, invalid(name, "input[%s]: shape %v has more elements than the body has bytes", name, shape)
		}
		out[i] = int(d)
		n *= int(d)
	}
	return out, n, nil
}

func binarySize(name string, params map[string]json.RawMessage) (int, bool, error) {
	raw, ok := params[ParamBinarySize]
	if !ok {
		return 0, false, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil || n < 0 || n > math.MaxInt32 {
		return 0, false, invalid(name, "input[%s]: parameters.%s: %s, want a non-negative integer", name, ParamBinarySize, raw)
	}
	return int(n), true, nil
}

// wantType checks the input's datatype; shape describes what is wanted.
func wantType(in *input, shape string, want ...string) error {
	if slices.Contains(want, in.Datatype) {
		return nil
	}
	return invalid(in.Name, "input[%s]: datatype %q, want %s", in.Name, in.Datatype, shape)
}

// elemSize is the binary size of one element of a fixed-size datatype.
func elemSize(dt string) int {
	switch dt {
	case TypeUINT8:
		return 1
	case TypeFP32:
		return 4
	}
	return 8 // INT64, UINT64
}

// checkBinary checks a fixed-size input's binary_data_size.
func checkBinary(in *input) error {
	if want := in.n * elemSize(in.Datatype); len(in.bin) != want {
		return invalid(in.Name, "input[%s]: %s %d, want %d for %s %v", in.Name, ParamBinarySize, len(in.bin), want, in.Datatype, in.shape)
	}
	return nil
}

func frames(in *input, t int) ([]service.Frame, error) {
	if err := wantType(in, frameShapes(t), TypeUINT8, TypeBYTES); err != nil {
		return nil, err
	}
	if in.Datatype == TypeBYTES {
		if in.n != t {
			return nil, invalid(in.Name, "input[%s]: shape %v: %d frames, want BYTES [%d] (oldest first)", in.Name, in.shape, in.n, t)
		}
		vals, err := byteElems(in)
		if err != nil {
			return nil, err
		}
		out := make([]service.Frame, len(vals))
		for i, v := range vals {
			if in.bin != nil {
				out[i] = service.Frame{Encoded: v}
			} else {
				out[i] = service.Frame{B64: string(v)}
			}
		}
		return out, nil
	}
	shape := in.shape
	if len(shape) == 3 {
		shape = append([]int{1}, shape...)
	}
	if len(shape) != 4 || shape[3] != 3 || shape[1] == 0 || shape[2] == 0 {
		return nil, invalid(in.Name, "input[%s]: shape %v, want UINT8 [%d, H, W, 3] (RGB, H and W > 0)", in.Name, in.shape, t)
	}
	if shape[0] != t {
		return nil, invalid(in.Name, "input[%s]: shape %v: %d frames, want UINT8 [%d, H, W, 3] (oldest first)", in.Name, in.shape, shape[0], t)
	}
	if shape[1] > 1<<16 || shape[2] > 1<<16 {
		return nil, invalid(in.Name, "input[%s]: shape %v: sides over 65536", in.Name, in.shape)
	}
	pix := in.bin
	if pix != nil {
		if err := checkBinary(in); err != nil {
			return nil, err
		}
	} else {
		pix = make([]byte, 0, in.n)
		err := scan(in, func(tok []byte) error {
			v, ok := parseUint8(tok)
			if !ok {
				return fmt.Errorf("%s is not a UINT8", clip(tok))
			}
			pix = append(pix, v)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	per := shape[1] * shape[2] * 3
	out := make([]service.Frame, t)
	for i := range out {
		out[i] = service.Frame{Raw: &service.RawFrame{Pix: pix[i*per : (i+1)*per : (i+1)*per], Height: shape[1], Width: shape[2]}}
	}
	return out, nil
}

func state(in *input, dim int) ([]float64, error) {
	if err := wantType(in, fmt.Sprintf("FP32 [%d]", dim), TypeFP32); err != nil {
		return nil, err
	}
	if !(len(in.shape) == 1 || len(in.shape) == 2 && in.shape[0] == 1) || in.shape[len(in.shape)-1] != dim {
		return nil, invalid(in.Name, "input[%s]: shape %v, want FP32 [%d]", in.Name, in.shape, dim)
	}
	f, err := float32s(in)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(f))
	for i, x := range f {
		out[i] = float64(x)
	}
	return out, nil
}

func noise(in *input) ([]float32, []int, error) {
	if err := wantType(in, "FP32 [horizon, D]", TypeFP32); err != nil {
		return nil, nil, err
	}
	if !(len(in.shape) == 2 || len(in.shape) == 3 && in.shape[0] == 1) || in.n == 0 {
		return nil, nil, invalid(in.Name, "input[%s]: shape %v, want FP32 [horizon, D] or [1, horizon, D]", in.Name, in.shape)
	}
	f, err := float32s(in)
	if err != nil {
		return nil, nil, err
	}
	return f, slices.Clone(in.shape), nil
}

func float32s(in *input) ([]float32, error) {
	out := make([]float32, 0, in.n)
	if in.bin != nil {
		if err := checkBinary(in); err != nil {
			return nil, err
		}
		for i := 0; i < len(in.bin); i += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(in.bin[i:])))
		}
	} else if err := scan(in, func(tok []byte) error {
		if tok[0] == '"' || tok[0] == 't' || tok[0] == 'f' || tok[0] == 'n' {
			return fmt.Errorf("%s is not a number", clip(tok))
		}
		f, err := strconv.ParseFloat(string(tok), 32)
		if err != nil {
			return fmt.Errorf("%s is not a finite FP32", clip(tok))
		}
		out = append(out, float32(f))
		return nil
	}); err != nil {
		return nil, err
	}
	for i, x := range out {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, invalid(in.Name, "input[%s]: element %d: %v is not finite", in.Name, i, x)
		}
	}
	return out, nil
}

func text(in *input) (string, error) {
	if err := wantType(in, "BYTES [1]", TypeBYTES); err != nil {
		return "", err
	}
	if in.n != 1 {
		return "", invalid(in.Name, "input[%s]: shape %v, want BYTES [1]", in.Name, in.shape)
	}
	vals, err := byteElems(in)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(vals[0]) {
		return "", invalid(in.Name, "input[%s]: not valid UTF-8", in.Name)
	}
	return string(vals[0]), nil
}

func seedValue(in *input) (uint64, error) {
	if err := wantType(in, "INT64 [1] or UINT64 [1]", TypeINT64, TypeUINT64); err != nil {
		return 0, err
	}
	if in.n != 1 {
		return 0, invalid(in.Name, "input[%s]: shape %v, want [1]", in.Name, in.shape)
	}
	if in.bin != nil {
		if err := checkBinary(in); err != nil {
			return 0, err
		}
		u := binary.LittleEndian.Uint64(in.bin)
		if in.Datatype == TypeINT64 && int64(u) < 0 {
			return 0, invalid(in.Name, "input[%s]: %d is negative (must be >= 0)", in.Name, int64(u))
		}
		return u, nil
	}
	var u uint64
	err := scan(in, func(tok []byte) error {
		var err error
		if u, err = strconv.ParseUint(string(tok), 10, 64); err != nil {
			if len(tok) > 0 && tok[0] == '-' {
				return fmt.Errorf("%s is negative (must be >= 0)", clip(tok))
			}
			return fmt.Errorf("%s is not a %s", clip(tok), in.Datatype)
		}
		if in.Datatype == TypeINT64 && u > math.MaxInt64 {
			return fmt.Errorf("%s overflows INT64", clip(tok))
		}
		return nil
	})
	return u, err
}

// byteElems returns a BYTES input's elements: JSON strings, or the binary
// form's 4-byte little-endian length + bytes per element.
func byteElems(in *input) ([][]byte, error) {
	out := make([][]byte, 0, in.n)
	if b := in.bin; b != nil {
		for len(b) > 0 {
			if len(b) < 4 {
				return nil, invalid(in.Name, "input[%s]: binary BYTES element %d: %d bytes left, want a 4-byte length", in.Name, len(out), len(b))
			}
			n := binary.LittleEndian.Uint32(b)
			if uint64(n) > uint64(len(b)-4) {
				return nil, invalid(in.Name, "input[%s]: binary BYTES element %d: length %d past the data (%d bytes left)", in.Name, len(out), n, len(b)-4)
			}
			out = append(out, b[4:4+n:4+n])
			b = b[4+n:]
		}
		if len(out) != in.n {
			return nil, invalid(in.Name, "input[%s]: %d binary BYTES elements for shape %v", in.Name, len(out), in.shape)
		}
		return out, nil
	}
	err := scan(in, func(tok []byte) error {
		if tok[0] != '"' {
			return fmt.Errorf("%s is not a string", clip(tok))
		}
		s := tok[1 : len(tok)-1]
		if bytes.IndexByte(s, '\\') >= 0 {
			var v string
			if err := json.Unmarshal(tok, &v); err != nil {
				return fmt.Errorf("bad string: %v", err)
			}
			s = []byte(v)
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// scan calls fn on every scalar token of the input's JSON data — a
// (nested) array, flattened row-major — and checks their count against the
// shape. The data is valid JSON (encoding/json checked it).
func scan(in *input, fn func(tok []byte) error) error {
	raw := bytes.TrimSpace(in.Data)
	if len(raw) == 0 || raw[0] != '[' {
		return invalid(in.Name, "input[%s]: data: expected an array", in.Name)
	}
	n, depth := 0, 0
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case '[':
			depth++
			i++
		case ']':
			depth--
			i++
			if depth == 0 && i != len(raw) {
				return invalid(in.Name, "input[%s]: data: trailing bytes after the array", in.Name)
			}
		case ',', ' ', '\t', '\n', '\r':
			i++
		case '{':
			return invalid(in.Name, "input[%s]: data: element %d is an object", in.Name, n)
		default:
			j := i + 1
			if c == '"' {
				for j < len(raw) && raw[j] != '"' {
					if raw[j] == '\\' {
						j++
					}
					j++
				}
				j++
				if j > len(raw) {
					return invalid(in.Name, "input[%s]: data: unterminated string", in.Name)
				}
			} else {
				for j < len(raw) && !strings.ContainsRune(",] \t\n\r", rune(raw[j])) {
					j++
				}
			}
			if n == in.n {
				return invalid(in.Name, "input[%s]: data has more than the %d elements of shape %v", in.Name, in.n, in.shape)
			}
			if err := fn(raw[i:j]); err != nil {
				return invalid(in.Name, "input[%s]: data[%d]: %v", in.Name, n, err)
			}
			n++
			i = j
		}
	}
	if depth != 0 {
		return invalid(in.Name, "input[%s]: data: unbalanced brackets", in.Name)
	}
	if n != in.n {
		return invalid(in.Name, "input[%s]: data has %d elements, shape %v has %d", in.Name, n, in.shape, in.n)
	}
	return nil
}

func parseUint8(tok []byte) (byte, bool) {
	if len(tok) == 0 || len(tok) > 3 {
		return 0, false
	}
	v := 0
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return byte(v), v <= 255 && (len(tok) == 1 || tok[0] != '0')
}

// clip shortens a token for an error message.
func clip(tok []byte) string {
	if len(tok) > 24 {
		return string(tok[:24]) + "…"
	}
	return string(tok)
}
