package httpfront

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gr00tgw/gr00tgw/service"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gr00tgw/gr00tgw/config"
)

func pngB64(tb testing.TB, w, h int) string {
	tb.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	require.NoError(tb, png.Encode(&buf, img))
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// body returns the demo request with fn applied.
func body(tb testing.TB, fn func(m map[string]any)) []byte {
	tb.Helper()
	m := demoRequest(tb)
	if fn != nil {
		fn(m)
	}
	return mustJSON(tb, m)
}

func images(m map[string]any) map[string]any { return m["images"].(map[string]any) }
func state(m map[string]any) map[string]any  { return m["state"].(map[string]any) }

func TestPredictErrors(t *testing.T) {
	f := newFixture(t, true)
	square := pngB64(t, 64, 64)
	wide := pngB64(t, 128, 72)
	cases := []struct {
		name   string
		body   []byte
		hdr    map[string]string
		status int
		field  string
		code   string
	}{
		// 422: schema.
		{"unknown field", body(t, func(m map[string]any) { m["temperature"] = 1 }), nil, 422, "temperature", service.CodeSchema},
		{"images not object", body(t, func(m map[string]any) { m["images"] = "x" }), nil, 422, "images", service.CodeSchema},
		{"frame not string", body(t, func(m map[string]any) { images(m)["wrist_image_left"] = []any{1, 2} }), nil, 422, "images.wrist_image_left[0]", service.CodeSchema},
		{"state value not number", body(t, func(m map[string]any) { state(m)["gripper_position"] = []any{"0.1"} }), nil, 422, "state.gripper_position[0]", service.CodeSchema},
		{"instruction not string", body(t, func(m map[string]any) { m["instruction"] = 5 }), nil, 422, "instruction", service.CodeSchema},
		{"two aliases", body(t, func(m map[string]any) { m["prompt"] = "x" }), nil, 422, "prompt", service.CodeSchema},
		{"missing instruction", body(t, func(m map[string]any) { delete(m, "instruction") }), nil, 422, "instruction", service.CodeSchema},
		{"missing images", body(t, func(m map[string]any) { delete(m, "images") }), nil, 422, "images", service.CodeSchema},
		{"missing state", body(t, func(m map[string]any) { delete(m, "state") }), nil, 422, "state", service.CodeSchema},
		{"seed float", body(t, func(m map[string]any) { delete(m, "noise"); m["seed"] = 1.5 }), nil, 422, "seed", service.CodeSchema},
		{"return_normalized string", body(t, func(m map[string]any) { m["return_normalized"] = "yes" }), nil, 422, "return_normalized", service.CodeSchema},
		{"noise row not array", body(t, func(m map[string]any) { n := m["noise"].([]any); n[3] = 1.0 }), nil, 422, "noise[3]", service.CodeSchema},
		{"malformed json", []byte(`{"images": `), nil, 422, "body", service.CodeSchema},
		{"trailing data", append(body(t, nil), []byte(" {}")...), nil, 422, "body", service.CodeSchema},
		{"top-level array", []byte(`[1,2]`), nil, 422, "body", service.CodeSchema},
		{"invalid utf8", []byte("{\"instruction\": \"\xff\xfe\"}"), nil, 422, "body", service.CodeSchema},
		{"empty body", []byte{}, nil, 422, "body", service.CodeSchema},

		// 400: validation.
		{"missing camera", body(t, func(m map[string]any) { delete(images(m), "wrist_image_left") }), nil, 400, "images.wrist_image_left", service.CodeInvalid},
		{"unknown camera", body(t, func(m map[string]any) { images(m)["top"] = []any{wide, wide} }), nil, 400, "images.top", service.CodeInvalid},
		{"one frame", body(t, func(m map[string]any) {
			im := images(m)
			im["wrist_image_left"] = im["wrist_image_left"].([]any)[:1]
		}), nil, 400, "images.wrist_image_left", service.CodeInvalid},
		{"three frames", body(t, func(m map[string]any) {
			im := images(m)
			l := im["exterior_image_1_left"].([]any)
			im["exterior_image_1_left"] = append(l, l[0])
		}), nil, 400, "images.exterior_image_1_left", service.CodeInvalid},
		{"bad base64", body(t, func(m map[string]any) { images(m)["wrist_image_left"].([]any)[1] = "!!!notbase64" }), nil, 400, "images.wrist_image_left[1]", service.CodeInvalid},
		{"undecodable image", body(t, func(m map[string]any) {
			images(m)["wrist_image_left"].([]any)[0] = base64.StdEncoding.EncodeToString([]byte("not an image"))
		}), nil, 400, "images.wrist_image_left[0]", service.CodeInvalid},
		{"square frame", body(t, func(m map[string]any) { images(m)["exterior_image_1_left"] = []any{square, square} }), nil, 400, "images.exterior_image_1_left[0]", service.CodeInvalid},
		{"frames differ in size", body(t, func(m map[string]any) { images(m)["exterior_image_1_left"].([]any)[1] = wide }), nil, 400, "images.exterior_image_1_left[1]", service.CodeInvalid},
		{"missing state group", body(t, func(m map[string]any) { delete(state(m), "joint_position") }), nil, 400, "state.joint_position", service.CodeInvalid},
		{"unknown state group", body(t, func(m map[string]any) { state(m)["base"] = []any{1.0} }), nil, 400, "state.base", service.CodeInvalid},
		{"wrong state width", body(t, func(m map[string]any) { state(m)["joint_position"] = []any{1.0, 2.0} }), nil, 400, "state.joint_position", service.CodeInvalid},
		{"two state rows", body(t, func(m map[string]any) { state(m)["gripper_position"] = []any{[]any{1.0}, []any{2.0}} }), nil, 400, "state.gripper_position", service.CodeInvalid},
		{"state overflows float32", body(t, func(m map[string]any) { state(m)["gripper_position"] = []any{json.Number("1e39")} }), nil, 400, "state.gripper_position", service.CodeInvalid},
		{"state overflows float64", body(t, func(m map[string]any) { state(m)["gripper_position"] = []any{json.Number("1e400")} }), nil, 400, "state.gripper_position[0]", service.CodeInvalid},
		{"empty instruction", body(t, func(m map[string]any) { m["instruction"] = "  " }), nil, 400, "instruction", service.CodeInvalid},
		{"long instruction", body(t, func(m map[string]any) { m["instruction"] = strings.Repeat("é", 2001) }), nil, 400, "instruction", service.CodeInvalid},
		{"too many tokens (encoder)", body(t, func(m map[string]any) { m["instruction"] = strings.Repeat("go ", 60) }), nil, 400, "instruction", service.CodeInvalid},
		{"too many tokens via alias names the alias", body(t, func(m map[string]any) { m["language"] = strings.Repeat("go ", 60); delete(m, "instruction") }), nil, 400, "language", service.CodeInvalid},
		{"other embodiment", body(t, func(m map[string]any) { m["embodiment"] = "gr1" }), nil, 400, "embodiment", service.CodeInvalid},
		{"seed and noise", body(t, func(m map[string]any) { m["seed"] = 7 }), nil, 400, "seed", service.CodeInvalid},
		{"negative seed", body(t, func(m map[string]any) { delete(m, "noise"); m["seed"] = -1 }), nil, 400, "seed", service.CodeInvalid},
		{"noise wrong shape", body(t, func(m map[string]any) { m["noise"] = m["noise"].([]any)[:39] }), nil, 400, "noise", service.CodeInvalid},
		{"noise ragged", body(t, func(m map[string]any) { n := m["noise"].([]any); n[2] = n[2].([]any)[:5] }), nil, 400, "noise", service.CodeInvalid},
		{"noise flat", body(t, func(m map[string]any) { m["noise"] = []any{1.0, 2.0} }), nil, 400, "noise", service.CodeInvalid},
		{"bad state dtype", body(t, func(m map[string]any) { m["state_dtype"] = "bfloat16" }), nil, 400, "state_dtype", service.CodeInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := f.do(t, "POST", "/predict", tc.body, tc.hdr)
			require.Equal(t, tc.status, resp.StatusCode, string(b))
			var eb errorBody
			require.NoError(t, json.Unmarshal(b, &eb), string(b))
			assert.Equal(t, tc.field, eb.Field, eb.Error)
			assert.Equal(t, tc.code, eb.Code)
			assert.NotEmpty(t, eb.Error)
			assert.Equal(t, eb.Error, eb.Detail)
			assert.Equal(t, resp.Header.Get(service.RequestIDHeader), eb.RequestID)
		})
	}
	assert.Equal(t, int64(0), f.backend.calls.Load()-1, "only the warm-up reached the device")
}

func TestPredictOK(t *testing.T) {
	f := newFixture(t, true)
	resp, b := f.do(t, "POST", "/predict", body(t, func(m map[string]any) { m["return_normalized"] = true }), nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Regexp(t, `^parse;dur=[0-9.]+, decode;dur=[0-9.]+, .*device;dur=[0-9.]+, decode_actions;dur=[0-9.]+, total;dur=[0-9.]+$`, resp.Header.Get("Server-Timing"))
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	for _, k := range []string{"actions", "action_horizon", "action_keys", "action_dims", "normalized", "embodiment",
		"embodiment_id", "version", "model", "layout", "images", "seq_len", "prompt_tokens", "state_dtype",
		"noise_source", "seed", "timing_ms", "action_pred_normalized", "action_pred_valid_hd"} {
		assert.Contains(t, got, k)
	}
	var pr service.PredictResponse
	require.NoError(t, json.Unmarshal(b, &pr))
	assert.Equal(t, 40, pr.ActionHorizon)
	assert.Equal(t, []string{"eef_9d", "gripper_position", "joint_position"}, pr.ActionKeys)
	assert.Equal(t, map[string]int{"eef_9d": 9, "gripper_position": 1, "joint_position": 7}, pr.ActionDims)
	assert.Len(t, pr.Actions["eef_9d"], 40)
	assert.Len(t, pr.Actions["eef_9d"][0], 9)
	assert.Len(t, pr.Actions["joint_position"][39], 7)
	assert.False(t, pr.Normalized)
	assert.Equal(t, 24, pr.EmbodimentID)
	assert.Equal(t, "n17", pr.Version)
	assert.Equal(t, "droid", pr.Layout)
	assert.Equal(t, "GR00T-N1.7-3B", pr.Model)
	assert.Equal(t, service.ImageReport{Frames: 2, ReceivedHW: [2]int{180, 320}, VitGridTHW: [3]int{1, 16, 28}}, pr.Images["wrist_image_left"])
	assert.Equal(t, 469, pr.SeqLen)
	assert.Equal(t, 8, pr.PromptTokens)
	assert.Equal(t, "client", pr.NoiseSource)
	assert.Nil(t, pr.Seed)
	assert.Contains(t, string(b), `"seed":null`)
	assert.Len(t, pr.ActionPredNormalized, 40)
	assert.Len(t, pr.ActionPredNormalized[0], 132)
	assert.Len(t, pr.ActionPredValidHD[0], 17)
	assert.Equal(t, map[string]float64{"vision": 3, "llm": 2, "adapter": 1, "denoise": 4}, pr.TimingMS.DeviceStages)
	assert.Greater(t, pr.TimingMS.Total, 0.0)
	assert.GreaterOrEqual(t, pr.TimingMS.Total, pr.TimingMS.Decode+pr.TimingMS.Encode+pr.TimingMS.Device+pr.TimingMS.DecodeActions-0.01)
	assert.Equal(t, service.PluginReport{Name: "droid", Version: "0.1.0"}, pr.Plugin)
	// Actions equal the golden of the fakes exactly (float32 values survive the text round trip).
	assert.Equal(t, f.binding.Demo.Golden, pr.Actions)
}

func TestPredictVariants(t *testing.T) {
	f := newFixture(t, true)
	cases := []struct {
		name  string
		fn    func(m map[string]any)
		check func(t *testing.T, pr *service.PredictResponse)
	}{
		{"default seed", func(m map[string]any) { delete(m, "noise") }, func(t *testing.T, pr *service.PredictResponse) {
			require.NotNil(t, pr.Seed)
			assert.Equal(t, uint64(42), *pr.Seed)
			assert.Equal(t, "seed", pr.NoiseSource)
		}},
		{"explicit seed", func(m map[string]any) { delete(m, "noise"); m["seed"] = 7 }, func(t *testing.T, pr *service.PredictResponse) {
			require.NotNil(t, pr.Seed)
			assert.Equal(t, uint64(7), *pr.Seed)
		}},
		{"language alias", func(m map[string]any) { m["language"] = m["instruction"]; delete(m, "instruction") }, nil},
		{"prompt alias", func(m map[string]any) { m["prompt"] = m["instruction"]; delete(m, "instruction") }, nil},
		{"nested state rows", func(m map[string]any) {
			for k, v := range state(m) {
				state(m)[k] = []any{v}
			}
		}, nil},
		{"state as one list", func(m map[string]any) {
			s := state(m)
			var all []any
			for _, g := range []string{"eef_9d", "gripper_position", "joint_position"} {
				all = append(all, s[g].([]any)...)
			}
			m["state"] = []any{all}
		}, func(t *testing.T, pr *service.PredictResponse) {
			assert.Equal(t, newFixture(t, false).binding.Demo.Golden, pr.Actions)
		}},
		{"noise with batch dim", func(m map[string]any) { m["noise"] = []any{m["noise"]} }, nil},
		{"null optionals", func(m map[string]any) {
			m["seed"], m["embodiment"], m["state_dtype"], m["return_normalized"] = nil, nil, nil, nil
		}, nil},
		{"float64 state", func(m map[string]any) { m["state_dtype"] = "float64" }, func(t *testing.T, pr *service.PredictResponse) {
			assert.Equal(t, "float64", pr.StateDtype)
		}},
		{"data url frame", func(m map[string]any) {
			l := images(m)["wrist_image_left"].([]any)
			l[0] = "data:image/png;base64," + l[0].(string)
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := f.do(t, "POST", "/predict", body(t, tc.fn), nil)
			require.Equal(t, 200, resp.StatusCode, string(b))
			var pr service.PredictResponse
			require.NoError(t, json.Unmarshal(b, &pr))
			if tc.check != nil {
				tc.check(t, &pr)
			}
		})
	}
	// The explicit seed reached the backend untruncated.
	resp, b := f.do(t, "POST", "/predict", []byte(strings.Replace(string(body(t, func(m map[string]any) { delete(m, "noise") })), `"embodiment":`, `"seed": 18446744073709551615, "embodiment":`, 1)), nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"seed":18446744073709551615`)
	assert.Equal(t, uint64(18446744073709551615), f.backend.lastSeed)
}

func TestMsgpackRoundTrip(t *testing.T) {
	f := newFixture(t, true)
	m := demoRequest(t)
	// msgpack clients may send raw image bytes (bin) instead of base64.
	for cam, l := range images(m) {
		var frames []any
		for _, s := range l.([]any) {
			raw, err := base64.StdEncoding.DecodeString(s.(string))
			require.NoError(t, err)
			frames = append(frames, raw)
		}
		images(m)[cam] = frames
	}
	mp, err := msgpack.Marshal(m)
	require.NoError(t, err)
	resp, b := f.do(t, "POST", "/predict", mp, map[string]string{"Content-Type": "application/msgpack"})
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Equal(t, service.MIMEMsgpack, resp.Header.Get("Content-Type"))
	var viaMsgpack service.PredictResponse
	require.NoError(t, msgpack.Unmarshal(b, &viaMsgpack))

	resp, b = f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 200, resp.StatusCode)
	var viaJSON service.PredictResponse
	require.NoError(t, json.Unmarshal(b, &viaJSON))
	assert.Equal(t, viaJSON.Actions, viaMsgpack.Actions)
	assert.Equal(t, viaJSON.Images, viaMsgpack.Images)
	assert.Equal(t, viaJSON.SeqLen, viaMsgpack.SeqLen)

	// JSON body, msgpack answer by Accept.
	resp, b = f.do(t, "POST", "/predict", body(t, nil), map[string]string{"Accept": "application/msgpack"})
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, msgpack.Unmarshal(b, &viaMsgpack))
	assert.Equal(t, viaJSON.Actions, viaMsgpack.Actions)

	// Same schema rules: unknown field → 422 naming it; NaN state → 400.
	m2 := demoRequest(t)
	m2["bogus"] = true
	mp, _ = msgpack.Marshal(m2)
	resp, b = f.do(t, "POST", "/predict", mp, map[string]string{"Content-Type": "application/msgpack"})
	require.Equal(t, 422, resp.StatusCode)
	// A msgpack client gets its error body in msgpack too.
	assert.Equal(t, service.MIMEMsgpack, resp.Header.Get("Content-Type"))
	var eb errorBody
	require.NoError(t, msgpack.Unmarshal(b, &eb))
	assert.Equal(t, "bogus", eb.Field)
	assert.Equal(t, service.CodeSchema, eb.Code)
	assert.NotEmpty(t, eb.RequestID)
	m3 := demoRequest(t)
	state(m3)["gripper_position"] = []any{nan()}
	mp, _ = msgpack.Marshal(m3)
	resp, b = f.do(t, "POST", "/predict", mp, map[string]string{"Content-Type": "application/msgpack", "Accept": "application/json"})
	require.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(b), `"field":"state.gripper_position"`)
	resp, b = f.do(t, "POST", "/predict", []byte{0xc1}, map[string]string{"Content-Type": "application/msgpack"})
	require.Equal(t, 422, resp.StatusCode)
	require.NoError(t, msgpack.Unmarshal(b, &eb))
	assert.Equal(t, "body", eb.Field)
}

func nan() float64 { z := 0.0; return z / z }

func TestRequestID(t *testing.T) {
	var logs syncBuffer
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	resp, _ := f.do(t, "GET", "/health", nil, map[string]string{service.RequestIDHeader: "abc-123"})
	assert.Equal(t, "abc-123", resp.Header.Get(service.RequestIDHeader))
	resp, _ = f.do(t, "GET", "/health", nil, nil)
	assert.Regexp(t, `^[0-9a-f]{32}$`, resp.Header.Get(service.RequestIDHeader))
	resp, _ = f.do(t, "GET", "/health", nil, map[string]string{service.RequestIDHeader: "bad id with spaces"})
	assert.Regexp(t, `^[0-9a-f]{32}$`, resp.Header.Get(service.RequestIDHeader))
	resp, b := f.do(t, "POST", "/predict", body(t, nil), map[string]string{service.RequestIDHeader: "rid-7"})
	assert.Equal(t, "rid-7", resp.Header.Get(service.RequestIDHeader))
	assert.Contains(t, string(b), `"request_id":"rid-7"`)

	// The request log carries the id, route, status and stage timings.
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, `"request_id":"rid-7"`) {
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	require.NotNil(t, line, logs.String())
	assert.Equal(t, "request", line["msg"])
	assert.Equal(t, "/predict", line["route"])
	assert.Equal(t, 200.0, line["status"])
	assert.Equal(t, 469.0, line["seq_len"])
	assert.Contains(t, line, "device_ms")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestLifecycleStartingThenReady(t *testing.T) {
	f := newFixture(t, false)
	resp, b := f.do(t, "GET", "/health", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	assert.JSONEq(t, `{"status":"starting","model":"GR00T-N1.7-3B","device":"cpu:0"}`, string(b))
	resp, _ = f.do(t, "GET", "/v2/health/ready", nil, nil)
	assert.Equal(t, 503, resp.StatusCode)
	resp, _ = f.do(t, "GET", "/v2/health/live", nil, nil)
	assert.Equal(t, 200, resp.StatusCode)
	resp, b = f.do(t, "POST", "/predict", body(t, nil), nil)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(b), `"code":"starting"`)
	resp, _ = f.do(t, "GET", "/info", nil, nil)
	assert.Equal(t, 503, resp.StatusCode)

	require.NoError(t, f.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil }))
	_, b = f.do(t, "GET", "/health", nil, nil)
	assert.JSONEq(t, `{"status":"ok","model":"GR00T-N1.7-3B","device":"cpu:0"}`, string(b))
	resp, _ = f.do(t, "GET", "/v2/health/ready", nil, nil)
	assert.Equal(t, 200, resp.StatusCode)
	resp, b = f.do(t, "GET", "/info", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	var info map[string]any
	require.NoError(t, json.Unmarshal(b, &info))
	for _, k := range []string{"model", "version", "task", "hardware", "stage", "policy", "weights", "source", "inputs", "outputs", "noise", "limits", "device_facts", "warmup_latency_ms", "warmup_fidelity_vs_golden", "license"} {
		assert.Contains(t, info, k)
	}
	assert.InDelta(t, 1.0, info["warmup_fidelity_vs_golden"].(map[string]any)["pcc"], 1e-12)
	resp, b = f.do(t, "GET", "/demo", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	var demo struct {
		Request  map[string]any `json:"request"`
		Expected struct {
			Actions map[string][][]float64 `json:"actions"`
		} `json:"expected"`
	}
	require.NoError(t, json.Unmarshal(b, &demo))
	assert.Contains(t, demo.Request, "images")
	assert.Len(t, demo.Expected.Actions["eef_9d"], 40)
	resp, b = f.do(t, "GET", "/v1/models", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(b), `"object":"list"`)
	assert.Contains(t, string(b), `"id":"nvidia/GR00T-N1.7-3B"`)
	resp, b = f.do(t, "GET", "/v2/models/GR00T-N1.7-3B", nil, nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `{"name":"actions.eef_9d","datatype":"FP32","shape":[40,9]}`)
	assert.Contains(t, string(b), `{"name":"images.wrist_image_left","datatype":"UINT8","shape":[2,-1,-1,3],"parameters":{`)
	assert.Contains(t, string(b), `{"name":"seed","datatype":"INT64","shape":[1],"parameters":{`)
	assert.Contains(t, string(b), `{"name":"noise","datatype":"FP32","shape":[40,132],"parameters":{`)
	resp, b = f.do(t, "GET", "/v2/models/nvidia%2FGR00T-N1.7-3B/ready", nil, nil) // the /v1/models id, as a client quotes it
	assert.Equal(t, 200, resp.StatusCode, string(b))
	resp, _ = f.do(t, "GET", "/v2/models/other", nil, nil)
	assert.Equal(t, 404, resp.StatusCode)
	resp, _ = f.do(t, "GET", "/v2/models/"+droidInfo.Name+"/ready", nil, nil)
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = f.do(t, "POST", "/v1/predict", body(t, nil), nil)
	assert.Equal(t, 200, resp.StatusCode)
	resp, b = f.do(t, "GET", "/nope", nil, nil)
	assert.Equal(t, 404, resp.StatusCode)
	assert.Contains(t, string(b), `"code":"not_found"`)
}

func TestStartFailures(t *testing.T) {
	cases := []struct {
		name    string
		opt     fixtureOpt
		load    func(d *service.Deps) (*service.Deps, error)
		wantErr string
	}{
		{"loader error", nil, func(*service.Deps) (*service.Deps, error) {
			return nil, errors.New("tokenizer: tokenizer.json: no such file")
		}, "tokenizer.json"},
		{"incomplete deps", nil, func(d *service.Deps) (*service.Deps, error) { d.Backend = nil; return d, nil }, "incomplete"},
		{"pcc below gate", func(c *config.Config, o *fixtureOptions, d *fixture) { d.binding.Demo = fakeDemo(t, 0.5) }, nil, "PCC"},
		{"no demo", func(c *config.Config, o *fixtureOptions, d *fixture) { d.binding.Demo = nil }, nil, "demo_dir"},
		{"device fails during warm-up", func(c *config.Config, o *fixtureOptions, d *fixture) {
			d.backend.err = errors.New("trace replay failed")
		}, nil, "trace replay failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []fixtureOpt
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			f := newFixture(t, false, opts...)
			load := func(context.Context) (*service.Deps, error) { return f.deps, nil }
			if tc.load != nil {
				load = func(context.Context) (*service.Deps, error) { return tc.load(f.deps) }
			}
			err := f.core.Start(context.Background(), load)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			_, b := f.do(t, "GET", "/health", nil, nil)
			assert.Contains(t, string(b), `"status":"failed"`)
		})
	}
	// A small perturbation passes the 0.999 gate; warm-up 0 skips the demo.
	f := newFixture(t, false, func(c *config.Config, o *fixtureOptions, d *fixture) { d.binding.Demo = fakeDemo(t, 1e-3) })
	require.NoError(t, f.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil }))
	f = newFixture(t, false, func(c *config.Config, o *fixtureOptions, d *fixture) { c.WarmupRuns = 0; d.binding.Demo = nil })
	require.NoError(t, f.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil }))
}

func TestShutdownWaitsForWarmup(t *testing.T) {
	f := newFixture(t, false)
	f.backend.gate = make(chan struct{})
	f.backend.started = make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	startErr := make(chan error, 1)
	go func() {
		startErr <- f.core.Start(ctx, func(context.Context) (*service.Deps, error) { return f.deps, nil })
	}()
	<-f.backend.started // warm-up is on the device
	shut := make(chan error, 1)
	go func() { shut <- f.shutdown(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	assert.False(t, f.backend.closed.Load(), "backend closed under a running warm-up")
	cancel() // the signal also cancels the start
	require.Error(t, <-startErr)
	require.NoError(t, <-shut)
	assert.True(t, f.backend.closed.Load())
	require.Error(t, f.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil }))
}

func TestDeviceFailureIsPlainText500(t *testing.T) {
	f := newFixture(t, true)
	f.backend.err = errors.New("execute_trace: device hung")
	resp, b := f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 500, resp.StatusCode)
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, "device failure: execute_trace: device hung", string(b))
	assert.Equal(t, f.enc.encoded.Load(), f.enc.released.Load(), "every encoded input released, failures included")
}

func TestPluginAndEncoderErrors(t *testing.T) {
	f := newFixture(t, true)
	f.emb.preErr = service.NewFieldError("state.eef_9d", errors.New("state.eef_9d: rotation is not orthonormal"))
	resp, b := f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(b), `"field":"state.eef_9d"`)
	f.emb.preErr = errors.New("wasm: plugin[droid] trapped")
	resp, _ = f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 500, resp.StatusCode)
	f.emb.preErr = nil
	f.emb.postErr = errors.New("wasm: out of fuel")
	resp, b = f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 500, resp.StatusCode)
	assert.Contains(t, string(b), "plugin.post")
	f.emb.postErr = nil

	// No encoding carries a non-finite action to the robot (msgpack could).
	for _, accept := range []string{"application/json", "application/msgpack"} {
		f.emb.postNaN = true
		resp, b = f.do(t, "POST", "/predict", body(t, nil), map[string]string{"Accept": accept})
		require.Equal(t, 500, resp.StatusCode, accept)
		assert.Contains(t, string(b), "plugin returned a non-finite action", accept)
		f.emb.postNaN = false
		f.backend.inf = true
		resp, b = f.do(t, "POST", "/predict", body(t, nil), map[string]string{"Accept": accept})
		require.Equal(t, 500, resp.StatusCode, accept)
		assert.Contains(t, string(b), "backend returned a non-finite action_pred[0][1] (+Inf)", accept)
		f.backend.inf = false
	}
}

// TestHandlerPanic: a panic in a request's handler (a gateway or
// in-process embodiment bug) fails that request with a 500 and the
// server goes on: admission and the device are free for the next one.
func TestHandlerPanic(t *testing.T) {
	f := newFixture(t, true)
	f.emb.prePanic.Store(true)
	resp, b := f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 500, resp.StatusCode)
	assert.Contains(t, string(b), `"code":"internal"`)
	assert.Contains(t, string(b), "the gateway failed on this request")
	assert.NotContains(t, string(b), "fake: pre panicked", "the panic value stays in the log")
	assert.Zero(t, f.core.Inflight())
	// The robot front ends' entry too.
	r, err := service.DecodeJSON(body(t, nil))
	require.NoError(t, err)
	_, err = f.core.Predict(context.Background(), r, service.PredictOptions{Protocol: "zmq"})
	var he *service.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, 500, he.Status)
	f.emb.prePanic.Store(false)
	resp, _ = f.do(t, "POST", "/predict", body(t, nil), nil)
	assert.Equal(t, 200, resp.StatusCode)
}

func TestBodyTooLarge(t *testing.T) {
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { c.MaxBodyBytes = 64 << 10 })
	url := listen(t, f)
	defer f.shutdown(context.Background())
	st, b, h, err := post(url, body(t, nil))
	require.NoError(t, err)
	require.Equal(t, 413, st, string(b))
	assert.Contains(t, string(b), `"code":"too_large"`)
	rid := h.Get(service.RequestIDHeader)
	require.NotEmpty(t, rid)
	assert.Contains(t, string(b), `"request_id":"`+rid+`"`)
}

func TestTimeout504(t *testing.T) {
	f := newFixture(t, true)
	f.backend.delay = 30 * time.Second
	start := time.Now()
	resp, b := f.do(t, "POST", "/predict", body(t, nil), map[string]string{service.TimeoutHeader: "0.1"})
	require.Equal(t, 504, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"code":"timeout"`)
	assert.Less(t, time.Since(start), 15*time.Second, "did not wait for the 30 s device")
	resp, _ = f.do(t, "POST", "/predict", body(t, nil), map[string]string{"Grpc-Timeout": "50m"})
	require.Equal(t, 504, resp.StatusCode)

	// The configured request_timeout applies without a header.
	f = newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { c.RequestTimeout = 100 * time.Millisecond })
	f.backend.delay = 2 * time.Second
	resp, _ = f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 504, resp.StatusCode)
}

func TestParseTimeouts(t *testing.T) {
	for in, want := range map[string]time.Duration{"2.5": 2500 * time.Millisecond, "250ms": 250 * time.Millisecond, "0": 0, "-1": 0, "x": 0, "NaN": 0, "Inf": 0, "1e7": 0} {
		got, _ := parseTimeout(in)
		assert.Equal(t, want, got, in)
	}
	for in, want := range map[string]time.Duration{"250m": 250 * time.Millisecond, "3S": 3 * time.Second, "1H": time.Hour, "5x": 0, "m": 0, "99999999H": 0, "99999999S": 99999999 * time.Second} {
		got, _ := parseGRPCTimeout(in)
		assert.Equal(t, want, got, in)
	}
}

// listen serves f on a loopback listener and returns its base URL.
func listen(t *testing.T, f *fixture) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = f.srv.Serve(ln) }()
	return "http://" + ln.Addr().String()
}

func post(url string, b []byte) (int, []byte, http.Header, error) {
	resp, err := http.Post(url+"/predict", "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	return resp.StatusCode, rb, resp.Header, err
}

func TestQueueFull503AndSerialisedDevice(t *testing.T) {
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { c.QueueDepth = 2 })
	f.backend.gate = make(chan struct{})
	f.backend.started = make(chan struct{}, 16)
	url := listen(t, f)
	defer f.shutdown(context.Background())
	b := body(t, nil)

	// 1 running + 2 waiting fill the queue; the 4th and 5th are refused.
	type result struct {
		status int
		hdr    http.Header
	}
	results := make(chan result, 5)
	var wg sync.WaitGroup
	go func() {
		st, _, _, _ := post(url, b)
		results <- result{status: st}
	}()
	<-f.backend.started
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, h, _ := post(url, b)
			results <- result{st, h}
		}()
	}
	require.Eventually(t, func() bool { return f.core.QueueWaiting() == 2 }, 10*time.Second, 5*time.Millisecond)
	for i := 0; i < 2; i++ {
		st, rb, h, err := post(url, b)
		require.NoError(t, err)
		assert.Equal(t, 503, st, string(rb))
		assert.Equal(t, "1", h.Get("Retry-After"))
		assert.Contains(t, string(rb), `"code":"queue_full"`)
	}
	assert.Equal(t, int64(1+3), f.enc.encoded.Load(), "refused requests were not decoded/encoded (warm-up + 3)")
	close(f.backend.gate)
	wg.Wait()
	ok := 0
	for i := 0; i < 3; i++ {
		if r := <-results; r.status == 200 {
			ok++
		}
	}
	assert.Equal(t, 3, ok)
	assert.Equal(t, int64(1), f.backend.maxSeen.Load(), "device calls must never overlap")
}

func TestDrainOnShutdown(t *testing.T) {
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { c.DrainTimeout = 30 * time.Second })
	f.backend.gate = make(chan struct{}) // the device holds the first call until the drain began
	f.backend.started = make(chan struct{}, 16)
	url := listen(t, f)
	b := body(t, nil)
	const n = 4
	statuses := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			st, _, _, err := post(url, b)
			if err != nil {
				st = -1
			}
			statuses <- st
		}()
	}
	<-f.backend.started // one running, the others queued or in flight
	require.Eventually(t, func() bool { return f.core.Inflight() == n }, 10*time.Second, 5*time.Millisecond)
	shut := make(chan error, 1)
	go func() { shut <- f.shutdown(context.Background()) }()
	require.Eventually(t, func() bool { return f.core.State() == service.StateDraining }, 10*time.Second, 5*time.Millisecond)
	close(f.backend.gate)
	require.NoError(t, <-shut)
	for i := 0; i < n; i++ {
		assert.Equal(t, 200, <-statuses)
	}
	assert.True(t, f.backend.closed.Load(), "backend released after drain")
	_, b2 := f.do(t, "GET", "/health", nil, nil)
	assert.Contains(t, string(b2), `"status":"draining"`)
	resp, _ := f.do(t, "POST", "/predict", b, nil)
	assert.Equal(t, 503, resp.StatusCode)
}

func TestDrainTimeoutCancelsInFlight(t *testing.T) {
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { c.DrainTimeout = 100 * time.Millisecond })
	f.backend.delay = 10 * time.Second
	f.backend.started = make(chan struct{}, 4)
	url := listen(t, f)
	statuses := make(chan int, 1)
	go func() {
		st, _, _, _ := post(url, body(t, nil))
		statuses <- st
	}()
	<-f.backend.started
	start := time.Now()
	err := f.shutdown(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "drain_timeout")
	assert.Less(t, time.Since(start), 6*time.Second)
	assert.True(t, f.backend.closed.Load())
	st := <-statuses
	assert.True(t, st == 503 || st == 0, "cancelled request answered %d", st)
}

func TestAdminReload(t *testing.T) {
	f := newFixture(t, true)
	resp, _ := f.do(t, "POST", "/admin/reload", nil, nil)
	assert.Equal(t, 401, resp.StatusCode)
	assert.Equal(t, `Bearer realm="gr00tgw"`, resp.Header.Get("WWW-Authenticate"))
	resp, _ = f.do(t, "POST", "/admin/reload", nil, map[string]string{"Authorization": "Bearer nope"})
	assert.Equal(t, 401, resp.StatusCode)
	resp, b := f.do(t, "POST", "/admin/reload", nil, map[string]string{"Authorization": "Bearer s3cret"})
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"status":"reloaded"`)
	assert.Contains(t, string(b), `"change":"unchanged"`)
	f.catalog.scanErr = errors.New("plugins_dir: permission denied")
	resp, b = f.do(t, "POST", "/admin/reload", nil, map[string]string{"Authorization": "Bearer s3cret"})
	require.Equal(t, 500, resp.StatusCode)
	assert.Contains(t, string(b), "permission denied")
	assert.Contains(t, string(b), `"code":"reload_failed"`)

	disabled := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { c.AdminToken = "" })
	resp, _ = disabled.do(t, "POST", "/admin/reload", nil, map[string]string{"Authorization": "Bearer "})
	assert.Equal(t, 404, resp.StatusCode)
}

func TestMetricsExposed(t *testing.T) {
	mp, h, err := NewPrometheus()
	require.NoError(t, err)
	defer mp.Shutdown(context.Background())
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) {
		o.MeterProvider, o.MetricsHandler = mp, h
	})
	resp, _ := f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 200, resp.StatusCode)
	resp, _ = f.do(t, "POST", "/predict", body(t, func(m map[string]any) { m["x"] = 1 }), nil)
	require.Equal(t, 422, resp.StatusCode)
	resp, b := f.do(t, "GET", "/metrics", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	out := string(b)
	for _, want := range []string{
		`gateway_requests_total{code="",method="POST",route="/predict",status="200"} 1`,
		`gateway_requests_total{code="schema",method="POST",route="/predict",status="422"} 1`,
		`gateway_request_duration_seconds_bucket{method="POST",route="/predict",status="200"`,
		`gateway_stage_duration_seconds_count{embodiment="oxe_droid_relative_eef_relative_joint",plugin_version="0.1.0",protocol="http",stage="device"} 1`,
		`gateway_stage_duration_seconds_count{embodiment="oxe_droid_relative_eef_relative_joint",plugin_version="0.1.0",protocol="warmup",stage="device"} 1`,
		`gateway_stage_duration_seconds_count{embodiment="oxe_droid_relative_eef_relative_joint",plugin_version="0.1.0",protocol="http",stage="device.denoise"} 1`,
		`gateway_stage_duration_seconds_count{embodiment="oxe_droid_relative_eef_relative_joint",plugin_version="0.1.0",protocol="http",stage="decode"}`,
		`gateway_plugin_duration_seconds_count{embodiment="oxe_droid_relative_eef_relative_joint",outcome="ok",plugin="droid",plugin_version="0.1.0",protocol="http",stage="post"} 1`,
		`gateway_predictions_total{code="",embodiment="oxe_droid_relative_eef_relative_joint",protocol="http",route="/predict"} 1`,
		`gateway_predictions_total{code="schema",embodiment="oxe_droid_relative_eef_relative_joint",protocol="http",route="/predict"} 1`, // refused before the pipeline: counted too
		`gateway_queue_depth 0`,
		`gateway_inflight 0`,
		`gateway_state{state="ready"} 1`,
		`gateway_embodiment_state{embodiment="oxe_droid_relative_eef_relative_joint",state="served"} 1`,
		`gateway_state{state="starting"} 0`,
		`gateway_embodiments{status="served"} 1`,
		`gateway_embodiment_changes_total{change="added",embodiment="oxe_droid_relative_eef_relative_joint"} 1`,
		`gateway_warmup_pcc{embodiment="oxe_droid_relative_eef_relative_joint"} 1`,
	} {
		assert.Contains(t, out, want)
	}
}

func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { o.TracerProvider = tp })
	before := len(rec.Ended())

	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), parent), carrier)
	resp, _ := f.do(t, "POST", "/predict", body(t, nil), map[string]string{"traceparent": carrier["traceparent"]})
	require.Equal(t, 200, resp.StatusCode)

	spans := rec.Ended()[before:]
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	server, ok := byName["POST /predict"]
	require.True(t, ok, "server span missing: %v", names(spans))
	assert.Equal(t, trace.SpanKindServer, server.SpanKind())
	assert.Equal(t, parent.TraceID(), server.SpanContext().TraceID(), "traceparent honoured")
	assert.Equal(t, parent.SpanID(), server.Parent().SpanID())
	for _, n := range []string{"decode", "plugin.pre", "encode", "queue", "device", "plugin.post"} {
		s, ok := byName[n]
		require.True(t, ok, "span %s missing: %v", n, names(spans))
		assert.Equal(t, server.SpanContext().SpanID(), s.Parent().SpanID(), n)
	}
	dev := byName["device"]
	var prevEnd time.Time
	for _, n := range []string{"device.vision", "device.llm", "device.adapter", "device.denoise"} {
		s, ok := byName[n]
		require.True(t, ok, n)
		assert.Equal(t, dev.SpanContext().SpanID(), s.Parent().SpanID(), n)
		if !prevEnd.IsZero() {
			assert.Equal(t, prevEnd, s.StartTime(), "stage spans laid end to end")
		}
		prevEnd = s.EndTime()
	}
	assert.Equal(t, 4*time.Millisecond, byName["device.denoise"].EndTime().Sub(byName["device.denoise"].StartTime()))
	attrs := map[string]string{}
	for _, kv := range byName["plugin.pre"].Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	assert.Equal(t, "droid", attrs["plugin.name"])
	assert.Equal(t, "0.1.0", attrs["plugin.version"])
	assert.Equal(t, droidInfo.Name, attrs["embodiment"])
	attrs = map[string]string{}
	for _, kv := range server.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	assert.Equal(t, "469", attrs["seq_len"])
	assert.Equal(t, "client", attrs["noise.source"])
	assert.Equal(t, "/predict", attrs["http.route"])
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func TestConcurrentRequestsRace(t *testing.T) {
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { c.QueueDepth = 64 })
	f.backend.delay = time.Millisecond
	b := body(t, func(m map[string]any) { delete(m, "noise") })
	n := 16
	if testing.Short() {
		n = 4
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest("POST", "/predict", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			resp, err := f.srv.App().Test(req, -1)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- fmt.Errorf("request %d: status %d", i, resp.StatusCode)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, int64(1), f.backend.maxSeen.Load())
}

// TestRandomNoise: with ModelInfo.RandomNoise (config random_noise) a
// request without seed or noise gets a fresh seed, reported so the chunk
// can be replayed; an explicit seed still wins, and warm-up keeps the
// default seed (the fixture's warm-up passed its golden).
func TestRandomNoise(t *testing.T) {
	f := newFixture(t, false)
	f.deps.Model.RandomNoise = true
	require.NoError(t, f.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil }))
	require.True(t, f.core.WaitBound(context.Background()))
	seeds := map[uint64]bool{}
	for range 3 {
		resp, b := f.do(t, "POST", "/predict", body(t, func(m map[string]any) { delete(m, "noise") }), nil)
		require.Equal(t, 200, resp.StatusCode, string(b))
		var pr service.PredictResponse
		require.NoError(t, json.Unmarshal(b, &pr))
		assert.Equal(t, "random", pr.NoiseSource)
		require.NotNil(t, pr.Seed)
		assert.Equal(t, *pr.Seed, f.backend.lastSeed, "the reported seed is the one used")
		seeds[*pr.Seed] = true
	}
	assert.Len(t, seeds, 3, "a fresh seed per request")
	resp, b := f.do(t, "POST", "/predict", body(t, func(m map[string]any) { delete(m, "noise"); m["seed"] = 7 }), nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"noise_source":"seed"`)
	assert.Equal(t, uint64(7), f.backend.lastSeed)
}
