package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client"
)

// smokeFakeGolden is the fake's golden: two groups, two steps.
var smokeFakeGolden = map[string][][]float64{"arm": {{1, 2}, {3, 4}}, "grip": {{0.5}, {-0.5}}}

// smokeFake is a /demo + /predict server whose answer to the n-th
// /predict (from 1) is answer(n, body); a nil golden serves a demo without
// expected.actions.
func smokeFake(t *testing.T, golden map[string][][]float64, answer func(n int64, req map[string]any) (int, map[string][][]float64)) *httptest.Server {
	t.Helper()
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/demo":
			exp := map[string]any{"gates": map[string]any{"actions_pcc_min": 0.999}, "note": "send as-is"}
			if golden != nil {
				exp["actions"] = golden
			} else {
				exp["note"] = "no golden for this checkpoint"
			}
			emb := r.URL.Query().Get("embodiment")
			if emb == "" {
				emb = "fake_bot"
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"embodiment": emb, "expected": exp,
				"request": map[string]any{"instruction": "x", "noise": [][]float64{{0.1, 0.2}}}})
		case "/predict":
			var req map[string]any
			body, _ := io.ReadAll(r.Body)
			require.NoError(t, json.Unmarshal(body, &req))
			st, acts := answer(count.Add(1), req)
			if st != http.StatusOK {
				http.Error(w, `{"error":"refused"}`, st)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"actions": acts, "action_keys": []string{"arm", "grip"},
				"model": "GR00T-N1.7-3B", "version": "n17", "embodiment": "fake_bot", "request_id": "r1",
				"timing_ms": map[string]any{"device": 1.5, "total": 2.5, "device_stages": map[string]any{"vision": 0.5}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSmokeVerdicts: the verdict and the line for each kind of server.
func TestSmokeVerdicts(t *testing.T) {
	golden := func(int64, map[string]any) (int, map[string][][]float64) { return 200, smokeFakeGolden }
	for _, c := range []struct {
		name    string
		golden  map[string][][]float64
		answer  func(n int64, req map[string]any) (int, map[string][][]float64)
		verdict string
		want    []string // substrings of the line
	}{
		{"golden", smokeFakeGolden, golden, "PASS", []string{
			"PASS GR00T-N1.7-3B n17 fake_bot: PCC(actions)=1.000000 max|d|=0 repeat_maxdiff=0.0e+00 seed_path_ok device_ms=1.50/1.50 total_ms=2.50/2.50 wall_ms=",
			"per_group[arm=1.00000/0.0000 grip=1.00000/0.0000]"}},
		{"other actions", smokeFakeGolden, func(int64, map[string]any) (int, map[string][][]float64) {
			return 200, map[string][][]float64{"arm": {{4, 3}, {2, 1}}, "grip": {{0.5}, {-0.5}}}
		}, "FAIL", []string{"FAIL GR00T-N1.7-3B", "PCC(actions)=0.", "max|d|=3", "arm=-1.00000/3.0000", "actions PCC", "below 0.9990"}},
		{"no golden", nil, golden, "PASS", []string{"PASS GR00T-N1.7-3B n17 fake_bot: no golden, determinism only (no golden for this checkpoint) repeat_maxdiff=0.0e+00 seed_path_ok"}},
		{"not deterministic", smokeFakeGolden, func(n int64, _ map[string]any) (int, map[string][][]float64) {
			return 200, map[string][][]float64{"arm": {{1, 2}, {3, 4 + float64(n)*1e-3}}, "grip": {{0.5}, {-0.5}}}
		}, "FAIL", []string{"repeat_maxdiff=1.0e-03", "repeat not bit-identical", "seed path: repeat not bit-identical", "seed_path_FAIL"}},
		{"seed refused", smokeFakeGolden, func(_ int64, req map[string]any) (int, map[string][][]float64) {
			if _, ok := req["seed"]; ok {
				return 400, nil
			}
			_, noise := req["noise"]
			assert.True(t, noise, "the demo request keeps its noise")
			return 200, smokeFakeGolden
		}, "FAIL", []string{"PCC(actions)=1.000000", "seed_path_FAIL", "seed path: 400 Bad Request"}},
		{"missing group", smokeFakeGolden, func(int64, map[string]any) (int, map[string][][]float64) {
			return 200, map[string][][]float64{"arm": {{1, 2}, {3, 4}}}
		}, "FAIL", []string{"actions vs golden: group grip: in the golden, not in the answer"}},
		{"server error", smokeFakeGolden, func(int64, map[string]any) (int, map[string][][]float64) { return 500, nil }, "FAIL", []string{
			"demo request 1: 500 Internal Server Error"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := smokeFake(t, c.golden, c.answer)
			out := filepath.Join(t.TempDir(), "smoke.json")
			var stdout bytes.Buffer
			err := runSmoke(context.Background(), []string{"--url", srv.URL, "--out", out}, &stdout)
			line := strings.TrimSpace(stdout.String())
			if c.verdict == "PASS" {
				require.NoError(t, err, line)
			} else {
				require.Error(t, err, line)
				assert.Contains(t, err.Error(), "FAIL: ")
			}
			assert.True(t, strings.HasPrefix(line, c.verdict+" "), line)
			assert.NotContains(t, line, "\n", "one line")
			for _, w := range c.want {
				assert.Contains(t, line, w)
			}
			var rep map[string]any
			b, err := os.ReadFile(out)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &rep), "%s", b)
			assert.Equal(t, c.verdict, rep["verdict"])
			assert.Equal(t, line, rep["line"])
		})
	}
}

// TestSmokeJSONShape: --out holds the line's numbers under fixed names.
func TestSmokeJSONShape(t *testing.T) {
	srv := smokeFake(t, smokeFakeGolden, func(int64, map[string]any) (int, map[string][][]float64) { return 200, smokeFakeGolden })
	out := filepath.Join(t.TempDir(), "deeper", "smoke.json")
	require.NoError(t, runSmoke(context.Background(), []string{"--url", srv.URL + "/", "--out", out, "--embodiment", "fake_bot", "--seed", "7"}, io.Discard))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var r struct {
		Verdict    string   `json:"verdict"`
		Failures   []string `json:"failures"`
		URL        string   `json:"url"`
		Protocol   string   `json:"protocol"`
		Embodiment string   `json:"embodiment"`
		Golden     bool     `json:"golden"`
		PCCMin     float64  `json:"actions_pcc_min"`
		Actions    struct {
			PCC      float64                       `json:"pcc"`
			MaxAbs   *float64                      `json:"max_abs_diff"`
			PerGroup map[string]map[string]float64 `json:"per_group"`
		} `json:"actions_vs_golden"`
		Repeat struct {
			BitIdentical bool     `json:"bit_identical"`
			MaxAbsDiff   *float64 `json:"max_abs_diff"`
		} `json:"repeat"`
		Seed struct {
			OK           bool `json:"ok"`
			Seed         int  `json:"seed"`
			BitIdentical bool `json:"bit_identical"`
		} `json:"seed_path"`
		TimingMS []map[string]float64 `json:"timing_ms"`
		WallMS   []float64            `json:"wall_ms"`
	}
	var all map[string]any
	require.NoError(t, json.Unmarshal(b, &all))
	require.NoError(t, json.Unmarshal(b, &r))
	assert.ElementsMatch(t, []string{"verdict", "line", "url", "protocol", "embodiment", "model", "version", "golden", "note",
		"actions_pcc_min", "actions_vs_golden", "repeat", "seed_path", "timing_ms", "wall_ms"}, keysOf(all))
	assert.Equal(t, "PASS", r.Verdict)
	assert.Empty(t, r.Failures)
	assert.Equal(t, "http", r.Protocol)
	assert.Equal(t, "fake_bot", r.Embodiment)
	assert.True(t, r.Golden)
	assert.Equal(t, 0.999, r.PCCMin)
	assert.InDelta(t, 1, r.Actions.PCC, 1e-12)
	require.NotNil(t, r.Actions.MaxAbs)
	assert.Equal(t, map[string]map[string]float64{"arm": {"pcc": 1, "max_abs_diff": 0}, "grip": {"pcc": 1, "max_abs_diff": 0}}, r.Actions.PerGroup)
	assert.True(t, r.Repeat.BitIdentical)
	require.NotNil(t, r.Repeat.MaxAbsDiff)
	assert.True(t, r.Seed.OK)
	assert.True(t, r.Seed.BitIdentical)
	assert.Equal(t, 7, r.Seed.Seed)
	require.Len(t, r.TimingMS, 2)
	assert.Equal(t, map[string]float64{"device": 1.5, "total": 2.5, "device_stages.vision": 0.5}, r.TimingMS[0])
	assert.Len(t, r.WallMS, 2)
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSmokeSeedRequest: the seed path's request is the demo's with seed
// in place of noise, everything else kept.
func TestSmokeSeedRequest(t *testing.T) {
	got, err := client.WithSeed(json.RawMessage(`{"instruction":"x","noise":[[1]],"state":{"a":[1]}}`), 42)
	require.NoError(t, err)
	assert.JSONEq(t, `{"instruction":"x","seed":42,"state":{"a":[1]}}`, string(got))
	_, err = client.WithSeed(json.RawMessage(`[1]`), 1)
	assert.ErrorContains(t, err, "demo request")
}

// TestCompareGolden: PCC and max|d| overall and per group, in the
// answer's order; shape mismatches name the group.
func TestCompareGolden(t *testing.T) {
	want := map[string][][]float64{"b": {{1}, {2}}, "a": {{1, 2}, {3, 4}}}
	for _, c := range []struct {
		name  string
		got   map[string][][]float64
		order []string
		pcc   float64
		max   float64
		names []string
		err   string
	}{
		{"same", want, []string{"b", "a"}, 1, 0, []string{"b", "a"}, ""},
		{"name order without keys", want, nil, 1, 0, []string{"a", "b"}, ""},
		{"offset", map[string][][]float64{"b": {{1}, {2}}, "a": {{1, 2}, {3, 4.5}}}, nil, 0.99518, 0.5, []string{"a", "b"}, ""},
		{"missing", map[string][][]float64{"a": {{1, 2}, {3, 4}}}, nil, 0, 0, nil, "group b: in the golden, not in the answer"},
		{"short", map[string][][]float64{"b": {{1}}, "a": {{1, 2}, {3, 4}}}, nil, 0, 0, nil, "group b: 1 steps, golden 2"},
		{"narrow", map[string][][]float64{"b": {{1}, {2}}, "a": {{1, 2}, {3}}}, nil, 0, 0, nil, "group a: step 1: 1 values, golden 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := compareGolden(c.got, want, c.order)
			if c.err != "" {
				assert.EqualError(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, c.pcc, float64(d.PCC), 1e-4)
			assert.InDelta(t, c.max, float64(d.MaxAbs), 1e-12)
			assert.Equal(t, c.names, d.Order)
		})
	}
}

// TestActionsDiff: bit identity, not closeness.
func TestActionsDiff(t *testing.T) {
	a := map[string][][]float64{"x": {{1, 2}}}
	for _, c := range []struct {
		name  string
		b     map[string][][]float64
		ident bool
		max   float64
	}{
		{"same", map[string][][]float64{"x": {{1, 2}}}, true, 0},
		{"ulp", map[string][][]float64{"x": {{1, math.Nextafter(2, 3)}}}, false, math.Nextafter(2, 3) - 2},
		{"other group", map[string][][]float64{"y": {{1, 2}}}, false, math.Inf(1)},
		{"other shape", map[string][][]float64{"x": {{1}}}, false, math.Inf(1)},
	} {
		ident, md := actionsDiff(a, c.b)
		assert.Equal(t, c.ident, ident, c.name)
		assert.Equal(t, c.max, md, c.name)
	}
}
