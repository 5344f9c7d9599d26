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

	"github.com/gr00tgw/gr00tgw/client/openpiclient"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/client/zmqclient"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
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
	post := func(mut func(m map[string]any)) map[string]any {
		return postDemo(t, g, demo, func(m map[string]any) { m["return_normalized"] = true; mut(m) })
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

// TestE2ERTCRobotProtocols: upstream's ZeroMQ client shape —
// get_action(observation, options) with the RTC keys and the previous chunk
// as a numpy array — and openpi's observation with the same options give
// the actions HTTP /predict gives for the same pixels, seed, options and
// chunk, bit for bit.
func TestE2ERTCRobotProtocols(t *testing.T) {
	bin, plugins := buildGateway(t)
	zaddr, oaddr := pickPort(t), pickPort(t)
	g := startGateway(t, bin, plugins, "--zmq-addr", zaddr, "--openpi-addr", oaddr)
	demo := getDemo(t, g)
	post := func(mut func(m map[string]any)) map[string]any {
		return postDemo(t, g, demo, func(m map[string]any) { delete(m, "noise"); mut(m) })
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

	same := func(proto string, got map[string]*wire.Array) {
		t.Helper()
		require.Len(t, got, len(want))
		for k, a := range got {
			vals, err := a.Float32s()
			require.NoError(t, err)
			rows := want[k].([]any)
			d := len(rows[0].([]any))
			for i, r := range rows {
				for j, x := range r.([]any) {
					require.Equal(t, float32(x.(float64)), vals[i*d+j], "%s[%d][%d]: %s with RTC = HTTP with RTC", k, i, j, proto)
				}
			}
		}
	}
	rtcOptions := func() *wire.Map {
		return wire.NewMap(5).Set("action_horizon", int64(40)).Set("rtc_overlap_steps", int64(12)).Set("rtc_frozen_steps", int64(4)).
			Set("rtc_ramp_rate", 6.0).Set("rtc_prev_action", wire.Float32Array([]int{40, 132}, prev))
	}
	o, err := rawobs.FromPredictJSON(demo.Request)
	require.NoError(t, err)

	zc, err := zmqclient.Dial(context.Background(), zaddr, zmqclient.Options{Timeout: 60 * time.Second})
	require.NoError(t, err)
	defer zc.Close()
	obs, err := zmqclient.FromRaw(o, service.DefaultLanguageKey)
	require.NoError(t, err)
	zopts := map[string]any{"seed": int64(11)}
	ro := rtcOptions()
	for i, k := range ro.Keys {
		zopts[k.Name] = ro.Values[i]
	}
	got, err := zc.GetAction(context.Background(), obs, zmqclient.Nested, zopts)
	require.NoError(t, err)
	same("ZeroMQ", got)

	oc, err := openpiclient.Dial(context.Background(), "ws://"+oaddr, openpiclient.Options{})
	require.NoError(t, err)
	defer oc.Close()
	m, err := openpiclient.FromRaw(o, false)
	require.NoError(t, err)
	m.Set("seed", int64(11)).Set("options", rtcOptions())
	reply, err := oc.Infer(context.Background(), m)
	require.NoError(t, err)
	res, err := openpiclient.ParseResult(reply)
	require.NoError(t, err)
	same("openpi", res.Groups)
	rv, ok := reply.Get("rtc")
	require.True(t, ok, "openpi's reply reports the RTC applied")
	src, _ := rv.(*wire.Map).Get("source")
	assert.Equal(t, "request", src)
	require.NoError(t, g.stop(t))
}

// postDemo posts g's demo request, changed by mut, to /predict as JSON and
// returns the 200 answer decoded.
func postDemo(t *testing.T, g *childGateway, demo *demoData, mut func(m map[string]any)) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(demo.Request, &m))
	mut(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Post(g.base+"/predict", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", rb)
	var out map[string]any
	require.NoError(t, json.Unmarshal(rb, &out))
	return out
}
