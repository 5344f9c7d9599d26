package protocoltest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/oipclient"
	"github.com/gr00tgw/gr00tgw/frontend/oip"
)

// oipPost posts an inference request body to /v2/models/{model}/infer
// and returns the status, the body and the Inference-Header-Content-Length.
func (e *env) oipPost(t *testing.T, model string, body []byte, headerLen int) (int, []byte, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "/v2/models/"+model+"/infer", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if headerLen >= 0 {
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set(oip.HeaderContentLength, strconv.Itoa(headerLen))
	}
	resp, err := e.srv.App().Test(req, -1)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header.Get(oip.HeaderContentLength)
}

func (e *env) oipInfer(t *testing.T, model string, body []byte, headerLen int) *oipclient.Result {
	t.Helper()
	st, out, hl := e.oipPost(t, model, body, headerLen)
	require.Equal(t, 200, st, string(out))
	r, err := oipclient.ParseResponse(out, hl)
	require.NoError(t, err)
	return r
}

// TestOIPMatchesHTTP: the DROID demo through /v2/models/<DROID>/infer —
// raw UINT8 frames as JSON data and as binary tensor data (binary
// outputs), PNG frames as BYTES (base64 in JSON, raw in binary data) with
// the demo's own noise — returns actions bit-identical to /predict's with
// the same pixels, state, instruction and seed or noise; LIBERO through its
// tag likewise.
func TestOIPMatchesHTTP(t *testing.T) {
	e := setup(t)
	want := e.httpActions(t, e.droid, u64(7))
	o := raw(t, e.droid)
	for _, bin := range []bool{false, true} {
		body, hl, err := oipclient.Request(o, oipclient.Options{ID: "req-42", Seed: u64(7), Binary: bin})
		require.NoError(t, err)
		r := e.oipInfer(t, droidTag, body, hl)
		assert.Equal(t, "req-42", r.ID)
		assert.Equal(t, droidTag, r.ModelName)
		assert.Equal(t, droidTag, r.Parameters["embodiment"])
		for _, g := range groups {
			assert.Equal(t, []int{40, len(want[g]) / 40}, r.Shapes[g], g)
			sameBits(t, want[g], r.Actions[g], "oip binary="+strconv.FormatBool(bin)+" "+g)
		}
	}
	// The model's name addresses the default embodiment.
	body, hl, err := oipclient.Request(o, oipclient.Options{Seed: u64(7)})
	require.NoError(t, err)
	r := e.oipInfer(t, "GR00T-N1.7-3B", body, hl)
	sameBits(t, want["eef_9d"], r.Actions["eef_9d"], "by model name")

	// PNG frames as BYTES with the demo's explicit noise.
	full, err := os.ReadFile(filepath.Join(e.root, "testdata", "n17-tiny", "caseA", "request.json"))
	require.NoError(t, err)
	wantNoise := e.httpActions(t, full, nil)
	for _, bin := range []bool{false, true} {
		body, hl := pngRequest(t, full, bin)
		r := e.oipInfer(t, droidTag, body, hl)
		assert.Equal(t, "client", r.Parameters["noise_source"])
		for _, g := range groups {
			sameBits(t, wantNoise[g], r.Actions[g], "oip png binary="+strconv.FormatBool(bin)+" "+g)
		}
	}

	lwant := e.httpActions(t, e.libero, u64(5))
	body, hl, err = oipclient.Request(raw(t, e.libero), oipclient.Options{Seed: u64(5), Binary: true})
	require.NoError(t, err)
	r = e.oipInfer(t, liberoTag, body, hl)
	require.Len(t, r.Actions, len(lwant))
	for g, w := range lwant {
		sameBits(t, w, r.Actions[g], "libero "+g)
	}
}

// pngRequest turns a /predict JSON body into an inference request with
// its PNG frames as BYTES (base64 strings in JSON; raw bytes after the
// JSON object with bin), its state as FP32 and its noise as FP32 [40, 132].
func pngRequest(t *testing.T, predict []byte, bin bool) ([]byte, int) {
	t.Helper()
	var p struct {
		Images      map[string][]string  `json:"images"`
		State       map[string][]float64 `json:"state"`
		Instruction string               `json:"instruction"`
		Noise       [][]float32          `json:"noise"`
	}
	require.NoError(t, json.Unmarshal(predict, &p))
	var ins []map[string]any
	var data []byte
	for cam, frames := range p.Images {
		in := map[string]any{"name": oip.PrefixImages + cam, "datatype": "BYTES", "shape": []int{len(frames)}}
		if bin {
			n := len(data)
			for _, f := range frames {
				png, err := base64.StdEncoding.DecodeString(f)
				require.NoError(t, err)
				data = binary.LittleEndian.AppendUint32(data, uint32(len(png)))
				data = append(data, png...)
			}
			in["parameters"] = map[string]any{"binary_data_size": len(data) - n}
		} else {
			in["data"] = frames
		}
		ins = append(ins, in)
	}
	for g, v := range p.State {
		ins = append(ins, map[string]any{"name": oip.PrefixState + g, "datatype": "FP32", "shape": []int{len(v)}, "data": v})
	}
	ins = append(ins, map[string]any{"name": "instruction", "datatype": "BYTES", "shape": []int{1}, "data": []string{p.Instruction}},
		map[string]any{"name": "noise", "datatype": "FP32", "shape": []int{len(p.Noise), len(p.Noise[0])}, "data": p.Noise})
	js, err := json.Marshal(map[string]any{"inputs": ins})
	require.NoError(t, err)
	if !bin {
		return js, -1
	}
	return append(js, data...), len(js)
}

// TestOIPErrors: bad tensors get 400 {"error"} naming the input, an
// unknown model 404; GET /v2 lists the binary extension; the predictions
// are counted under protocol="oip" with the infer route.
func TestOIPErrors(t *testing.T) {
	e := setup(t)
	o := raw(t, e.droid)
	body, _, err := oipclient.Request(o, oipclient.Options{})
	require.NoError(t, err)
	edit := func(f func(ins []any) []any) []byte {
		var r map[string]any
		_ = json.Unmarshal(body, &r)
		r["inputs"] = f(r["inputs"].([]any))
		b, _ := json.Marshal(r)
		return b
	}
	field := func(name, key string, v any) func([]any) []any {
		return func(ins []any) []any {
			for _, in := range ins {
				if m := in.(map[string]any); m["name"] == name {
					m[key] = v
				}
			}
			return ins
		}
	}
	for _, tc := range []struct {
		name        string
		model       string
		body        []byte
		status      int
		field, text string
	}{
		{"datatype", droidTag, edit(field("state.eef_9d", "datatype", "INT32")), 400, "state.eef_9d", `input[state.eef_9d]: datatype "INT32", want FP32 [9]`},
		{"shape", droidTag, edit(field("images.wrist_image_left", "shape", []int{1, 2, 3})), 400, "images.wrist_image_left", "input[images.wrist_image_left]: shape [1 2 3]"},
		{"missing", droidTag, edit(func(ins []any) []any { return ins[1:] }), 400, "images.exterior_image_1_left", "input[images.exterior_image_1_left]: missing"},
		{"unknown model", "no_such_robot", body, 404, "model", `unknown model "no_such_robot"`},
		{"not json", droidTag, []byte("{"), 422, "body", "not an inference request object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out, _ := e.oipPost(t, tc.model, tc.body, -1)
			require.Equal(t, tc.status, st, string(out))
			var eb struct {
				Error string `json:"error"`
				Field string `json:"field"`
			}
			require.NoError(t, json.Unmarshal(out, &eb), string(out))
			assert.Contains(t, eb.Error, tc.text)
			assert.Equal(t, tc.field, eb.Field)
		})
	}

	req2, _ := http.NewRequest("GET", "/v2", nil)
	resp, err := e.srv.App().Test(req2, -1)
	require.NoError(t, err)
	var meta struct {
		Name       string   `json:"name"`
		Extensions []string `json:"extensions"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&meta))
	assert.Equal(t, "gr00tgw", meta.Name)
	assert.Contains(t, meta.Extensions, "binary_tensor_data")

	// Served and refused predictions, labelled; one attempt at an unknown
	// model is labelled "unknown", not with the client's name.
	e.oipInfer(t, droidTag, body, -1)
	mreq, _ := http.NewRequest("GET", "/metrics", nil)
	mresp, err := e.srv.App().Test(mreq, -1)
	require.NoError(t, err)
	mb, _ := io.ReadAll(mresp.Body)
	route := `route="/v2/models/:model/infer"`
	for _, want := range []string{
		`gateway_predictions_total{code="",embodiment="` + droidTag + `",protocol="oip",` + route + `}`,
		`gateway_predictions_total{code="invalid",embodiment="` + droidTag + `",protocol="oip",` + route + `}`,
		`gateway_predictions_total{code="not_found",embodiment="unknown",protocol="oip",` + route + `}`,
		`protocol="oip",stage="queue"}`,
	} {
		assert.True(t, strings.Contains(string(mb), want), "/metrics has %s", want)
	}
	assert.False(t, strings.Contains(string(mb), "no_such_robot"), "a client's model name is no label value")
}

// TestOIPMetadataDescribesInfer: GET /v2/models/{model} lists what
// /v2/models/{model}/infer accepts — cameras as UINT8 [T, -1, -1, 3] (BYTES
// [T] named in the tensor's parameters), state FP32 [D], instruction BYTES
// [1], seed INT64 [1] and noise FP32 [horizon, D] marked optional (and
// exclusive) — and a
// request built from it (every input at its listed datatype, the -1
// dimensions filled with the demo's frame size) is served.
func TestOIPMetadataDescribesInfer(t *testing.T) {
	e := setup(t)
	resp, err := e.srv.App().Test(httptestGet("/v2/models/"+droidTag), -1)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, 200, resp.StatusCode, string(b))
	var md struct {
		Inputs []struct {
			Name       string         `json:"name"`
			Datatype   string         `json:"datatype"`
			Shape      []int          `json:"shape"`
			Parameters map[string]any `json:"parameters"`
		} `json:"inputs"`
		Parameters map[string]any `json:"parameters"`
	}
	require.NoError(t, json.Unmarshal(b, &md))
	assert.Equal(t, []any{"seed", "noise"}, md.Parameters["optional_inputs"])

	// The client's request (UINT8 frames, UINT64 seed) for the demo.
	body, _, err := oipclient.Request(raw(t, e.droid), oipclient.Options{Seed: u64(7)})
	require.NoError(t, err)
	var req struct {
		Inputs []map[string]any `json:"inputs"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	sent := map[string]map[string]any{}
	for _, in := range req.Inputs {
		sent[in["name"].(string)] = in
	}
	var ins []map[string]any
	optional := map[string]bool{}
	for _, m := range md.Inputs {
		if m.Parameters["optional"] == true {
			optional[m.Name] = true
		}
		in, ok := sent[m.Name]
		switch {
		case strings.HasPrefix(m.Name, oip.PrefixImages):
			require.True(t, ok, m.Name)
			assert.Equal(t, "UINT8", m.Datatype, m.Name)
			assert.Equal(t, []any{"UINT8", "BYTES"}, m.Parameters["datatypes"], m.Name)
			shape := in["shape"].([]any)
			require.Len(t, m.Shape, len(shape), m.Name)
			for i, d := range m.Shape {
				if d != -1 {
					assert.Equal(t, float64(d), shape[i], "%s dim %d", m.Name, i)
				}
			}
			assert.Equal(t, -1, m.Shape[1], "height is variable")
			ins = append(ins, in)
		case m.Name == oip.InputSeed:
			assert.Equal(t, "INT64", m.Datatype)
			assert.Equal(t, []int{1}, m.Shape)
			ins = append(ins, map[string]any{"name": "seed", "datatype": m.Datatype, "shape": m.Shape, "data": []int64{7}})
		case m.Name == oip.InputNoise:
			assert.Equal(t, "FP32", m.Datatype)
			require.Len(t, m.Shape, 2)
			ins = append(ins, map[string]any{"name": "noise", "datatype": m.Datatype, "shape": m.Shape,
				"data": make([]float32, m.Shape[0]*m.Shape[1])})
		default:
			require.True(t, ok, "%s is listed but the client does not send it", m.Name)
			assert.Equal(t, m.Datatype, in["datatype"], m.Name)
			assert.Equal(t, float64(m.Shape[0]), in["shape"].([]any)[0], m.Name)
			ins = append(ins, in)
		}
	}
	assert.Equal(t, map[string]bool{"seed": true, "noise": true}, optional)
	for name := range sent {
		assert.Contains(t, fmt.Sprint(ins), name, "the client sends %s, which the metadata does not list", name)
	}
	// With the listed seed (INT64), then with the noise instead (the two
	// are exclusive, as the parameters say).
	var withSeed, withNoise []map[string]any
	for _, in := range ins {
		if in["name"] != "noise" {
			withSeed = append(withSeed, in)
		}
		if in["name"] != "seed" {
			withNoise = append(withNoise, in)
		}
	}
	for _, m := range md.Inputs {
		if m.Name == "seed" || m.Name == "noise" {
			assert.NotEmpty(t, m.Parameters["exclusive_with"], m.Name)
		}
	}
	for _, set := range [][]map[string]any{withSeed, withNoise} {
		b, err := json.Marshal(map[string]any{"inputs": set})
		require.NoError(t, err)
		st, out, _ := e.oipPost(t, droidTag, b, -1)
		assert.Equal(t, 200, st, "%s", out)
	}
}

func httptestGet(path string) *http.Request {
	req, _ := http.NewRequest("GET", path, nil)
	return req
}
