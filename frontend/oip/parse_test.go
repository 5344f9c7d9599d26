package oip

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/service/servicetest"
)

// droidInputs is a valid DROID request's inputs as JSON data: two 2×3
// frames per camera, state groups of 0.5, an instruction.
func droidInputs() []map[string]any {
	frame := make([]int, 2*2*3*3)
	for i := range frame {
		frame[i] = i % 256
	}
	return []map[string]any{
		{"name": "images.exterior_image_1_left", "datatype": "UINT8", "shape": []int{2, 2, 3, 3}, "data": frame},
		{"name": "images.wrist_image_left", "datatype": "BYTES", "shape": []int{2}, "data": []string{"aGVsbG8=", "d29ybGQ="}},
		{"name": "state.eef_9d", "datatype": "FP32", "shape": []int{9}, "data": []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}},
		{"name": "state.gripper_position", "datatype": "FP32", "shape": []int{1}, "data": []float32{0.25}},
		{"name": "state.joint_position", "datatype": "FP32", "shape": []int{1, 7}, "data": [][]float32{{1, 2, 3, 4, 5, 6, 7}}},
		{"name": "instruction", "datatype": "BYTES", "shape": []int{1}, "data": []string{"pick up the cup"}},
	}
}

func body(t testing.TB, req map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(req)
	require.NoError(t, err)
	return b
}

func TestParseJSON(t *testing.T) {
	ins := append(droidInputs(), map[string]any{"name": "seed", "datatype": "INT64", "shape": []int{1}, "data": []int{7}})
	inf, err := Parse(body(t, map[string]any{"id": "r-1", "inputs": ins,
		"outputs": []map[string]any{{"name": "actions.joint_position", "parameters": map[string]any{"binary_data": true}}}}), -1, servicetest.DROID())
	require.NoError(t, err)
	assert.True(t, inf.HasID)
	assert.Equal(t, "r-1", inf.ID)
	r := inf.Request
	assert.Equal(t, servicetest.DROIDTag, r.Embodiment)
	assert.Equal(t, "pick up the cup", r.Instruction)
	require.NotNil(t, r.Seed)
	assert.EqualValues(t, 7, *r.Seed)
	ext := r.Images["exterior_image_1_left"]
	require.Len(t, ext, 2)
	assert.Equal(t, 2, ext[1].Raw.Height)
	assert.Equal(t, 3, ext[1].Raw.Width)
	assert.Equal(t, byte(18), ext[1].Raw.Pix[0])
	assert.Equal(t, []service.Frame{{B64: "aGVsbG8="}, {B64: "d29ybGQ="}}, r.Images["wrist_image_left"])
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6, 7}, r.State["joint_position"])
	assert.Equal(t, []float64{0.25}, r.State["gripper_position"])
	require.Len(t, inf.Outputs, 1)
	assert.True(t, *inf.Outputs[0].Binary)
}

// TestParseBinary: the binary data extension — UINT8 frames, FP32 state,
// BYTES (length-prefixed) frames and a UINT64 seed after the JSON object.
func TestParseBinary(t *testing.T) {
	var bin []byte
	ins := droidInputs()
	setBin := func(i int, raw []byte) {
		delete(ins[i], "data")
		ins[i]["parameters"] = map[string]any{"binary_data_size": len(raw)}
		bin = append(bin, raw...)
	}
	pix := make([]byte, 2*2*3*3)
	for i := range pix {
		pix[i] = byte(200 + i)
	}
	setBin(0, pix)
	var enc []byte
	for _, s := range []string{"\x89PNG-a", "\x89PNG-bb"} {
		enc = binary.LittleEndian.AppendUint32(enc, uint32(len(s)))
		enc = append(enc, s...)
	}
	setBin(1, enc)
	var f []byte
	for i := range 9 {
		f = binary.LittleEndian.AppendUint32(f, math.Float32bits(float32(i)/3))
	}
	setBin(2, f)
	seed := binary.LittleEndian.AppendUint64(nil, math.MaxUint64)
	ins = append(ins, map[string]any{"name": "seed", "datatype": "UINT64", "shape": []int{1}})
	setBin(len(ins)-1, seed)
	js := body(t, map[string]any{"inputs": ins, "parameters": map[string]any{"binary_data_output": true}})
	inf, err := Parse(append(js, bin...), len(js), servicetest.DROID())
	require.NoError(t, err)
	r := inf.Request
	assert.Equal(t, pix[18:], r.Images["exterior_image_1_left"][1].Raw.Pix)
	assert.Equal(t, []service.Frame{{Encoded: []byte("\x89PNG-a")}, {Encoded: []byte("\x89PNG-bb")}}, r.Images["wrist_image_left"])
	assert.Equal(t, float64(float32(2)/3), r.State["eef_9d"][2])
	assert.EqualValues(t, uint64(math.MaxUint64), *r.Seed)
	assert.True(t, inf.BinaryOutput)
	assert.False(t, inf.HasID)
}

// TestParseErrors: every bad tensor is a 400 naming the input (field),
// a body that is no inference request a 422.
func TestParseErrors(t *testing.T) {
	type mod func(ins []map[string]any) []map[string]any
	set := func(name, key string, v any) mod {
		return func(ins []map[string]any) []map[string]any {
			for _, in := range ins {
				if in["name"] == name {
					in[key] = v
				}
			}
			return ins
		}
	}
	drop := func(name string) mod {
		return func(ins []map[string]any) []map[string]any {
			out := ins[:0]
			for _, in := range ins {
				if in["name"] != name {
					out = append(out, in)
				}
			}
			return out
		}
	}
	add := func(in map[string]any) mod {
		return func(ins []map[string]any) []map[string]any { return append(ins, in) }
	}
	for _, tc := range []struct {
		name   string
		mod    mod
		status int
		field  string
		msg    string
	}{
		{"state datatype", set("state.eef_9d", "datatype", "FP64"), 400, "state.eef_9d", `input[state.eef_9d]: datatype "FP64", want FP32 [9]`},
		{"state shape", set("state.eef_9d", "shape", []int{3, 3}), 400, "state.eef_9d", "want FP32 [9]"},
		{"state count", set("state.eef_9d", "data", []float32{1, 2}), 400, "state.eef_9d", "data has 2 elements, shape [9] has 9"},
		{"state string", set("state.gripper_position", "data", []string{"x"}), 400, "state.gripper_position", `data[0]: "x" is not a number`},
		{"state overflow", set("state.gripper_position", "data", []json.Number{"1e39"}), 400, "state.gripper_position", "not a finite FP32"},
		{"state missing", drop("state.joint_position"), 400, "state.joint_position", "input[state.joint_position]: missing (want FP32 [7])"},
		{"camera datatype", set("images.exterior_image_1_left", "datatype", "FP32"), 400, "images.exterior_image_1_left", `datatype "FP32", want UINT8 [2, H, W, 3] or BYTES [2]`},
		{"camera channels", set("images.exterior_image_1_left", "shape", []int{2, 3, 3, 2}), 400, "images.exterior_image_1_left", "want UINT8 [2, H, W, 3]"},
		{"camera frames", set("images.exterior_image_1_left", "shape", []int{1, 2, 3, 3}), 400, "images.exterior_image_1_left", "1 frames, want UINT8 [2, H, W, 3]"},
		{"camera pixel", set("images.exterior_image_1_left", "data", append(make([]int, 35), 256)), 400, "images.exterior_image_1_left", "data[35]: 256 is not a UINT8"},
		{"camera bytes frames", set("images.wrist_image_left", "shape", []int{1}), 400, "images.wrist_image_left", "want BYTES [2]"},
		{"camera missing", drop("images.wrist_image_left"), 400, "images.wrist_image_left", "input[images.wrist_image_left]: missing"},
		{"instruction missing", drop("instruction"), 400, "instruction", "input[instruction]: missing"},
		{"instruction datatype", set("instruction", "datatype", "UINT8"), 400, "instruction", "want BYTES [1]"},
		{"unknown input", add(map[string]any{"name": "images.top", "datatype": "BYTES", "shape": []int{1}, "data": []string{"x"}}), 400, "images.top", "input[images.top]: unknown input (want images.exterior_image_1_left"},
		{"twice", add(map[string]any{"name": "instruction", "datatype": "BYTES", "shape": []int{1}, "data": []string{"x"}}), 400, "instruction", "sent twice"},
		{"negative seed", add(map[string]any{"name": "seed", "datatype": "INT64", "shape": []int{1}, "data": []int{-1}}), 400, "seed", "is negative"},
		{"seed datatype", add(map[string]any{"name": "seed", "datatype": "FP32", "shape": []int{1}, "data": []int{1}}), 400, "seed", "want INT64 [1] or UINT64 [1]"},
		{"noise shape", add(map[string]any{"name": "noise", "datatype": "FP32", "shape": []int{4}, "data": []int{1, 2, 3, 4}}), 400, "noise", "want FP32 [horizon, D]"},
		{"negative dim", set("state.eef_9d", "shape", []int{-9}), 400, "state.eef_9d", "dimension 0 is negative"},
		{"huge shape", set("state.eef_9d", "shape", []int64{1 << 40, 1 << 40}), 400, "state.eef_9d", "more elements than the body has bytes"},
		{"no data", set("state.eef_9d", "data", nil), 400, "state.eef_9d", "no data"},
		{"binary without header", func(ins []map[string]any) []map[string]any {
			return set("state.eef_9d", "parameters", map[string]any{"binary_data_size": 36})(set("state.eef_9d", "data", nil)(ins))
		}, 400, "state.eef_9d", "without an Inference-Header-Content-Length"},
		{"unknown tensor field", set("state.eef_9d", "contents", 1), 422, "state.eef_9d", `input[state.eef_9d]: not an input tensor object: json: unknown field "contents"`},
		{"shape type", set("state.eef_9d", "shape", "9"), 422, "state.eef_9d", "not an input tensor object"},
		{"object element", set("state.gripper_position", "data", []any{map[string]any{}}), 400, "state.gripper_position", "element 0 is an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(body(t, map[string]any{"inputs": tc.mod(droidInputs())}), -1, servicetest.DROID())
			assertError(t, err, tc.status, tc.field, tc.msg)
		})
	}
	for _, tc := range []struct {
		name, body string
		header     int
		status     int
		field, msg string
	}{
		{"not json", "{", -1, 422, "body", "not an inference request object"},
		{"empty", "", -1, 422, "body", "empty body"},
		{"unknown top", `{"inputs": [], "foo": 1}`, -1, 422, "body", `unknown field "foo"`},
		{"no inputs", `{"id": "x"}`, -1, 422, "inputs", "inputs: missing"},
		{"id type", `{"id": 5, "inputs": []}`, -1, 422, "body", "not an inference request object"},
		{"header past body", `{"inputs": []}`, 99, 400, "body", "header Inference-Header-Content-Length: 99 is over"},
		{"trailing binary", `{"inputs": []}xyz`, 14, 400, "body", "3 bytes after the JSON object"},
		{"binary_data_output type", `{"inputs": [], "parameters": {"binary_data_output": "yes"}}`, -1, 400, "parameters.binary_data_output", "want a boolean"},
		{"unknown output", `{"inputs": [], "outputs": [{"name": "actions.nope"}]}`, -1, 400, "images.exterior_image_1_left", "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), tc.header, servicetest.DROID())
			assertError(t, err, tc.status, tc.field, tc.msg)
		})
	}
	// Outputs are checked once the inputs are valid.
	_, err := Parse(body(t, map[string]any{"inputs": droidInputs(), "outputs": []map[string]any{{"name": "actions.nope"}}}), -1, servicetest.DROID())
	assertError(t, err, 400, "actions.nope", "output[actions.nope]: unknown output (want actions.eef_9d, actions.gripper_position, actions.joint_position)")

	// Binary sizes: a fixed-size tensor's must match its shape; BYTES
	// elements must fit.
	js := body(t, map[string]any{"inputs": append(drop("state.eef_9d")(droidInputs()),
		map[string]any{"name": "state.eef_9d", "datatype": "FP32", "shape": []int{9}, "parameters": map[string]any{"binary_data_size": 8}})})
	_, err = Parse(append(js, make([]byte, 8)...), len(js), servicetest.DROID())
	assertError(t, err, 400, "state.eef_9d", "binary_data_size 8, want 36 for FP32 [9]")
	_, err = Parse(append(js, make([]byte, 4)...), len(js), servicetest.DROID())
	assertError(t, err, 400, "state.eef_9d", "binary_data_size 8 is past the binary data (4 bytes left)")
	js = body(t, map[string]any{"inputs": append(drop("images.wrist_image_left")(droidInputs()),
		map[string]any{"name": "images.wrist_image_left", "datatype": "BYTES", "shape": []int{2}, "parameters": map[string]any{"binary_data_size": 8}})})
	_, err = Parse(append(js, 9, 0, 0, 0, 1, 2, 3, 4), len(js), servicetest.DROID())
	assertError(t, err, 400, "images.wrist_image_left", "length 9 past the data")
}

func assertError(t *testing.T, err error, status int, field, msg string) {
	t.Helper()
	var he *service.HandlerError
	require.True(t, errors.As(err, &he), "want a *service.HandlerError, got %v", err)
	assert.Equal(t, status, he.Status, he.Error())
	assert.Equal(t, field, he.Field, he.Error())
	assert.Contains(t, he.Err.Error(), msg)
	assert.Equal(t, strings.ToLower(he.Err.Error()[:1]), he.Err.Error()[:1], "lower-case message")
}

func TestEncode(t *testing.T) {
	seed := uint64(3)
	resp := &service.PredictResponse{Actions: map[string][][]float64{
		"a": {{1, float64(float32(0.1))}, {3, 4}}, "b": {{float64(float32(1e-7))}, {-0.5}}}, ActionKeys: []string{"a", "b"},
		Embodiment: "e", Version: "v1", NoiseSource: "seed", Seed: &seed, RequestID: "rid",
		TimingMS: service.Timing{Device: 12.5, Total: 14.25}}
	b, n, err := Encode(&Infer{ID: "x", HasID: true}, "m", resp)
	require.NoError(t, err)
	assert.Equal(t, len(b), n)
	assert.JSONEq(t, `{"model_name":"m","model_version":"v1","id":"x","parameters":{"embodiment":"e","noise_source":"seed","request_id":"rid","seed":3,"device_ms":12.5,"total_ms":14.25},
		"outputs":[{"name":"actions.a","datatype":"FP32","shape":[2,2],"data":[1,0.1,3,4]},{"name":"actions.b","datatype":"FP32","shape":[2,1],"data":[1e-7,-0.5]}]}`, string(b))

	// Binary on request: only actions.b, after the JSON object.
	no := false
	b, n, err = Encode(&Infer{BinaryOutput: true, Outputs: []Output{{Name: "actions.b"}, {Name: "actions.a", Binary: &no}}}, "m", resp)
	require.NoError(t, err)
	require.Less(t, n, len(b))
	assert.Contains(t, string(b[:n]), `"parameters":{"binary_data_size":8}`)
	assert.Contains(t, string(b[:n]), `"data":[1,0.1,3,4]`)
	assert.Equal(t, float32(1e-7), math.Float32frombits(binary.LittleEndian.Uint32(b[n:])))
	assert.Equal(t, float32(-0.5), math.Float32frombits(binary.LittleEndian.Uint32(b[n+4:])))
}

// FuzzParse: no body or header length makes the parser panic, every error
// is a 400 or 422 *service.HandlerError, and a parsed request names only
// the contract's cameras and groups. Seeds: the f.Add calls (JSON,
// binary FP32, binary BYTES, nested UINT8); run with
// go test -run X -fuzz FuzzParse ./frontend/oip/.
func FuzzParse(f *testing.F) {
	js, _ := json.Marshal(map[string]any{"inputs": droidInputs()})
	f.Add(js, -1)
	f.Add([]byte(`{"inputs":[{"name":"state.eef_9d","datatype":"FP32","shape":[9],"parameters":{"binary_data_size":36}}]}`+strings.Repeat("\x00", 36)), 98)
	f.Add([]byte(`{"inputs":[{"name":"images.wrist_image_left","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":10}}]}`+"\x01\x00\x00\x00a\x01\x00\x00\x00b"), 102)
	f.Add([]byte(`{"inputs":[{"name":"images.x","datatype":"UINT8","shape":[1,1,1,3],"data":[[[[1,2,3]]]]}]}`), -1)
	c := servicetest.DROID()
	f.Fuzz(func(t *testing.T, b []byte, header int) {
		if header < -1 {
			header = -1
		}
		inf, err := Parse(b, header, c)
		if err != nil {
			var he *service.HandlerError
			if !errors.As(err, &he) || (he.Status != 400 && he.Status != 422) {
				t.Fatalf("error %v is not a 400/422 HandlerError", err)
			}
			return
		}
		for cam, frames := range inf.Request.Images {
			if len(frames) != 2 || (cam != "exterior_image_1_left" && cam != "wrist_image_left") {
				t.Fatalf("camera %s with %d frames", cam, len(frames))
			}
			for _, fr := range frames {
				if fr.Raw != nil && len(fr.Raw.Pix) != fr.Raw.Height*fr.Raw.Width*3 {
					t.Fatalf("raw frame %dx%d with %d bytes", fr.Raw.Width, fr.Raw.Height, len(fr.Raw.Pix))
				}
			}
		}
		for g, v := range inf.Request.State {
			if len(v) != group(c.Info.StateGroups, g) {
				t.Fatalf("state %s with %d values", g, len(v))
			}
		}
	})
}
