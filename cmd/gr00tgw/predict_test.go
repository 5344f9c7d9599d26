package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// fakeGateway answers /demo and /predict like gr00tgw serve, returning
// actions (JSON or msgpack, as asked).
func fakeGateway(t *testing.T, actions map[string][][]float64) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/demo":
			_ = json.NewEncoder(w).Encode(map[string]any{
				"request":  map[string]any{"images": map[string]any{"cam": []string{"aGVsbG8="}}, "instruction": "x"},
				"expected": map[string]any{"actions": map[string][][]float64{"a": {{1, 2}, {3, 4}}}, "gates": map[string]any{"actions_pcc_min": 0.99}},
			})
		case "/predict":
			body, _ := io.ReadAll(r.Body)
			resp := map[string]any{"actions": actions, "timing_ms": map[string]any{"device": 1.5, "total": 2.5}}
			if strings.Contains(r.Header.Get("Content-Type"), "msgpack") {
				var req map[string]any
				require.NoError(t, msgpack.Unmarshal(body, &req))
				frames := req["images"].(map[string]any)["cam"].([]any)
				assert.Equal(t, []byte("hello"), frames[0], "frames travel as bin")
				w.Header().Set("Content-Type", "application/msgpack")
				b, _ := msgpack.Marshal(resp)
				_, _ = w.Write(b)
				return
			}
			assert.True(t, json.Valid(body))
			assert.NotEmpty(t, r.Header.Get("X-Request-Timeout"))
			_ = json.NewEncoder(w).Encode(resp)
		default:
			http.NotFound(w, r)
		}
	}))
}

func TestPredictClientDemo(t *testing.T) {
	good := fakeGateway(t, map[string][][]float64{"a": {{1, 2}, {3, 4.01}}})
	defer good.Close()
	require.NoError(t, runPredictClient(context.Background(), []string{"--url", good.URL}))
	require.NoError(t, runPredictClient(context.Background(), []string{"--url", good.URL, "--msgpack"}))

	bad := fakeGateway(t, map[string][][]float64{"a": {{4, 3}, {2, 1}}})
	defer bad.Close()
	err := runPredictClient(context.Background(), []string{"--url", bad.URL})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "below")
}

func TestPredictClientRequestFile(t *testing.T) {
	srv := fakeGateway(t, map[string][][]float64{"a": {{1}}})
	defer srv.Close()
	dir := t.TempDir()
	req := filepath.Join(dir, "req.json")
	require.NoError(t, os.WriteFile(req, []byte(`{"images":{"cam":["aGVsbG8="]},"instruction":"x"}`), 0o600))
	out := filepath.Join(dir, "out.json")
	require.NoError(t, runPredictClient(context.Background(), []string{"--url", srv.URL, "--request", req, "--out", out}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"actions"`)
	require.NoError(t, runPredictClient(context.Background(), []string{"--url", srv.URL, "--request", req, "--msgpack", "--out", out}))

	// Non-200 answers become errors carrying the status and body.
	err = runPredictClient(context.Background(), []string{"--url", srv.URL + "/nope", "--request", req})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
	require.ErrorIs(t, runPredictClient(context.Background(), []string{"--bogus"}), errUsage)
}

// TestPredictClientEmbodiment: --embodiment asks for that embodiment's demo
// (GET /demo?embodiment=TAG) or sets the request's embodiment.
func TestPredictClientEmbodiment(t *testing.T) {
	var demoQuery, predicted string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/demo":
			demoQuery = r.URL.Query().Get("embodiment")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"request":  map[string]any{"images": map[string]any{"cam": []string{"aGVsbG8="}}, "instruction": "x", "embodiment": demoQuery},
				"expected": map[string]any{"actions": map[string][][]float64{"a": {{1, 2}, {3, 4}}}, "gates": map[string]any{"actions_pcc_min": 0.99}},
			})
		case "/predict":
			var req struct {
				Embodiment string `json:"embodiment"`
			}
			require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
			predicted = req.Embodiment
			_ = json.NewEncoder(w).Encode(map[string]any{"actions": map[string][][]float64{"a": {{1, 2}, {3, 4}}}})
		}
	}))
	defer srv.Close()
	require.NoError(t, runPredictClient(context.Background(), []string{"--url", srv.URL, "--embodiment", "libero_sim"}))
	assert.Equal(t, "libero_sim", demoQuery)
	assert.Equal(t, "libero_sim", predicted)

	req := filepath.Join(t.TempDir(), "req.json")
	require.NoError(t, os.WriteFile(req, []byte(`{"images":{"cam":["aGVsbG8="]},"instruction":"x","embodiment":"other"}`), 0o600))
	require.NoError(t, runPredictClient(context.Background(), []string{"--url", srv.URL, "--request", req, "--embodiment", "libero_sim", "--out", filepath.Join(t.TempDir(), "o.json")}))
	assert.Equal(t, "libero_sim", predicted)
}
