package oipclient

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/api/oip"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
)

func observation() *rawobs.Observation {
	return &rawobs.Observation{
		Frames:      map[string][]rawobs.Frame{"wrist": {{Pix: []byte{1, 2, 3, 4, 5, 6}, Height: 1, Width: 2}}},
		State:       map[string][]float64{"b": {0.5}, "a": {1, -2}},
		Instruction: "pick",
	}
}

// TestRequestJSON: every input as JSON data, state groups in name order,
// the seed and id when given, no header length.
func TestRequestJSON(t *testing.T) {
	seed := uint64(7)
	body, hl, err := Request(observation(), Options{ID: "r1", Seed: &seed})
	require.NoError(t, err)
	assert.Equal(t, -1, hl)
	assert.JSONEq(t, `{"id":"r1","inputs":[
		{"name":"images.wrist","shape":[1,1,2,3],"datatype":"UINT8","data":[1,2,3,4,5,6]},
		{"name":"state.a","shape":[2],"datatype":"FP32","data":[1,-2]},
		{"name":"state.b","shape":[1],"datatype":"FP32","data":[0.5]},
		{"name":"instruction","shape":[1],"datatype":"BYTES","data":["pick"]},
		{"name":"seed","shape":[1],"datatype":"UINT64","data":[7]}]}`, string(body))
}

// TestRequestBinary: frames and state as binary data after the JSON
// object, sizes in binary_data_size, binary outputs asked for.
func TestRequestBinary(t *testing.T) {
	body, hl, err := Request(observation(), Options{Binary: true})
	require.NoError(t, err)
	require.Positive(t, hl)
	var req struct {
		Inputs []struct {
			Name       string         `json:"name"`
			Parameters map[string]int `json:"parameters"`
			Data       any            `json:"data"`
		} `json:"inputs"`
		Parameters map[string]bool `json:"parameters"`
	}
	require.NoError(t, json.Unmarshal(body[:hl], &req))
	assert.True(t, req.Parameters[oip.ParamBinaryOutput])
	sizes := map[string]int{}
	for _, in := range req.Inputs {
		if in.Parameters != nil {
			sizes[in.Name] = in.Parameters[oip.ParamBinarySize]
			assert.Nil(t, in.Data, in.Name)
		}
	}
	assert.Equal(t, map[string]int{"images.wrist": 6, "state.a": 8, "state.b": 4}, sizes)
	bin := body[hl:]
	require.Len(t, bin, 18)
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6}, bin[:6])
	assert.Equal(t, float32(-2), math.Float32frombits(binary.LittleEndian.Uint32(bin[10:])))
	assert.Equal(t, float32(0.5), math.Float32frombits(binary.LittleEndian.Uint32(bin[14:])))

	_, _, err = Request(&rawobs.Observation{Frames: map[string][]rawobs.Frame{"c": nil}}, Options{})
	assert.EqualError(t, err, "oipclient: camera c: rawobs: no frames")
}

// response builds a response body as the server's Encode does: arm as
// JSON data, grip as binary data when binary.
func response(t *testing.T, binaryGrip bool) ([]byte, string) {
	t.Helper()
	id := "r1"
	r := oip.Response{ModelName: "m", ID: &id, Parameters: map[string]any{"device_ms": 1.5},
		Outputs: []oip.Tensor{{Name: "actions.arm", Datatype: oip.TypeFP32, Shape: []int{2, 1}, Data: json.RawMessage(`[0.25,-1]`)}}}
	var bin []byte
	grip := oip.Tensor{Name: "actions.grip", Datatype: oip.TypeFP32, Shape: []int{1, 2}, Data: json.RawMessage(`[3,4]`)}
	if binaryGrip {
		grip.Data = nil
		grip.Parameters = map[string]any{oip.ParamBinarySize: 8}
		bin = binary.LittleEndian.AppendUint32(bin, math.Float32bits(3))
		bin = binary.LittleEndian.AppendUint32(bin, math.Float32bits(4))
	}
	r.Outputs = append(r.Outputs, grip)
	js, err := json.Marshal(r)
	require.NoError(t, err)
	if !binaryGrip {
		return js, ""
	}
	return append(js, bin...), strconv.Itoa(len(js))
}

// TestParseResponse: JSON and binary outputs read the same; the id,
// model name and parameters come through.
func TestParseResponse(t *testing.T) {
	for _, binaryGrip := range []bool{false, true} {
		body, hl := response(t, binaryGrip)
		r, err := ParseResponse(body, hl)
		require.NoError(t, err, "binary %v", binaryGrip)
		assert.Equal(t, "r1", r.ID)
		assert.Equal(t, "m", r.ModelName)
		assert.Equal(t, json.Number("1.5"), r.Parameters["device_ms"])
		assert.Equal(t, map[string][]float32{"arm": {0.25, -1}, "grip": {3, 4}}, r.Actions)
		assert.Equal(t, map[string][]int{"arm": {2, 1}, "grip": {1, 2}}, r.Shapes)
	}
}

// TestParseResponseErrors name the output or the header.
func TestParseResponseErrors(t *testing.T) {
	body, hl := response(t, true)
	for _, c := range []struct {
		name, body, hl, err string
	}{
		{"header not a number", string(body), "x", `oipclient: Inference-Header-Content-Length "x" for a`},
		{"header past the body", string(body), "9999", `oipclient: Inference-Header-Content-Length "9999"`},
		{"not JSON", "nope", "", "oipclient: response: "},
		{"dtype", `{"outputs":[{"name":"actions.a","datatype":"INT64","shape":[1,1],"data":[1]}]}`, "", "oipclient: output[actions.a]: INT64 [1 1], want FP32 [horizon, D]"},
		{"rank", `{"outputs":[{"name":"actions.a","datatype":"FP32","shape":[1],"data":[1]}]}`, "", "want FP32 [horizon, D]"},
		{"count", `{"outputs":[{"name":"actions.a","datatype":"FP32","shape":[1,2],"data":[1]}]}`, "", "oipclient: output[actions.a]: data: want 2 numbers"},
		{"negative shape", `{"outputs":[{"name":"actions.a","datatype":"FP32","shape":[-1,2],"parameters":{"binary_data_size":-8}}]}`, "", "oipclient: output[actions.a]: shape [-1 2]: negative"},
		{"huge shape", `{"outputs":[{"name":"actions.a","datatype":"FP32","shape":[4611686018427387905,1],"parameters":{"binary_data_size":4}}]}`, "",
			"oipclient: output[actions.a]: shape [4611686018427387905 1]: negative, or more values than the"},
		{"binary size", string(body[:len(body)-4]), hl, "oipclient: output[actions.grip]: binary_data_size 8 for 2 values (4 bytes left)"},
		{"left over", string(body) + "xx", hl, "oipclient: 2 bytes of binary data left over"},
	} {
		_, err := ParseResponse([]byte(c.body), c.hl)
		assert.ErrorContains(t, err, c.err, c.name)
	}
}

// FuzzParseResponse: any body and header parse or fail with an error;
// every parsed output has as many values as its shape says.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"outputs":[{"name":"actions.a","datatype":"FP32","shape":[1,2],"data":[1,2]}]}`), "")
	f.Add([]byte(`{"outputs":[{"name":"actions.a","datatype":"FP32","shape":[1,1],"parameters":{"binary_data_size":4}}]}abcd`), "88")
	f.Add([]byte(`{"outputs":[{"name":"x","datatype":"FP32","shape":[-1,-2],"data":[]}]}`), "")
	f.Add([]byte(`{"outputs":[{"name":"x","datatype":"FP32","shape":[-1,2],"parameters":{"binary_data_size":-8}}]}`), "")
	f.Fuzz(func(t *testing.T, body []byte, hl string) {
		r, err := ParseResponse(body, hl)
		if err != nil {
			return
		}
		for k, v := range r.Actions {
			if s := r.Shapes[k]; len(s) != 2 || len(v) != s[0]*s[1] {
				t.Fatalf("output %s: %d values for shape %v", k, len(v), s)
			}
		}
	})
}
