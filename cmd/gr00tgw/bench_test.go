package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPercentile: numpy.percentile's default (linear between the closest
// ranks) on known samples.
func TestPercentile(t *testing.T) {
	one100 := make([]float64, 100)
	for i := range one100 {
		one100[i] = float64(i + 1)
	}
	for _, c := range []struct {
		name   string
		sorted []float64
		q      float64
		want   float64
	}{
		{"empty", nil, 50, math.NaN()},
		{"one", []float64{5}, 99, 5},
		{"two p50", []float64{0, 10}, 50, 5},
		{"two p25", []float64{0, 10}, 25, 2.5},
		{"four p50", []float64{1, 2, 3, 4}, 50, 2.5},
		{"four p90", []float64{1, 2, 3, 4}, 90, 3.7},
		{"four p99", []float64{1, 2, 3, 4}, 99, 3.97},
		{"odd p50 is the middle", []float64{1, 2, 10}, 50, 2},
		{"p0 is the min", []float64{3, 4, 9}, 0, 3},
		{"p100 is the max", []float64{3, 4, 9}, 100, 9},
		{"above 100 clamps", []float64{3, 4, 9}, 150, 9},
		{"1..100 p50", one100, 50, 50.5},
		{"1..100 p90", one100, 90, 90.1},
		{"1..100 p99", one100, 99, 99.01},
		{"ties", []float64{2, 2, 2, 7}, 50, 2},
	} {
		got := percentile(c.sorted, c.q)
		if math.IsNaN(c.want) {
			assert.True(t, math.IsNaN(got), c.name)
			continue
		}
		assert.InDelta(t, c.want, got, 1e-9, c.name)
	}
}

// TestSummarize: mean, min, max and the percentiles of unsorted samples;
// the input is not reordered.
func TestSummarize(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	s := summarize(xs)
	assert.Equal(t, latencyStats{N: 4, Mean: 2.5, Min: 1, P50: 2.5, P90: 3.7, P99: 3.97, Max: 4}, roundStats(s))
	assert.Equal(t, []float64{4, 1, 3, 2}, xs)
	e := summarize(nil)
	assert.Equal(t, 0, e.N)
	assert.True(t, math.IsNaN(float64(e.P50)))
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":0,"mean":null,"min":null,"p50":null,"p90":null,"p99":null,"max":null}`, string(b))
}

func roundStats(s latencyStats) latencyStats {
	r := func(f jsonFloat) jsonFloat { return jsonFloat(math.Round(float64(f)*1e9) / 1e9) }
	return latencyStats{N: s.N, Mean: r(s.Mean), Min: r(s.Min), P50: r(s.P50), P90: r(s.P90), P99: r(s.P99), Max: r(s.Max)}
}

// TestSummarizeSamples: wall first, the known timing fields in pipeline
// order, the rest by name; failed samples are left out.
func TestSummarizeSamples(t *testing.T) {
	samples := []benchSample{
		{WallMS: 10, TimingMS: map[string]float64{"total": 9, "device": 8, "device_stages.vision": 2, "device_stages.llm": 1, "queue": 0}},
		{WallMS: 20, TimingMS: map[string]float64{"total": 19, "device": 18, "device_stages.vision": 4, "device_stages.llm": 3, "queue": 1}},
		{WallMS: 999, Error: "500 Internal Server Error"},
	}
	fields, sum := summarizeSamples(samples)
	assert.Equal(t, []string{"wall", "total", "device", "queue", "device_stages.llm", "device_stages.vision"}, fields)
	assert.Equal(t, 2, sum["wall"].N)
	assert.Equal(t, jsonFloat(15), sum["wall"].P50)
	assert.Equal(t, jsonFloat(20), sum["wall"].Max)
	assert.Equal(t, jsonFloat(3), sum["device_stages.vision"].Mean)
}

// TestBenchFake: the table, the JSON (summary and raw samples) and the
// progress bar against a fake server.
func TestBenchFake(t *testing.T) {
	srv := smokeFake(t, smokeFakeGolden, func(int64, map[string]any) (int, map[string][][]float64) { return 200, smokeFakeGolden })
	out := filepath.Join(t.TempDir(), "bench.json")
	var stdout, progress bytes.Buffer
	require.NoError(t, runBench(context.Background(), []string{"--url", srv.URL, "--n", "5", "--concurrency", "2", "--warmup", "0", "--out", out}, &stdout, &progress))
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 2+4, "%s", stdout.String()) // header, column names, wall + 3 timing fields
	assert.Contains(t, lines[0], "bench "+srv.URL+" (http) GR00T-N1.7-3B n17 fake_bot: 5 requests, concurrency 2, warm-up 0:")
	assert.Contains(t, lines[0], "0 errors")
	assert.Equal(t, []string{"field", "(ms)", "n", "mean", "min", "p50", "p90", "p99", "max"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"device", "5", "1.500", "1.500", "1.500", "1.500", "1.500", "1.500"}, strings.Fields(lines[4])[:8])
	assert.Equal(t, "wall", strings.Fields(lines[2])[0])
	assert.Equal(t, "total", strings.Fields(lines[3])[0])
	assert.Equal(t, "device_stages.vision", strings.Fields(lines[5])[0])
	assert.Contains(t, progress.String(), "\r["+strings.Repeat("#", 40)+"] 5/5")
	assert.Contains(t, progress.String(), "] 1/5")
	assert.True(t, strings.HasSuffix(progress.String(), "\r\033[K"), "the bar is erased")

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var r benchReport
	require.NoError(t, json.Unmarshal(b, &r))
	var all map[string]any
	require.NoError(t, json.Unmarshal(b, &all))
	assert.ElementsMatch(t, []string{"url", "protocol", "embodiment", "model", "version", "n", "concurrency", "warmup",
		"elapsed_s", "throughput_rps", "errors", "fields", "summary", "samples"}, keysOf(all))
	assert.Equal(t, 5, r.N)
	assert.Equal(t, 2, r.Concurrency)
	assert.Equal(t, 0, r.Warmup)
	assert.Equal(t, "fake_bot", r.Embodiment)
	assert.Positive(t, r.ThroughputRPS)
	assert.Equal(t, []string{"wall", "total", "device", "device_stages.vision"}, r.Fields)
	require.Len(t, r.Samples, 5)
	for i, s := range r.Samples {
		assert.Equal(t, i, s.Index)
		assert.Positive(t, s.WallMS)
		assert.Equal(t, map[string]float64{"device": 1.5, "total": 2.5, "device_stages.vision": 0.5}, s.TimingMS)
		assert.Equal(t, "r1", s.RequestID)
	}
	assert.Equal(t, latencyStats{N: 5, Mean: 2.5, Min: 2.5, P50: 2.5, P90: 2.5, P99: 2.5, Max: 2.5}, r.Summary["total"])
	sample := all["samples"].([]any)[0].(map[string]any)
	assert.ElementsMatch(t, []string{"i", "wall_ms", "timing_ms", "request_id"}, keysOf(sample))
}

// TestBenchErrors: a failed request is counted, reported and exits 1;
// the JSON is still written. A failed warm-up stops the bench.
func TestBenchErrors(t *testing.T) {
	srv := smokeFake(t, smokeFakeGolden, func(n int64, _ map[string]any) (int, map[string][][]float64) {
		if n == 3 {
			return http.StatusInternalServerError, nil
		}
		return 200, smokeFakeGolden
	})
	out := filepath.Join(t.TempDir(), "bench.json")
	var stdout bytes.Buffer
	err := runBench(context.Background(), []string{"--url", srv.URL, "--n", "4", "--warmup", "1", "--out", out}, &stdout, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1 of 4 requests failed; first: 500 Internal Server Error")
	assert.Contains(t, stdout.String(), "1 errors")
	var r benchReport
	b, rerr := os.ReadFile(out)
	require.NoError(t, rerr)
	require.NoError(t, json.Unmarshal(b, &r))
	assert.Equal(t, 1, r.Errors)
	assert.Equal(t, 3, r.Summary["wall"].N)
	assert.Contains(t, r.Samples[1].Error, "500")

	down := smokeFake(t, smokeFakeGolden, func(int64, map[string]any) (int, map[string][][]float64) { return 503, nil })
	err = runBench(context.Background(), []string{"--url", down.URL, "--n", "4"}, &stdout, nil)
	assert.ErrorContains(t, err, "warm-up request 1: 503")
}

// TestClientToolFlagErrors: bad flags are usage errors (exit 2) before any
// request.
func TestClientToolFlagErrors(t *testing.T) {
	srv := smokeFake(t, smokeFakeGolden, func(int64, map[string]any) (int, map[string][][]float64) {
		t.Error("no request may reach the server")
		return 500, nil
	})
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bench", "--n", "0"}, 2, "--n 0: want at least 1"},
		{[]string{"bench", "--concurrency", "0"}, 2, "--concurrency 0: want at least 1"},
		{[]string{"bench", "--warmup", "-1"}, 2, "--warmup -1: not negative"},
		{[]string{"bench", "--n", "many"}, 2, "invalid argument"},
		{[]string{"bench", "extra"}, 2, "unexpected arguments"},
		{[]string{"bench", "--protocol", "grpc"}, 2, `--protocol "grpc": want one of http, oip, zmq, openpi`},
		{[]string{"bench", "--protocol", "zmq", "--timeout", "1s"}, 1, "--protocol zmq: "},
		{[]string{"smoke", "--protocol", "openpi", "--timeout", "1s"}, 1, "--protocol openpi: "},
		{[]string{"smoke", "--seed", "-1"}, 2, "--seed -1: not negative"},
		{[]string{"smoke", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"smoke", "--timeout", "soon"}, 2, "invalid argument"},
		{[]string{"smoke", "x"}, 2, "unexpected arguments"},
	} {
		var out, errb bytes.Buffer
		args := append(c.args, "--url", srv.URL)
		code := dispatch(context.Background(), args, &out, &errb)
		assert.Equal(t, c.code, code, "%v: %s", c.args, errb.String())
		assert.Contains(t, errb.String(), c.msg, "%v", c.args)
	}
}
