package httpfront

import (
	"encoding/json"
	"github.com/gr00tgw/gr00tgw/service"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// prevChunk is a previous chunk of rows×132 values, as the previous
// response's action_pred_normalized would be.
func prevChunk(rows int) []any {
	out := make([]any, rows)
	for i := range out {
		row := make([]any, testActionDim)
		for j := range row {
			row[j] = float64(float32(i*testActionDim+j)/1000 - 2)
		}
		out[i] = row
	}
	return out
}

func rtcBody(t *testing.T, mut func(opts map[string]any, m map[string]any)) []byte {
	return body(t, func(m map[string]any) {
		opts := map[string]any{"action_horizon": 40, "rtc_overlap_steps": 10, "rtc_frozen_steps": 3, "rtc_ramp_rate": 6.0}
		m["options"], m["rtc_prev_action"] = opts, prevChunk(40)
		if mut != nil {
			mut(opts, m)
		}
	})
}

// TestPredictRTCStateless: options with upstream's names and the previous
// chunk (rtc_prev_action) reach the backend as device.RTC, and the
// response reports what was applied; without them no RTC is asked.
func TestPredictRTCStateless(t *testing.T) {
	f := newFixture(t, true)
	resp, b := f.do(t, "POST", "/predict", rtcBody(t, nil), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var pr service.PredictResponse
	require.NoError(t, json.Unmarshal(b, &pr))
	require.NotNil(t, pr.RTC)
	assert.Equal(t, service.RTCReport{Horizon: 40, Overlap: 10, Frozen: 3, RampRate: 6, Source: "request"}, *pr.RTC)
	got := f.backend.lastRTC
	require.NotNil(t, got)
	assert.Equal(t, 40, got.PrevRows)
	assert.Equal(t, []int{40, 10, 3}, []int{got.Horizon, got.Overlap, got.Frozen})
	assert.Equal(t, 6.0, got.RampRate)
	require.Len(t, got.Prev, 40*testActionDim)
	assert.Equal(t, float32(5*testActionDim+7)/1000-2, got.Prev[5*testActionDim+7])

	// msgpack carries the same keys.
	var m map[string]any
	require.NoError(t, json.Unmarshal(rtcBody(t, nil), &m))
	m["options"] = map[string]any{"action_horizon": 40, "rtc_overlap_steps": int8(12), "rtc_frozen_steps": uint16(3), "rtc_ramp_rate": float32(6)}
	mp, err := msgpack.Marshal(m)
	require.NoError(t, err)
	resp, b = f.do(t, "POST", "/predict", mp, map[string]string{"Content-Type": service.MIMEMsgpack})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Equal(t, 12, f.backend.lastRTC.Overlap)

	resp, b = f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Nil(t, f.backend.lastRTC, "no options, no RTC")
	assert.NotContains(t, string(b), `"rtc"`)
}

// TestPredictRTCBadInput: every refusal names the option (upstream asserts
// or indexes out of range on several of these); nothing reaches the device.
func TestPredictRTCBadInput(t *testing.T) {
	f := newFixture(t, true)
	for _, c := range []struct {
		name   string
		mut    func(o, m map[string]any)
		status int
		field  string
	}{
		{"O > H", func(o, _ map[string]any) { o["rtc_overlap_steps"] = 41 }, 400, "options.rtc_overlap_steps"},
		{"F > O", func(o, _ map[string]any) { o["rtc_frozen_steps"] = 11 }, 400, "options.rtc_frozen_steps"},
		{"F < 0", func(o, _ map[string]any) { o["rtc_frozen_steps"] = -1 }, 400, "options.rtc_frozen_steps"},
		{"H > rows", func(o, m map[string]any) { m["rtc_prev_action"] = prevChunk(20); o["action_horizon"] = 21 }, 400, "options.action_horizon"},
		{"H = 0", func(o, _ map[string]any) { o["action_horizon"] = 0 }, 400, "options.action_horizon"},
		{"O not integer", func(o, _ map[string]any) { o["rtc_overlap_steps"] = 2.5 }, 422, "options.rtc_overlap_steps"},
		{"O a string", func(o, _ map[string]any) { o["rtc_overlap_steps"] = "10" }, 422, "options.rtc_overlap_steps"},
		{"r = 0", func(o, _ map[string]any) { o["rtc_ramp_rate"] = 0 }, 400, "options.rtc_ramp_rate"},
		{"r < 0", func(o, _ map[string]any) { o["rtc_ramp_rate"] = -1 }, 400, "options.rtc_ramp_rate"},
		{"r huge", func(o, _ map[string]any) { o["rtc_ramp_rate"] = json.Number("1e400") }, 400, "options.rtc_ramp_rate"},
		{"unknown option", func(o, _ map[string]any) { o["rtc_guidance"] = 1 }, 422, "options.rtc_guidance"},
		{"options not object", func(_, m map[string]any) { m["options"] = []any{1} }, 422, "options"},
		{"missing option", func(o, _ map[string]any) { delete(o, "rtc_ramp_rate") }, 400, "options.rtc_ramp_rate"},
		{"prev without options", func(_, m map[string]any) { delete(m, "options") }, 400, "options"},
		{"options without prev", func(_, m map[string]any) { delete(m, "rtc_prev_action") }, 400, "rtc_prev_action"},
		{"prev wrong width", func(_, m map[string]any) {
			p := prevChunk(40)
			for i := range p {
				p[i] = p[i].([]any)[:100]
			}
			m["rtc_prev_action"] = p
		}, 400, "rtc_prev_action"},
		{"prev too many rows", func(_, m map[string]any) { m["rtc_prev_action"] = prevChunk(41) }, 400, "rtc_prev_action"},
		{"prev non-finite", func(_, m map[string]any) {
			p := prevChunk(40)
			p[2].([]any)[5] = json.Number("1e39")
			m["rtc_prev_action"] = p
		}, 400, "rtc_prev_action"},
		{"prev flat", func(_, m map[string]any) { m["rtc_prev_action"] = []any{1.0, 2.0} }, 400, "rtc_prev_action"},
		{"prev ragged", func(_, m map[string]any) {
			p := prevChunk(40)
			p[7] = p[7].([]any)[:5]
			m["rtc_prev_action"] = p
		}, 400, "rtc_prev_action"},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := f.backend.calls.Load()
			resp, b := f.do(t, "POST", "/predict", rtcBody(t, c.mut), nil)
			require.Equal(t, c.status, resp.StatusCode, string(b))
			var e errorBody
			require.NoError(t, json.Unmarshal(b, &e))
			assert.Equal(t, c.field, e.Field, e.Error)
			assert.Equal(t, calls, f.backend.calls.Load(), "nothing reached the device")
		})
	}
}
