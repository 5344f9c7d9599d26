package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/gateway"
	"github.com/gr00tgw/gr00tgw/gateway/rawobs"
	"github.com/gr00tgw/gr00tgw/gateway/wire"
	"github.com/gr00tgw/gr00tgw/gateway/zmq/zmqclient"
)

// TestE2ERTCStateless: real-time chunking over HTTP on the real binary and
// backend (the Go runner): a first predict with return_normalized, a second
// with options (upstream's names) and the first's action_pred_normalized as
// rtc_prev_action: the second chunk's frozen rows are the first's rows
// H−O..H−O+F−1 exactly, its ramp rows moved, and the response reports it.
func TestE2ERTCStateless(t *testing.T) {
	bin, plugins := buildGateway(t)
	g := startGateway(t, bin, plugins)
	demo := getDemo(t, g)
	client := &http.Client{Timeout: 60 * time.Second}
	post := func(mut func(m map[string]any)) map[string]any {
		t.Helper()
		var m map[string]any
		require.NoError(t, json.Unmarshal(demo.Request, &m))
		m["return_normalized"] = true
		mut(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		resp, err := client.Post(g.base+"/predict", "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		defer resp.Body.Close()
		rb, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", rb)
		var out map[string]any
		require.NoError(t, json.Unmarshal(rb, &out))
		return out
	}
	first := post(func(map[string]any) {})
	prev := first["action_pred_normalized"].([]any)
	require.Len(t, prev, 40)
	const H, O, F = 40, 12, 4
	second := post(func(m map[string]any) {
		m["options"] = map[string]any{"action_horizon": H, "rtc_overlap_steps": O, "rtc_frozen_steps": F, "rtc_ramp_rate": 6.0}
		m["rtc_prev_action"] = prev
		delete(m, "noise")
		m["seed"] = 7 // other noise than the first's
	})
	got := second["action_pred_normalized"].([]any)
	for r := 0; r < F; r++ {
		assert.Equal(t, prev[H-O+r], got[r], "frozen row %d is the previous chunk's row %d exactly", r, H-O+r)
	}
	assert.NotEqual(t, prev[H-O+F], got[F], "the first ramp row moved")
	assert.Equal(t, map[string]any{"action_horizon": float64(H), "overlap": float64(O), "frozen": float64(F), "ramp_rate": 6.0, "source": "request"}, second["rtc"])
	require.NoError(t, g.stop(t))
}

// TestE2ERTCZeroMQ: upstream's ZeroMQ client shape — get_action(observation,
// options) with the RTC keys and the previous chunk as a numpy array —
// gives the actions HTTP /predict gives for the same pixels, seed, options
// and chunk, bit for bit, and the reply's info says what was applied.
func TestE2ERTCZeroMQ(t *testing.T) {
	bin, plugins := buildGateway(t)
	zaddr := pickPort(t)
	g := startGateway(t, bin, plugins, "--zmq-addr", zaddr)
	demo := getDemo(t, g)
	client := &http.Client{Timeout: 60 * time.Second}
	post := func(mut func(m map[string]any)) map[string]any {
		t.Helper()
		var m map[string]any
		require.NoError(t, json.Unmarshal(demo.Request, &m))
		delete(m, "noise")
		mut(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		resp, err := client.Post(g.base+"/predict", "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		defer resp.Body.Close()
		rb, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", rb)
		var out map[string]any
		require.NoError(t, json.Unmarshal(rb, &out))
		return out
	}
	prevRows := post(func(m map[string]any) { m["seed"] = 7; m["return_normalized"] = true })["action_pred_normalized"].([]any)
	prev := make([]float32, 0, 40*132)
	for _, r := range prevRows {
		for _, x := range r.([]any) {
			prev = append(prev, float32(x.(float64)))
		}
	}
	opts := map[string]any{"action_horizon": 40, "rtc_overlap_steps": 12, "rtc_frozen_steps": 4, "rtc_ramp_rate": 6.0}
	want := post(func(m map[string]any) { m["seed"] = 11; m["options"] = opts; m["rtc_prev_action"] = prevRows })["actions"].(map[string]any)

	o, err := rawobs.FromPredictJSON(demo.Request)
	require.NoError(t, err)
	zc, err := zmqclient.Dial(context.Background(), zaddr, zmqclient.Options{Timeout: 60 * time.Second})
	require.NoError(t, err)
	defer zc.Close()
	obs, err := zmqclient.FromRaw(o, gateway.DefaultLanguageKey)
	require.NoError(t, err)
	got, err := zc.GetAction(context.Background(), obs, zmqclient.Nested, map[string]any{"seed": int64(11),
		"action_horizon": int64(40), "rtc_overlap_steps": int64(12), "rtc_frozen_steps": int64(4), "rtc_ramp_rate": 6.0,
		"rtc_prev_action": wire.Float32Array([]int{40, 132}, prev)})
	require.NoError(t, err)
	for k, a := range got {
		vals, err := a.Float32s()
		require.NoError(t, err)
		rows := want[k].([]any)
		d := len(rows[0].([]any))
		for i, r := range rows {
			for j, x := range r.([]any) {
				require.Equal(t, float32(x.(float64)), vals[i*d+j], "%s[%d][%d]: ZeroMQ with RTC = HTTP with RTC", k, i, j)
			}
		}
	}
	require.NoError(t, g.stop(t))
}
