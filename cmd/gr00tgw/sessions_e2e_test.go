package main

import (
	"context"
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

// TestE2ESessionRTC: sessions on the real binary and backend (the Go
// runner, the tiny checkpoint). Over HTTP: two predicts in one session
// with RTC and return_normalized → the second's frozen rows are the
// first's rows H−O..H−O+F−1 exactly; another session is unaffected; reset
// clears; sessions.max evicts. Over ZeroMQ (options.session_id) and openpi
// (the connection's session): the second predict of a session gives, bit
// for bit, what HTTP gives with the first's chunk sent as rtc_prev_action,
// and ZeroMQ's reset clears the session.
func TestE2ESessionRTC(t *testing.T) {
	bin, plugins := buildGateway(t)
	zaddr, oaddr := pickPort(t), pickPort(t)
	g := startGateway(t, bin, plugins, "--zmq-addr", zaddr, "--openpi-addr", oaddr, "--sessions-max", "3")
	demo := getDemo(t, g)
	const H, O, F = 40, 12, 4
	opts := map[string]any{"rtc_overlap_steps": O, "rtc_frozen_steps": F, "rtc_ramp_rate": 6.0}
	post := func(session string, seed int, rtc bool) map[string]any {
		return postDemo(t, g, demo, func(m map[string]any) {
			delete(m, "noise")
			m["seed"], m["return_normalized"] = seed, true
			if session != "" {
				m["session"] = session
			}
			if rtc {
				m["options"] = opts
			}
		})
	}

	// HTTP.
	first := post("h1", 7, false)["action_pred_normalized"].([]any)
	second := post("h1", 11, true)
	got := second["action_pred_normalized"].([]any)
	for r := 0; r < F; r++ {
		assert.Equal(t, first[H-O+r], got[r], "frozen row %d is the session's previous row %d exactly", r, H-O+r)
	}
	assert.NotEqual(t, first[H-O+F], got[F], "the first ramp row moved")
	rep := second["rtc"].(map[string]any)
	assert.Equal(t, "session", rep["source"])
	assert.Equal(t, []any{float64(O), float64(F)}, []any{rep["overlap"], rep["frozen"]})
	assert.Contains(t, rep, "latency_ms_estimate")
	assert.Equal(t, "h1", second["session"])
	plain := post("", 11, false)["action_pred_normalized"].([]any)
	assert.Equal(t, "no_chunk", post("h2", 11, true)["rtc"].(map[string]any)["skipped"], "another session is unaffected")

	req, err := http.NewRequest(http.MethodDelete, g.base+"/v1/sessions/h1", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	afterReset := post("h1", 11, true)
	assert.Equal(t, "no_chunk", afterReset["rtc"].(map[string]any)["skipped"])
	assert.Equal(t, plain, afterReset["action_pred_normalized"], "no chunk: the plain chunk")

	// The reference for the robot protocols: HTTP with the chunk sent.
	want := postDemo(t, g, demo, func(m map[string]any) {
		delete(m, "noise")
		m["seed"] = 11
		m["options"] = map[string]any{"action_horizon": H, "rtc_overlap_steps": O, "rtc_frozen_steps": F, "rtc_ramp_rate": 6.0}
		m["rtc_prev_action"] = first
	})["actions"].(map[string]any)
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
					require.Equal(t, float32(x.(float64)), vals[i*d+j], "%s[%d][%d]: %s session = HTTP with the chunk", k, i, j, proto)
				}
			}
		}
	}
	o, err := rawobs.FromPredictJSON(demo.Request)
	require.NoError(t, err)
	ctx := context.Background()

	// ZeroMQ: options.session_id, upstream's option names.
	zc, err := zmqclient.Dial(ctx, zaddr, zmqclient.Options{Timeout: 60 * time.Second})
	require.NoError(t, err)
	defer zc.Close()
	obs, err := zmqclient.FromRaw(o, service.DefaultLanguageKey)
	require.NoError(t, err)
	zopts := func(seed int64, rtc bool) *wire.Map {
		m := wire.NewMap(6).Set("seed", seed).Set("session_id", "z1")
		if rtc {
			m.Set("rtc_overlap_steps", int64(O)).Set("rtc_frozen_steps", int64(F)).Set("rtc_ramp_rate", 6.0)
		}
		return m
	}
	getAction := func(m *wire.Map) (map[string]*wire.Array, *wire.Map) {
		t.Helper()
		v, err := zc.Call(ctx, "get_action", wire.NewMap(2).Set("observation", obs.Value(zmqclient.Nested)).Set("options", m))
		require.NoError(t, err)
		pair := v.([]any)
		acts := map[string]*wire.Array{}
		am := pair[0].(*wire.Map)
		for i, k := range am.Keys {
			acts[k.Name] = am.Values[i].(*wire.Array)
		}
		return acts, pair[1].(*wire.Map)
	}
	getAction(zopts(7, false))
	acts, info := getAction(zopts(11, true))
	same("ZeroMQ", acts)
	sid, _ := info.Get("session_id")
	assert.Equal(t, "z1", sid)
	rv, _ := info.Get("rtc")
	src, _ := rv.(*wire.Map).Get("source")
	assert.Equal(t, "session", src)
	_, err = zc.Call(ctx, "reset", wire.NewMap(1).Set("options", wire.NewMap(1).Set("session_id", "z1")))
	require.NoError(t, err)
	_, info = getAction(zopts(11, true))
	rv, _ = info.Get("rtc")
	skipped, _ := rv.(*wire.Map).Get("skipped")
	assert.Equal(t, "no_chunk", skipped, "reset cleared the session")

	// openpi: the connection is the session.
	oc, err := openpiclient.Dial(ctx, "ws://"+oaddr, openpiclient.Options{})
	require.NoError(t, err)
	defer oc.Close()
	infer := func(seed int64, rtc bool) *wire.Map {
		t.Helper()
		m, err := openpiclient.FromRaw(o, false)
		require.NoError(t, err)
		m.Set("seed", seed)
		if rtc {
			m.Set("options", wire.NewMap(3).Set("rtc_overlap_steps", int64(O)).Set("rtc_frozen_steps", int64(F)).Set("rtc_ramp_rate", 6.0))
		}
		reply, err := oc.Infer(ctx, m)
		require.NoError(t, err)
		return reply
	}
	infer(7, false)
	reply := infer(11, true)
	res, err := openpiclient.ParseResult(reply)
	require.NoError(t, err)
	same("openpi", res.Groups)
	rv, _ = reply.Get("rtc")
	src, _ = rv.(*wire.Map).Get("source")
	assert.Equal(t, "session", src)

	// sessions.max = 3: z1, the openpi connection's, h1, h2 are more than
	// three; the least recently used went.
	for _, id := range []string{"e1", "e2", "e3"} {
		post(id, 7, false)
	}
	assert.Equal(t, "no_chunk", post("h1", 11, true)["rtc"].(map[string]any)["skipped"], "h1 was evicted")
	require.NoError(t, g.stop(t))
}

// TestE2ESessionReencode: rtc.mode reencode on the real binary and the
// shipped DROID plugin: the session's chunk goes through the plugin's
// gw_reencode (shift = rows executed since it was produced), RTC runs with
// action_horizon H − shift, and the response says so.
func TestE2ESessionReencode(t *testing.T) {
	bin, plugins := buildGateway(t)
	g := startGateway(t, bin, plugins, "--rtc-mode", "reencode")
	demo := getDemo(t, g)
	post := func(seed int, opts map[string]any) map[string]any {
		return postDemo(t, g, demo, func(m map[string]any) {
			delete(m, "noise")
			m["seed"], m["return_normalized"], m["session"] = seed, true, "re-1"
			if opts != nil {
				m["options"] = opts
			}
		})
	}
	first := post(7, nil)["action_pred_normalized"].([]any)
	second := post(11, map[string]any{"rtc_overlap_steps": 12, "rtc_frozen_steps": 4})
	rep := second["rtc"].(map[string]any)
	assert.Equal(t, "reencode", rep["mode"], "%v", rep)
	shift := 0
	if v, ok := rep["shift"].(float64); ok {
		shift = int(v)
	}
	assert.Equal(t, float64(40-shift), rep["action_horizon"])
	assert.Equal(t, "session", rep["source"])
	got := second["action_pred_normalized"].([]any)
	require.Len(t, got, 40)
	assert.NotEqual(t, first[40-12], got[0], "the frozen rows are the re-encoded ones, not upstream's copies of relative rows")
	require.NoError(t, g.stop(t))
}
