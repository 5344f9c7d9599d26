package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/gr00tgw/gr00tgw/client"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/record"
)

// TestReplayCompare: the comparison of replayed actions with recorded
// ones, under tolerance 0 and 1e-3.
func TestReplayCompare(t *testing.T) {
	rec := func(groups map[string][]float32) []record.ActionGroup {
		var out []record.ActionGroup
		for _, k := range sortedKeys(groups) {
			v := groups[k]
			out = append(out, record.ActionGroup{Key: k, Tensor: record.Float32s(v, 2, len(v)/2)})
		}
		return out
	}
	want := rec(map[string][]float32{"arm": {0.1, 0.2, 0.3, 0.4}, "grip": {1, 0}})
	// f32 is a float32 value as an HTTP answer carries it.
	f32 := func(x float32) float64 { return float64(x) }
	base := func() map[string][][]float64 {
		return map[string][][]float64{
			"arm":  {{f32(0.1), f32(0.2)}, {f32(0.3), f32(0.4)}},
			"grip": {{1}, {0}},
		}
	}
	for _, tc := range []struct {
		name       string
		edit       func(m map[string][][]float64)
		identical  bool
		within0    bool
		within1e3  bool
		maxAbs     float64 // NaN: expect NaN; +Inf: a mismatch
		mismatch   string
		pccAtLeast float64
	}{
		{name: "identical", edit: func(map[string][][]float64) {}, identical: true, within0: true, within1e3: true, maxAbs: 0, pccAtLeast: 1},
		{name: "a float32 written as its shortest decimal", edit: func(m map[string][][]float64) { m["arm"][0][0] = 0.1 }, identical: true, within0: true, within1e3: true, maxAbs: 0, pccAtLeast: 1},
		{name: "within tolerance", edit: func(m map[string][][]float64) { m["arm"][1][0] += 5e-4 }, within1e3: true, maxAbs: 5e-4, pccAtLeast: 0.99},
		{name: "beyond tolerance", edit: func(m map[string][][]float64) { m["grip"][0][0] = 0.5 }, maxAbs: 0.5},
		{name: "negative zero is not bit-identical", edit: func(m map[string][][]float64) { m["grip"][1][0] = math.Copysign(0, -1) }, within1e3: true, maxAbs: 0, pccAtLeast: 1},
		{name: "shape mismatch", edit: func(m map[string][][]float64) { m["arm"] = m["arm"][:1] }, maxAbs: math.Inf(1), mismatch: "group arm: shape [1 2], recorded [2 2]"},
		{name: "missing group", edit: func(m map[string][][]float64) { delete(m, "grip") }, maxAbs: math.Inf(1), mismatch: "group grip: recorded, not in the answer"},
		{name: "extra group", edit: func(m map[string][][]float64) { m["base"] = [][]float64{{0}} }, maxAbs: math.Inf(1), mismatch: "group base: in the answer, not recorded"},
		{name: "NaN", edit: func(m map[string][][]float64) { m["arm"][0][1] = math.NaN() }, maxAbs: math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := base()
			tc.edit(got)
			d := compareActions(got, want)
			assert.Equal(t, tc.identical, d.BitIdentical)
			assert.Equal(t, tc.within0, d.within(0), "tolerance 0")
			assert.Equal(t, tc.within1e3, d.within(1e-3), "tolerance 1e-3")
			switch m := float64(d.MaxAbsDiff); {
			case math.IsNaN(tc.maxAbs):
				assert.True(t, math.IsNaN(m), "max|d| %v, want NaN", m)
			case math.IsInf(tc.maxAbs, 1):
				assert.True(t, math.IsInf(m, 1), "max|d| %v, want +Inf", m)
			default:
				assert.InDelta(t, tc.maxAbs, m, 1e-7)
			}
			if tc.mismatch != "" {
				assert.Contains(t, d.Mismatch, tc.mismatch)
			} else {
				assert.Empty(t, d.Mismatch)
			}
			if tc.pccAtLeast > 0 {
				assert.GreaterOrEqual(t, float64(d.PCC), tc.pccAtLeast-1e-9)
			}
		})
	}

	// action_pred: a float32 tensor [H, D] against rows, batch of one dropped.
	pred := record.Float32s([]float32{1, 2, 3, 4, 5, 6}, 1, 2, 3)
	assert.True(t, compareRows([][]float64{{1, 2, 3}, {4, 5, 6}}, &pred).BitIdentical)
	d := compareRows([][]float64{{1, 2}, {3, 4}, {5, 6}}, &pred)
	assert.Equal(t, "shape [3 2], recorded [1 2 3]", d.Mismatch)
	assert.False(t, d.within(1))
}

// TestReplayBadInput: a missing or empty directory, a missing DIR, a bad
// tolerance or protocol and an unreachable URL are clear errors naming the
// flag or the path.
func TestReplayBadInput(t *testing.T) {
	empty := t.TempDir()
	notDir := filepath.Join(empty, "file")
	require.NoError(t, os.WriteFile(notDir, []byte("x"), 0o600))
	withRecord := t.TempDir()
	writeRecord(t, withRecord, 1, &record.Record{Protocol: "http", Embodiment: "e"})
	dead := "http://" + pickPort(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay", "--url", dead}, 2, "want exactly one record directory"},
		{[]string{"replay", filepath.Join(empty, "missing"), "--url", dead}, 1, "record directory " + filepath.Join(empty, "missing") + ": no such file or directory"},
		{[]string{"replay", notDir, "--url", dead}, 1, "record directory " + notDir + ": not a directory"},
		{[]string{"replay", empty, "--url", dead}, 1, "record directory " + empty + ": no *.gwrec files"},
		{[]string{"replay", withRecord, "--url", dead, "--tolerance", "-1"}, 2, "--tolerance -1"},
		{[]string{"replay", withRecord, "--url", dead, "--protocol", "grpc"}, 2, `--protocol "grpc"`},
		{[]string{"replay", withRecord, "--url", dead, "--protocol", "zmq"}, 2, "--protocol zmq needs --zmq-url"},
		{[]string{"replay", withRecord, "--url", dead}, 1, "--url " + dead + ": the server is unreachable"},
	} {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), tc.args, &out, &errb)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errb.String())
		assert.Contains(t, errb.String(), tc.want, "%v", tc.args)
		assert.NotContains(t, errb.String(), "panic")
	}
}

// writeRecord writes r as record file number n of dir, named as the
// recorder names its files.
func writeRecord(t testing.TB, dir string, n int, r *record.Record) string {
	t.Helper()
	b, err := record.Marshal(r)
	require.NoError(t, err)
	p := filepath.Join(dir, fmt.Sprintf("%019d-%06d%s", time.Now().UnixNano(), n, record.Ext))
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

// recordFromServer posts req (a /predict JSON object) to the server with
// return_normalized and builds the record the flight recorder would write
// for it: the request as sent (PNG frames as their bytes), its seed or
// noise, and the server's own actions and action_pred.
func recordFromServer(t *testing.T, base string, req map[string]any, protocol string) *record.Record {
	t.Helper()
	req["return_normalized"] = true
	body, err := json.Marshal(req)
	require.NoError(t, err)
	code, hdr, rb, err := postPredict(http.DefaultClient, base, body, "application/json")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%s", rb)
	var resp struct {
		Actions    map[string][][]float64 `json:"actions"`
		Keys       []string               `json:"action_keys"`
		Embodiment string                 `json:"embodiment"`
		Pred       [][]float64            `json:"action_pred_normalized"`
		Timing     map[string]any         `json:"timing_ms"`
		Noise      string                 `json:"noise_source"`
	}
	require.NoError(t, json.Unmarshal(rb, &resp))
	require.NotEmpty(t, resp.Pred)

	r := &record.Record{Protocol: protocol, RequestID: hdr.Get(client.RequestIDHeader), Embodiment: resp.Embodiment,
		NoiseSource: resp.Noise, TimingMS: record.Timings{"total": resp.Timing["total"].(float64)},
		Safety: &record.Safety{Policy: "off"}}
	r.Request.Instruction = req["instruction"].(string)
	for _, cam := range sortedKeys(req["images"].(map[string]any)) {
		for i, f := range req["images"].(map[string]any)[cam].([]any) {
			data, err := base64.StdEncoding.DecodeString(f.(string))
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(data, []byte("\x89PNG")), "the demo frames are PNG")
			r.Request.Frames = append(r.Request.Frames, record.Frame{Camera: cam, Step: i, Encoding: "png", Data: data})
		}
	}
	for _, g := range sortedKeys(req["state"].(map[string]any)) {
		s := record.State{Key: g}
		for _, x := range req["state"].(map[string]any)[g].([]any) {
			if row, ok := x.([]any); ok { // [[D]]: one step
				s.Steps++
				for _, y := range row {
					s.Values = append(s.Values, y.(float64))
				}
				continue
			}
			s.Values = append(s.Values, x.(float64))
		}
		r.Request.State = append(r.Request.State, s)
	}
	if seed, ok := req["seed"]; ok {
		u := uint64(seed.(float64))
		r.Seed = &u
	}
	if noise, ok := req["noise"].([]any); ok {
		var flat []float32
		for _, row := range noise {
			for _, x := range row.([]any) {
				flat = append(flat, float32(x.(float64)))
			}
		}
		n := record.Float32s(flat, len(noise), len(flat)/len(noise))
		r.Noise = &n
	}
	pred := flatten(resp.Pred)
	p32 := make([]float32, len(pred))
	for i, x := range pred {
		p32[i] = float32(x)
	}
	ap := record.Float32s(p32, len(resp.Pred), len(resp.Pred[0]))
	r.ActionPred = &ap
	for _, k := range resp.Keys {
		v := flatten(resp.Actions[k])
		v32 := make([]float32, len(v))
		for i, x := range v {
			v32[i] = float32(x)
			require.Equal(t, x, float64(v32[i]), "actions are float32 values")
		}
		r.Actions = append(r.Actions, record.ActionGroup{Key: k, Tensor: record.Float32s(v32, len(resp.Actions[k]), len(resp.Actions[k][0]))})
	}
	return r
}

// TestReplayE2E: records built from a real `gr00tgw serve`'s own answers
// (DROID with the demo's noise, LIBERO with a seed, ZeroMQ, openpi and OIP
// records with a seed, an openpi record with noise openpi cannot carry)
// replay bit-identical, over their recorded protocol where it can carry them and
// over HTTP otherwise; one altered action value is reported, naming the
// file, with exit status 1, and passes under a tolerance above it; a
// corrupt file is an error row naming it.
func TestReplayE2E(t *testing.T) {
	bin, plugins := buildGateway(t)
	zaddr, oaddr := pickPort(t), pickPort(t)
	g := startGateway(t, bin, plugins, "--zmq-addr", zaddr, "--openpi-addr", oaddr)
	ctx := context.Background()
	h := client.NewHTTP(g.base, client.Options{Timeout: time.Minute})
	demo := func(emb string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second) // the non-default embodiments may still warm up
		for {
			d, err := h.Demo(ctx, emb)
			if err == nil {
				var m map[string]any
				require.NoError(t, json.Unmarshal(d.Request, &m))
				if emb != "" {
					m["embodiment"] = emb
				}
				return m
			}
			require.True(t, time.Now().Before(deadline), "demo %s: %v", emb, err)
			time.Sleep(500 * time.Millisecond)
		}
	}
	withSeed := func(m map[string]any, seed float64) map[string]any {
		delete(m, "noise")
		m["seed"] = seed
		return m
	}

	withNoise := func(m map[string]any, noise any) map[string]any {
		require.NotNil(t, noise, "the DROID demo carries the reference noise")
		delete(m, "seed")
		m["noise"] = noise
		return m
	}

	dir := t.TempDir()
	files := []string{
		writeRecord(t, dir, 1, recordFromServer(t, g.base, demo(""), "http")),
		writeRecord(t, dir, 2, recordFromServer(t, g.base, withSeed(demo("libero_sim"), 7), "http")),
		writeRecord(t, dir, 3, recordFromServer(t, g.base, withSeed(demo(""), 42), "zmq")),
		writeRecord(t, dir, 4, recordFromServer(t, g.base, withNoise(demo("libero_sim"), demo("")["noise"]), "openpi")),
		writeRecord(t, dir, 5, recordFromServer(t, g.base, withSeed(demo("libero_sim"), 11), "openpi")),
		writeRecord(t, dir, 6, recordFromServer(t, g.base, withSeed(demo(""), 3), "oip")),
	}
	robots := []string{"--zmq-url", "tcp://" + zaddr, "--openpi-url", "ws://" + oaddr}
	run := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		var out, errb bytes.Buffer
		b := captureStdout(t, func() { code = dispatch(ctx, args, &out, &errb) })
		return code, string(b), errb.String()
	}
	read := func(path string) *replayReport {
		t.Helper()
		var r replayReport
		require.NoError(t, json.Unmarshal([]byte(mustRead(t, path)), &r))
		return &r
	}

	out := filepath.Join(t.TempDir(), "replay.json")
	code, stdout, stderr := run("replay", dir, "--url", g.base, robots[0], robots[1], robots[2], robots[3], "--out", out)
	t.Log("\n" + stdout)
	require.Equal(t, 0, code, "%s%s", stdout, stderr)
	assert.Contains(t, stdout, "6 requests: 6 bit-identical, 0 within tolerance 0, 0 differ, 0 errors")
	r := read(out)
	require.Len(t, r.Requests, 6)
	assert.Equal(t, 6, r.BitIdentical)
	assert.Empty(t, r.Failing)
	assert.Equal(t, 6, r.Actions.Compared)
	assert.Equal(t, 0.0, float64(r.Actions.MaxAbsDiff))
	assert.Equal(t, 3, r.ActionPred.Compared, "action_pred over HTTP, not over zmq, openpi, oip")
	assert.Equal(t, 0.0, float64(r.ActionPred.MaxAbsDiff))
	for i, rr := range r.Requests {
		assert.Equal(t, filepath.Base(files[i]), rr.File)
		assert.Equal(t, "bit-identical", rr.Status, rr.File)
		assert.True(t, rr.Actions.BitIdentical)
		assert.Positive(t, float64(rr.Latency.Recorded))
		assert.Positive(t, float64(rr.Latency.Wall))
		assert.NotEmpty(t, rr.RequestID)
	}
	var protos []string
	for _, rr := range r.Requests {
		protos = append(protos, rr.Protocol)
	}
	assert.Equal(t, []string{"http", "http", "zmq", "http", "openpi", "oip"}, protos)
	assert.Equal(t, "seed 42", r.Requests[2].Noise)
	assert.Equal(t, "noise [40 132]", r.Requests[0].Noise)
	assert.Equal(t, "openpi carries a seed, not explicit noise", r.Requests[3].Fallback)
	assert.Contains(t, stdout, "note: "+filepath.Base(files[3])+" went over http, not openpi")
	var raw struct {
		Requests []struct {
			Latency map[string]*float64 `json:"latency_ms"`
		} `json:"requests"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustRead(t, out)), &raw))
	assert.Nil(t, raw.Requests[2].Latency["replayed_total"], "zmq reports no server total: null, not 0")
	assert.NotNil(t, raw.Requests[0].Latency["replayed_total"])

	// Forcing zmq: the records with noise cannot go over it.
	code, stdout, stderr = run("replay", dir, "--url", g.base, robots[0], robots[1], robots[2], robots[3], "--protocol", "zmq")
	assert.Equal(t, 1, code, stdout)
	assert.Contains(t, stdout, "4 bit-identical, 0 within tolerance 0, 0 differ, 2 errors")
	assert.Contains(t, stdout, "--protocol zmq cannot replay this record: zmq carries a seed, not explicit noise")
	assert.Contains(t, stderr, filepath.Base(files[0]))
	assert.Contains(t, stderr, filepath.Base(files[3]))

	// A planted difference: one action value of the LIBERO record moved by 1e-3.
	rec, err := record.ReadFile(files[1])
	require.NoError(t, err)
	v, err := rec.Actions[0].Tensor.Float32s()
	require.NoError(t, err)
	v[5] += 1e-3
	rec.Actions[0].Tensor = record.Float32s(v, rec.Actions[0].Tensor.Shape...)
	b, err := record.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(files[1], b, 0o600))

	code, stdout, stderr = run("replay", dir, "--url", g.base, robots[0], robots[1], robots[2], robots[3], "--out", out)
	t.Log("\n" + stdout)
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "5 bit-identical, 0 within tolerance 0, 1 differ, 0 errors")
	assert.Contains(t, stderr, "1 of 6 recorded requests differ beyond tolerance 0")
	assert.Contains(t, stderr, filepath.Base(files[1])+" (request "+rec.RequestID+")")
	r = read(out)
	require.Equal(t, []string{filepath.Base(files[1]) + " (request " + rec.RequestID + ")"}, r.Failing)
	planted := r.Requests[1]
	assert.Equal(t, "differs", planted.Status)
	assert.False(t, planted.Actions.BitIdentical)
	assert.InDelta(t, 1e-3, float64(planted.Actions.MaxAbsDiff), 1e-6)
	assert.True(t, planted.ActionPred.BitIdentical, "the model's output did not change")
	assert.Contains(t, planted.Diffs[0], "actions: max|d| 0.001")
	assert.False(t, planted.Actions.PerGroup[rec.Actions[0].Key].BitIdentical)

	code, stdout, stderr = run("replay", dir, "--url", g.base, robots[0], robots[1], robots[2], robots[3], "--tolerance", "0.002")
	assert.Equal(t, 0, code, "%s%s", stdout, stderr)
	assert.Contains(t, stdout, "5 bit-identical, 1 within tolerance 0.002, 0 differ, 0 errors")

	// A corrupt file: an error row naming it, the others still replayed.
	bad := filepath.Join(dir, strings.Repeat("9", 19)+"-000009"+record.Ext)
	require.NoError(t, os.WriteFile(bad, []byte("\x81\xa6format\xc1"), 0o600))
	code, stdout, stderr = run("replay", dir, "--url", g.base, robots[0], robots[1], robots[2], robots[3], "--tolerance", "0.002")
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "5 bit-identical, 1 within tolerance 0.002, 0 differ, 1 errors")
	assert.Contains(t, stdout, "error: record: decode")
	assert.Contains(t, stderr, filepath.Base(bad))
}

// TestReplayBodies: the HTTP body carries the frames as recorded (raw
// frames as {data, shape}), a flat state list, the real-time-chunking
// options only, the noise with its batch and return_normalized; the robot
// body carries raw frames as PNG that decodes to the same pixels, and the
// seed.
func TestReplayBodies(t *testing.T) {
	pix := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12} // [2, 2, 3]
	noise := record.Float32s([]float32{0.5, -1, 2, 0.25}, 1, 2, 2)
	rec := &record.Record{Protocol: "zmq", Embodiment: "e", Noise: &noise,
		Request: record.Request{Instruction: "go",
			Options: map[string]any{"rtc_overlap_steps": int64(4), "seed": int64(3), "embodiment": "e"},
			State:   []record.State{{Key: "", Steps: 1, Values: []float64{0.1, 0.2}}},
			Frames: []record.Frame{
				{Camera: "wrist", Step: 1, Encoding: "png", Data: []byte("\x89PNG second")},
				{Camera: "wrist", Step: 0, Encoding: "raw", Shape: []int{2, 2, 3}, Data: pix},
			}}}
	b, err := httpBody(rec)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, msgpack.Unmarshal(b, &m))
	frames := m["images"].(map[string]any)["wrist"].([]any)
	require.Len(t, frames, 2)
	assert.Equal(t, pix, frames[0].(map[string]any)["data"], "step 0 first, raw as {data, shape}")
	assert.Equal(t, []byte("\x89PNG second"), frames[1], "encoded frames as the bytes recorded")
	assert.Equal(t, []any{[]any{0.1, 0.2}}, m["state"], "a flat state list of one step")
	assert.Equal(t, map[string]any{"rtc_overlap_steps": int64(4)}, m["options"], "only the options /predict accepts")
	assert.Equal(t, []any{[]any{[]any{0.5, -1.0}, []any{2.0, 0.25}}}, m["noise"])
	assert.Equal(t, true, m["return_normalized"])
	assert.Equal(t, "go", m["instruction"])
	assert.NotContains(t, m, "seed")

	assert.Equal(t, "zmq carries a seed, not explicit noise", canCarry("zmq", rec))
	seed := uint64(9)
	rec.Seed = &seed
	assert.Equal(t, "zmq carries no option rtc_overlap_steps", canCarry("zmq", rec))
	delete(rec.Request.Options, "rtc_overlap_steps")
	assert.Equal(t, "zmq carries state as one-step groups only", canCarry("zmq", rec))
	rec.Request.State = []record.State{{Key: "joints", Values: []float64{0.1, 0.2}}}
	assert.Empty(t, canCarry("zmq", rec))
	assert.Empty(t, canCarry("http", rec))

	big := make([]byte, 64*64*3) // the decoder's smallest side is 64
	for i := range big {
		big[i] = byte(i * 7)
	}
	rec.Request.Frames = []record.Frame{{Camera: "wrist", Encoding: "raw", Shape: []int{64, 64, 3}, Data: big}}
	jb, err := robotBody(rec)
	require.NoError(t, err)
	o, err := rawobs.FromPredictJSON(jb)
	require.NoError(t, err)
	require.Len(t, o.Frames["wrist"], 1)
	assert.Equal(t, big, o.Frames["wrist"][0].Pix, "PNG decodes to the recorded pixels")
	assert.Equal(t, uint64(9), *o.Seed)
	assert.Equal(t, "e", o.Embodiment)
	assert.Equal(t, map[string][]float64{"joints": {0.1, 0.2}}, o.State)
}

// TestReplaySafetyAndOutcome: a changed safety verdict and a changed
// outcome (answered vs failed) are differences whatever the tolerance; a
// recorded rejection rejected again is not.
func TestReplaySafetyAndOutcome(t *testing.T) {
	acts := []record.ActionGroup{{Key: "a", Tensor: record.Float32s([]float32{1, 2}, 2, 1)}}
	same := map[string][][]float64{"a": {{1}, {2}}}
	clamped := &record.Safety{Policy: "clamp", Clamped: 2, First: &record.Violation{Group: "a", Step: 1, Dim: 0, Kind: "max_step_delta"}}
	for _, tc := range []struct {
		name   string
		rec    *record.Record
		ans    *replayAnswer
		status string
		diff   string
	}{
		{"same clamp", &record.Record{Actions: acts, Safety: clamped},
			&replayAnswer{actions: same, hasSafety: true, safety: &safetyVerdict{Clamped: 2, First: "a[1][0] max_step_delta"}}, "bit-identical", ""},
		{"clamp count changed", &record.Record{Actions: acts, Safety: clamped},
			&replayAnswer{actions: same, hasSafety: true, safety: &safetyVerdict{}}, "differs", "safety verdict clamped 2 (a[1][0] max_step_delta) → clamped 0"},
		{"no verdict on replay", &record.Record{Actions: acts, Safety: clamped},
			&replayAnswer{actions: same}, "bit-identical", ""},
		{"rejected again", &record.Record{Error: "unsafe action", Safety: &record.Safety{Policy: "reject", Rejected: true}},
			&replayAnswer{errMessage: "422: unsafe_action", rejected: true}, "bit-identical", ""},
		{"now answered", &record.Record{Error: "unsafe action", Safety: &record.Safety{Policy: "reject", Rejected: true}},
			&replayAnswer{actions: same}, "differs", "recorded as failed (unsafe action), answered on replay"},
		{"now failing", &record.Record{Actions: acts},
			&replayAnswer{errMessage: "500 Internal Server Error"}, "differs", "answered when recorded, failed on replay: 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := &replayRequest{}
			(&replayer{c: &replayConfig{tolerance: 10}}).compare(tc.rec, tc.ans, rr)
			assert.Equal(t, tc.status, rr.Status, "%v", rr.Diffs)
			if tc.diff == "" {
				assert.Empty(t, rr.Diffs)
			} else {
				require.NotEmpty(t, rr.Diffs)
				assert.Contains(t, rr.Diffs[0], tc.diff)
			}
		})
	}
}

// TestReplayInspect: --inspect prints one row per record without a
// server, --out writes the rows as JSON, and a corrupt file is a row
// naming its error and exit status 1.
func TestReplayInspect(t *testing.T) {
	dir := t.TempDir()
	seed := uint64(5)
	acts := record.Float32s([]float32{1, 2, 3, 4}, 2, 2)
	writeRecord(t, dir, 1, &record.Record{TimeUnixNS: 1796654646636348574, RequestID: "r1", Protocol: "zmq", Session: "s1",
		Embodiment: "libero_sim", Plugin: record.Plugin{Name: "libero", Version: "1.2.0"}, Checkpoint: "sha256:0123456789abcdef0123",
		Seed: &seed, TimingMS: record.Timings{"total": 12.5},
		Request: record.Request{Instruction: "go", State: []record.State{{Key: "x", Values: []float64{1}}},
			Frames: []record.Frame{{Camera: "image", Encoding: "png", Data: make([]byte, 2048)}}},
		Actions: []record.ActionGroup{{Key: "arm", Tensor: acts}},
		Safety:  &record.Safety{Policy: "clamp", Clamped: 3, First: &record.Violation{Group: "arm", Step: 1, Dim: 0, Kind: "max_step_delta"}}})
	out := filepath.Join(t.TempDir(), "inspect.json")
	var code int
	var errb bytes.Buffer
	b := captureStdout(t, func() {
		code = dispatch(context.Background(), []string{"replay", dir, "--inspect", "--out", out}, &bytes.Buffer{}, &errb)
	})
	require.Equal(t, 0, code, "%s%s", b, errb.String())
	for _, w := range []string{"2026-12-07T", "zmq", "s1", "libero_sim", "libero@1.2.0", "sha256:0123456789ab…", "seed 5", "image×1 (2 KB)", "x[1]", "arm[2 2]",
		"clamp: clamped 3 (arm[1][0] max_step_delta)", "12.5", "1 records"} {
		assert.Contains(t, string(b), w)
	}
	var rows []inspectRow
	require.NoError(t, json.Unmarshal([]byte(mustRead(t, out)), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, "r1", rows[0].RequestID)
	assert.Equal(t, 12.5, float64(rows[0].TotalMS))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "x"+record.Ext), []byte{0xc1}, 0o600))
	b = captureStdout(t, func() {
		code = dispatch(context.Background(), []string{"replay", dir, "--inspect"}, &bytes.Buffer{}, &errb)
	})
	assert.Equal(t, 1, code)
	assert.Contains(t, string(b), "record: decode")
	assert.Contains(t, errb.String(), "1 of 2 record files do not decode: x.gwrec")
}
