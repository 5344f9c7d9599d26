package httpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/service"
)

// withSessions sets the embodiment's control rate and sessions.max.
func withSessions(hz float64, maxSessions int) fixtureOpt {
	return func(c *config.Config, _ *fixtureOptions, f *fixture) {
		f.emb.info.ControlHz = hz
		c.Sessions.Max = maxSessions
	}
}

// sessBody is a demo request in session id (return_normalized), with the
// RTC options opts (none when nil).
func sessBody(t *testing.T, id string, opts map[string]any) []byte {
	return body(t, func(m map[string]any) {
		if id != "" {
			m["session"] = id
		}
		m["return_normalized"] = true
		if opts != nil {
			m["options"] = opts
		}
	})
}

func flat(rows [][]float64) []float32 {
	out := make([]float32, 0, len(rows)*testActionDim)
	for _, r := range rows {
		for _, x := range r {
			out = append(out, float32(x))
		}
	}
	return out
}

// TestPredictSessionRTC: a session's last normalised chunk (all rows)
// becomes the next predict's previous chunk (source "session"); another
// session is unaffected; reset clears; the first predict of a session and
// a reset one report no_chunk; sessions.max evicts the least recently used.
func TestPredictSessionRTC(t *testing.T) {
	f := newFixture(t, true, withSessions(15, 2))
	post := func(b []byte, hdr map[string]string) service.PredictResponse {
		t.Helper()
		resp, rb := f.do(t, "POST", "/predict", b, hdr)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(rb))
		return predictResp(t, rb)
	}
	opts := map[string]any{"rtc_overlap_steps": 12, "rtc_frozen_steps": 4}

	first := post(sessBody(t, "robot-a", nil), nil)
	assert.Equal(t, "robot-a", first.Session)
	assert.Nil(t, first.RTC, "no options, no RTC")
	require.Nil(t, f.backend.lastRTC)

	second := post(sessBody(t, "robot-a", opts), nil)
	require.NotNil(t, second.RTC)
	assert.Equal(t, "session", second.RTC.Source)
	assert.Equal(t, []int{40, 12, 4}, []int{second.RTC.Horizon, second.RTC.Overlap, second.RTC.Frozen})
	assert.Equal(t, service.DefaultRampRate, second.RTC.RampRate)
	require.NotNil(t, second.RTC.LatencyMSEstimate)
	assert.Positive(t, *second.RTC.LatencyMSEstimate)
	got := f.backend.lastRTC
	require.NotNil(t, got, "the session's chunk reached the device")
	assert.Equal(t, 40, got.PrevRows)
	assert.Equal(t, flat(first.ActionPredNormalized), got.Prev, "the previous chunk is the first predict's whole action_pred")

	// Another session is unaffected: it has no chunk yet.
	other := post(sessBody(t, "robot-b", opts), nil)
	require.NotNil(t, other.RTC)
	assert.Equal(t, service.RTCSkipNoChunk, other.RTC.Skipped)
	assert.Equal(t, []int{0, 0}, []int{other.RTC.Overlap, other.RTC.Frozen})
	assert.Nil(t, f.backend.lastRTC, "no chunk, no RTC at the device")

	// The header names the session too; the third predict of robot-a uses the second's chunk.
	third := post(body(t, func(m map[string]any) { m["options"] = opts; m["return_normalized"] = true }), map[string]string{SessionHeader: "robot-a"})
	assert.Equal(t, "robot-a", third.Session)
	assert.Equal(t, flat(second.ActionPredNormalized), f.backend.lastRTC.Prev)

	// Reset: 204, then 404; the next predict has no chunk.
	resp, b := f.do(t, "DELETE", "/v1/sessions/robot-a", nil, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(b))
	resp, b = f.do(t, "DELETE", "/v1/sessions/robot-a", nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(b))
	resp, b = f.do(t, "DELETE", "/v1/sessions/bad%20id", nil, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(b))
	after := post(sessBody(t, "robot-a", opts), nil)
	assert.Equal(t, service.RTCSkipNoChunk, after.RTC.Skipped)

	// sessions.max = 2: robot-a and robot-b are held; robot-c evicts the
	// least recently used (robot-b).
	post(sessBody(t, "robot-c", nil), nil)
	st := f.core.SessionStats()
	assert.Equal(t, 2, st.Sessions)
	assert.Equal(t, uint64(1), st.Evictions[1], "one capacity eviction")
	evicted := post(sessBody(t, "robot-b", opts), nil)
	assert.Equal(t, service.RTCSkipNoChunk, evicted.RTC.Skipped, "robot-b was evicted")
}

// TestPredictSessionAuto: "auto" rows come from the session's measurements
// and the embodiment's control rate; a request's own chunk (source
// "request") takes auto rows from its session too.
func TestPredictSessionAuto(t *testing.T) {
	f := newFixture(t, true, withSessions(15, 16))
	post := func(b []byte) service.PredictResponse {
		t.Helper()
		resp, rb := f.do(t, "POST", "/predict", b, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(rb))
		return predictResp(t, rb)
	}
	first := post(sessBody(t, "s1", nil))
	// Absent steps default to "auto" with a session.
	rep := post(sessBody(t, "s1", map[string]any{"rtc_ramp_rate": 3.0})).RTC
	require.NotNil(t, rep)
	assert.Equal(t, "", rep.Skipped)
	assert.GreaterOrEqual(t, rep.Overlap, 38, "a few ms elapsed at 15 Hz: at most a row executed")
	assert.LessOrEqual(t, rep.Overlap, 40)
	assert.GreaterOrEqual(t, rep.Frozen, 1, "a measured latency > 0 freezes at least one row")
	assert.LessOrEqual(t, rep.Frozen, rep.Overlap)
	assert.Equal(t, 3.0, rep.RampRate)

	// rtc_prev_action with a session: source request, frozen "auto".
	prev := make([]any, 40)
	for i, r := range first.ActionPredNormalized {
		row := make([]any, len(r))
		for j, x := range r {
			row[j] = x
		}
		prev[i] = row
	}
	b := body(t, func(m map[string]any) {
		m["session"] = "s1"
		m["rtc_prev_action"] = prev
		m["options"] = map[string]any{"action_horizon": 40, "rtc_overlap_steps": 10, "rtc_frozen_steps": "auto", "rtc_ramp_rate": 6}
	})
	rep = post(b).RTC
	assert.Equal(t, "request", rep.Source)
	assert.Equal(t, 10, rep.Overlap)
	assert.GreaterOrEqual(t, rep.Frozen, 1)
	assert.Equal(t, flat(first.ActionPredNormalized), f.backend.lastRTC.Prev)
}

// TestPredictSessionDrop: a session whose plugin version changed since its
// last chunk drops it (reported, no RTC at the device), then continues
// with the new version's chunk.
func TestPredictSessionDrop(t *testing.T) {
	f := newFixture(t, true, withSessions(15, 16))
	post := func(b []byte) service.PredictResponse {
		t.Helper()
		resp, rb := f.do(t, "POST", "/predict", b, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(rb))
		return predictResp(t, rb)
	}
	opts := map[string]any{"rtc_overlap_steps": 12, "rtc_frozen_steps": 4}
	post(sessBody(t, "s1", nil))
	info := droidInfo
	info.PluginVersion, info.ControlHz = "0.2.0", 15
	nb := droidBinding(t, &fakeEmbodiment{info: info}, f.enc)
	nb.SHA256 = "sha-droid-2"
	f.catalog.put(info.Name, nb)
	_, err := f.core.Reload(context.Background())
	require.NoError(t, err)
	rep := post(sessBody(t, "s1", opts)).RTC
	require.NotNil(t, rep)
	assert.Equal(t, "plugin_version_changed", rep.Dropped)
	assert.Equal(t, "plugin_version_changed", rep.Skipped)
	assert.Nil(t, f.backend.lastRTC, "versions never mix")
	rep = post(sessBody(t, "s1", opts)).RTC
	assert.Equal(t, "", rep.Skipped, "the new version's chunk is used")
	assert.NotNil(t, f.backend.lastRTC)
}

// TestPredictSessionBadInput: session ids and session RTC options are
// refused naming the field; nothing reaches the device and the session
// keeps its chunk.
func TestPredictSessionBadInput(t *testing.T) {
	f := newFixture(t, true, withSessions(15, 16))
	resp, b := f.do(t, "POST", "/predict", sessBody(t, "keep", nil), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	kept := flat(predictResp(t, b).ActionPredNormalized)
	for _, c := range []struct {
		name   string
		mut    func(m map[string]any)
		hdr    map[string]string
		status int
		field  string
	}{
		{"id too long", func(m map[string]any) { m["session"] = strings.Repeat("a", 129) }, nil, 400, "session"},
		{"id empty", func(m map[string]any) { m["session"] = "" }, nil, 400, "session"},
		{"id bad byte", func(m map[string]any) { m["session"] = "a/b" }, nil, 400, "session"},
		{"id not a string", func(m map[string]any) { m["session"] = 7 }, nil, 422, "session"},
		{"header bad", nil, map[string]string{SessionHeader: "a b"}, 400, "session"},
		{"header and body disagree", func(m map[string]any) { m["session"] = "keep" }, map[string]string{SessionHeader: "other"}, 400, "session"},
		{"F > O", func(m map[string]any) {
			m["session"] = "keep"
			m["options"] = map[string]any{"rtc_overlap_steps": 4, "rtc_frozen_steps": 5}
		}, nil, 400, "options.rtc_frozen_steps"},
		{"O > H", func(m map[string]any) {
			m["session"] = "keep"
			m["options"] = map[string]any{"action_horizon": 10, "rtc_overlap_steps": 11}
		}, nil, 400, "options.rtc_overlap_steps"},
		{"H > embodiment", func(m map[string]any) {
			m["session"] = "keep"
			m["options"] = map[string]any{"action_horizon": 41}
		}, nil, 400, "options.action_horizon"},
		{"r = 0", func(m map[string]any) { m["session"] = "keep"; m["options"] = map[string]any{"rtc_ramp_rate": 0} }, nil, 400, "options.rtc_ramp_rate"},
		{"auto horizon", func(m map[string]any) { m["session"] = "keep"; m["options"] = map[string]any{"action_horizon": "auto"} }, nil, 422, "options.action_horizon"},
		{"other string", func(m map[string]any) {
			m["session"] = "keep"
			m["options"] = map[string]any{"rtc_frozen_steps": "soon"}
		}, nil, 422, "options.rtc_frozen_steps"},
		{"auto without a session", func(m map[string]any) {
			m["options"] = map[string]any{"action_horizon": 40, "rtc_overlap_steps": "auto", "rtc_frozen_steps": 1, "rtc_ramp_rate": 6}
			m["rtc_prev_action"] = prevChunk(40)
		}, nil, 400, "options.rtc_overlap_steps"},
		{"options without prev or session", func(m map[string]any) { m["options"] = map[string]any{"rtc_frozen_steps": "auto"} }, nil, 400, "rtc_prev_action"},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := f.backend.calls.Load()
			resp, b := f.do(t, "POST", "/predict", body(t, c.mut), c.hdr)
			require.Equal(t, c.status, resp.StatusCode, string(b))
			var e errorBody
			require.NoError(t, json.Unmarshal(b, &e))
			assert.Equal(t, c.field, e.Field, e.Error)
			assert.Equal(t, calls, f.backend.calls.Load(), "nothing reached the device")
		})
	}
	// The session kept its chunk through every refusal.
	resp, b = f.do(t, "POST", "/predict", sessBody(t, "keep", map[string]any{"rtc_overlap_steps": 2, "rtc_frozen_steps": 1}), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Equal(t, kept, f.backend.lastRTC.Prev)

	// Without control_hz, "auto" (or an absent step with a session) is refused naming it.
	g := newFixture(t, true, withSessions(0, 16))
	for _, o := range []map[string]any{{"rtc_overlap_steps": "auto", "rtc_frozen_steps": 1}, {"rtc_overlap_steps": 3}} {
		resp, b := g.do(t, "POST", "/predict", sessBody(t, "x", o), nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(b))
		var e errorBody
		require.NoError(t, json.Unmarshal(b, &e))
		assert.Contains(t, e.Field, "options.rtc_", e.Error)
		assert.Contains(t, e.Error, "control_hz")
	}
}

// reencodeEmb is the fake embodiment with a gw_reencode: row i of its
// output is the previous chunk's row Shift+i plus 1000 (so a test sees
// which rows it took), over the embodiment's whole horizon.
type reencodeEmb struct {
	*fakeEmbodiment
	mu     sync.Mutex
	inputs []service.ReencodeInput
}

func (e *reencodeEmb) CanReencode() bool { return true }

func (e *reencodeEmb) Reencode(_ context.Context, in *service.ReencodeInput) ([]float32, int, error) {
	e.mu.Lock()
	e.inputs = append(e.inputs, *in)
	e.mu.Unlock()
	h := e.info.ActionHorizon
	rows := h - in.Shift
	out := make([]float32, rows*in.Dim)
	for i := range out {
		out[i] = in.ActionPred[in.Shift*in.Dim+i] + 1000
	}
	return out, rows, nil
}

// TestPredictSessionReencode: with rtc.mode reencode the plugin re-expresses
// the session's chunk from the stored state against the current one,
// shifted by the rows executed since (elapsed × control_hz), and RTC runs
// on its rows with action_horizon H − shift.
func TestPredictSessionReencode(t *testing.T) {
	var re *reencodeEmb
	f := newFixture(t, true, withSessions(1000, 16), func(c *config.Config, _ *fixtureOptions, f *fixture) {
		c.RTC.Mode = config.RTCModeReencode
		re = &reencodeEmb{fakeEmbodiment: f.emb}
		f.binding.Embodiment = re
	})
	post := func(b []byte) service.PredictResponse {
		t.Helper()
		resp, rb := f.do(t, "POST", "/predict", b, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(rb))
		return predictResp(t, rb)
	}
	first := post(body(t, func(m map[string]any) {
		m["session"], m["return_normalized"] = "r1", true
		m["state"].(map[string]any)["joint_position"] = []any{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}
	}))
	time.Sleep(15 * time.Millisecond) // ≥ 15 rows at 1000 Hz
	rep := post(sessBody(t, "r1", map[string]any{"rtc_overlap_steps": 40, "rtc_frozen_steps": 2})).RTC
	require.NotNil(t, rep)
	assert.Equal(t, "reencode", rep.Mode)
	e := rep.Shift
	assert.GreaterOrEqual(t, e, 15)
	assert.LessOrEqual(t, e, 39)
	assert.Equal(t, []int{40 - e, 40 - e, min(2, 40-e)}, []int{rep.Horizon, rep.Overlap, rep.Frozen}, "horizon H − e, the overlap (and frozen) clamped to it")
	got := f.backend.lastRTC
	require.NotNil(t, got)
	assert.Equal(t, 40-e, got.PrevRows)
	assert.Equal(t, 40-e, got.Horizon)
	prev := flat(first.ActionPredNormalized)
	assert.Equal(t, prev[e*testActionDim]+1000, got.Prev[0], "row 0 is the re-encoded row e")
	require.Len(t, re.inputs, 1)
	in := re.inputs[0]
	assert.Equal(t, e, in.Shift)
	want := []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}
	for i, x := range want {
		want[i] = float64(float32(x)) // rounded to state_dtype float32, as pre saw it
	}
	assert.Equal(t, want, in.PrevState["joint_position"], "the state that produced the chunk")
	assert.NotEqual(t, in.PrevState["joint_position"], in.State["joint_position"], "against the current state")

	// Upstream mode (the default) never calls the plugin.
	g := newFixture(t, true, withSessions(1000, 16), func(_ *config.Config, _ *fixtureOptions, f *fixture) {
		re = &reencodeEmb{fakeEmbodiment: f.emb}
		f.binding.Embodiment = re
	})
	for range 2 {
		resp, rb := g.do(t, "POST", "/predict", sessBody(t, "u1", map[string]any{"rtc_overlap_steps": 12, "rtc_frozen_steps": 2}), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(rb))
		assert.Equal(t, "", predictResp(t, rb).RTC.Mode)
	}
	assert.Empty(t, re.inputs)
}

// TestSessionMetrics: the session and RTC instruments as Prometheus
// exposes them; no metric carries a session id.
func TestSessionMetrics(t *testing.T) {
	mp, h, err := NewPrometheus()
	require.NoError(t, err)
	defer mp.Shutdown(context.Background())
	f := newFixture(t, true, withSessions(15, 1), func(c *config.Config, o *fixtureOptions, d *fixture) {
		o.MeterProvider, o.MetricsHandler = mp, h
	})
	for _, b := range [][]byte{
		sessBody(t, "m-1", nil),
		sessBody(t, "m-1", map[string]any{"rtc_overlap_steps": 12, "rtc_frozen_steps": "auto"}),
		sessBody(t, "m-2", nil), // evicts m-1 (sessions.max 1)
	} {
		resp, rb := f.do(t, "POST", "/predict", b, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(rb))
	}
	resp, _ := f.do(t, "DELETE", "/v1/sessions/m-2", nil, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, b := f.do(t, "GET", "/metrics", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	out := string(b)
	for _, want := range []string{
		`gateway_sessions_active 0`,
		`gateway_sessions_evictions_total{reason="capacity"} 1`,
		`gateway_sessions_resets_total 1`,
		`gateway_rtc_predictions_total{mode="upstream",source="session"} 1`,
		`gateway_rtc_rows_bucket{auto="false",kind="overlap",le="12"} 1`,
		`gateway_rtc_rows_count{auto="true",kind="frozen"} 1`,
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "m-1", "session ids are never labels")
}

// TestPredictSessionEmbodiment: a session that moves to another
// embodiment drops its chunk (reported embodiment_changed); a client's
// rtc_prev_action with a session of another embodiment is refused naming
// rtc_prev_action, the session unchanged.
func TestPredictSessionEmbodiment(t *testing.T) {
	f := newFixture(t, true, withSessions(15, 16), withSecond(t, "1.0.0"))
	post := func(b []byte, hdr map[string]string) (int, []byte) {
		t.Helper()
		resp, rb := f.do(t, "POST", "/predict", b, hdr)
		return resp.StatusCode, rb
	}
	second := map[string]string{service.EmbodimentHeader: secondTag}
	code, b := post(untaggedWith(t, func(m map[string]any) { m["session"] = "s" }), nil)
	require.Equal(t, http.StatusOK, code, string(b))

	calls := f.backend.calls.Load()
	code, b = post(untaggedWith(t, func(m map[string]any) {
		m["session"] = "s"
		m["rtc_prev_action"] = prevChunk(40)
		m["options"] = map[string]any{"action_horizon": 40, "rtc_overlap_steps": 10, "rtc_frozen_steps": 3, "rtc_ramp_rate": 6}
	}), second)
	require.Equal(t, http.StatusBadRequest, code, string(b))
	var e errorBody
	require.NoError(t, json.Unmarshal(b, &e))
	assert.Equal(t, "rtc_prev_action", e.Field, e.Error)
	assert.Equal(t, calls, f.backend.calls.Load(), "nothing reached the device")

	code, b = post(untaggedWith(t, func(m map[string]any) {
		m["session"] = "s"
		m["options"] = map[string]any{"rtc_overlap_steps": 10, "rtc_frozen_steps": 3}
	}), second)
	require.Equal(t, http.StatusOK, code, string(b))
	rep := predictResp(t, b).RTC
	require.NotNil(t, rep)
	assert.Equal(t, "embodiment_changed", rep.Dropped)
	assert.Nil(t, f.backend.lastRTC, "embodiments never mix")
}

// untaggedWith is the untagged demo body changed by fn.
func untaggedWith(tb testing.TB, fn func(m map[string]any)) []byte {
	var m map[string]any
	require.NoError(tb, json.Unmarshal(untagged(tb), &m))
	fn(m)
	return mustJSON(tb, m)
}

// TestPredictSessionsConcurrent: 8 clients × 4 sessions each, predicting
// at once: every answer is served or a 503 back-pressure, and every served
// RTC answer reports its session and the right source (no chunk only on a
// session's first served predict).
func TestPredictSessionsConcurrent(t *testing.T) {
	f := newFixture(t, true, withSessions(15, 64))
	opts := map[string]any{"rtc_overlap_steps": 12, "rtc_frozen_steps": "auto"}
	const clients, perClient, rounds = 8, 4, 6
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			served := map[string]bool{}
			for r := range rounds {
				for s := range perClient {
					id := fmt.Sprintf("c%d-s%d", c, s)
					resp, b := f.do(t, "POST", "/predict", sessBody(t, id, opts), nil)
					if resp.StatusCode == http.StatusServiceUnavailable {
						continue
					}
					if resp.StatusCode != http.StatusOK {
						errs <- fmt.Errorf("%s round %d: %d %s", id, r, resp.StatusCode, b)
						return
					}
					var pr service.PredictResponse
					if err := json.Unmarshal(b, &pr); err != nil {
						errs <- err
						return
					}
					switch {
					case pr.Session != id || pr.RTC == nil || pr.RTC.Source != "session":
						errs <- fmt.Errorf("%s: session %q rtc %+v", id, pr.Session, pr.RTC)
						return
					case served[id] && pr.RTC.Skipped != "":
						errs <- fmt.Errorf("%s round %d: skipped %q after a served predict", id, r, pr.RTC.Skipped)
						return
					case !served[id] && pr.RTC.Skipped != service.RTCSkipNoChunk:
						errs <- fmt.Errorf("%s: first predict not no_chunk: %+v", id, pr.RTC)
						return
					}
					served[id] = true
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, clients*perClient, f.core.SessionStats().Sessions)
}
