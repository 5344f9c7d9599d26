package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// fakeAPI answers GET /demo and POST /predict as gr00tgw serve does, in
// JSON or msgpack as asked, and records the last /predict's headers.
func fakeAPI(t *testing.T, last *atomic.Pointer[http.Header]) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/demo":
			emb := r.URL.Query().Get("embodiment")
			_ = json.NewEncoder(w).Encode(map[string]any{"embodiment": emb,
				"request":  map[string]any{"instruction": "x", "noise": [][]float64{{0.1}}},
				"expected": map[string]any{"actions": map[string][][]float64{"a": {{1, 2}}}, "gates": map[string]any{"actions_pcc_min": 0.99}, "note": "n"}})
		case "/predict":
			h := r.Header.Clone()
			last.Store(&h)
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), "refuse") {
				w.Header().Set(RequestIDHeader, "rid-9")
				http.Error(w, `{"error":"refused"}`, http.StatusBadRequest)
				return
			}
			resp := map[string]any{"actions": map[string][][]float64{"a": {{1, 2}}}, "action_keys": []string{"a"},
				"model": "m", "version": "v", "embodiment": "e", "request_id": "r1",
				"timing_ms": map[string]any{"device": 1.5, "total": 2.5, "device_stages": map[string]any{"vision": 0.5}}}
			if r.Header.Get("Accept") == MIMEMsgpack {
				w.Header().Set("Content-Type", MIMEMsgpack)
				b, _ := msgpack.Marshal(resp)
				_, _ = w.Write(b)
				return
			}
			_ = json.NewEncoder(w).Encode(resp)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTP: the demo, a JSON prediction with its timings flattened, a
// msgpack answer re-encoded as JSON, the headers sent, and a refusal
// carrying status, request id and body.
func TestHTTP(t *testing.T) {
	var last atomic.Pointer[http.Header]
	srv := fakeAPI(t, &last)
	ctx := context.Background()
	p, err := Dial(ctx, "http", srv.URL+"/", Options{Timeout: 2500 * time.Millisecond, APIKey: "k1"})
	require.NoError(t, err)
	defer p.Close()

	d, err := p.Demo(ctx, "bot")
	require.NoError(t, err)
	assert.Equal(t, &Demo{Embodiment: "bot", Request: json.RawMessage(`{"instruction":"x","noise":[[0.1]]}`),
		Golden: map[string][][]float64{"a": {{1, 2}}}, PCCMin: 0.99, Note: "n"}, d)

	pr, err := p.Predict(ctx, d.Request)
	require.NoError(t, err)
	assert.Equal(t, map[string][][]float64{"a": {{1, 2}}}, pr.Actions)
	assert.Equal(t, []string{"a"}, pr.Keys)
	assert.Equal(t, map[string]float64{"device": 1.5, "total": 2.5, "device_stages.vision": 0.5}, pr.Timing)
	assert.Equal(t, []string{"m", "v", "e", "r1"}, []string{pr.Model, pr.Version, pr.Embodiment, pr.RequestID})
	assert.Positive(t, pr.Wall)
	h := *last.Load()
	assert.Equal(t, "Bearer k1", h.Get("Authorization"))
	assert.Equal(t, "2.500", h.Get(TimeoutHeader))
	assert.Equal(t, MIMEJSON, h.Get("Content-Type"))
	assert.Empty(t, h.Get(RequestIDHeader))

	api := NewHTTP(srv.URL, Options{})
	rb, _, _, err := api.Post(ctx, []byte{0x80}, MIMEMsgpack, "my-id")
	require.NoError(t, err)
	assert.True(t, json.Valid(rb), "%s", rb)
	mp, err := ParsePrediction(rb)
	require.NoError(t, err)
	assert.Equal(t, map[string][][]float64{"a": {{1, 2}}}, mp.Actions)
	h = *last.Load()
	assert.Equal(t, "my-id", h.Get(RequestIDHeader))
	assert.Empty(t, h.Get("Authorization"), "no key, no header")
	assert.Empty(t, h.Get(TimeoutHeader), "no timeout, no header")

	_, err = p.Predict(ctx, json.RawMessage(`{"instruction":"refuse"}`))
	assert.EqualError(t, err, `400 Bad Request (request id rid-9): {"error":"refused"}`)
	_, err = NewHTTP(srv.URL+"/nope", Options{}).Demo(ctx, "")
	assert.ErrorContains(t, err, "GET "+srv.URL+"/nope/demo: 404 Not Found")
}

// TestParsePrediction: an answer without actions, or not JSON, is an
// error.
func TestParsePrediction(t *testing.T) {
	for _, c := range []struct{ body, err string }{
		{`{"actions":{}}`, "response: no actions"},
		{`{"timing_ms":{"device":1}}`, "response: no actions"},
		{`[1]`, "response: json: cannot unmarshal"},
	} {
		_, err := ParsePrediction([]byte(c.body))
		assert.ErrorContains(t, err, c.err, c.body)
	}
}

// TestDial: an unknown protocol wraps ErrUnknownProtocol and lists the
// known ones; an unreachable robot endpoint is an error at Dial.
func TestDial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, "grpc", "http://127.0.0.1:1", Options{})
	require.ErrorIs(t, err, ErrUnknownProtocol)
	assert.EqualError(t, err, `unknown protocol "grpc": want one of http, oip, zmq, openpi`)

	ln := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(ln.URL, "http://")
	ln.Close() // nothing listens there now
	for _, c := range []struct{ name, url, err string }{
		{"zmq", "tcp://" + addr, "zmqclient: "},
		{"openpi", "ws://" + addr, "openpiclient: "},
	} {
		_, err := Dial(ctx, c.name, c.url, Options{Timeout: time.Second})
		assert.ErrorContains(t, err, c.err, c.name)
	}
}

// TestOptionsHTTPClient: the key is added only where the request has no
// Authorization of its own; WrapTransport sees every request.
func TestOptionsHTTPClient(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Store(r.Header.Get("Authorization")) }))
	defer srv.Close()
	var wrapped atomic.Int32
	c := Options{APIKey: "k", WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) { wrapped.Add(1); return rt.RoundTrip(r) })
	}}.HTTPClient()
	for _, c2 := range []struct{ set, want string }{{"", "Bearer k"}, {"Api-Key other", "Api-Key other"}} {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		if c2.set != "" {
			req.Header.Set("Authorization", c2.set)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, c2.want, got.Load())
	}
	assert.Equal(t, int32(2), wrapped.Load())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTLSConfig: no file trusts the system roots; a missing file or one
// without a certificate is an error naming it.
func TestTLSConfig(t *testing.T) {
	cfg, err := TLSConfig("")
	require.NoError(t, err)
	assert.Nil(t, cfg.RootCAs)
	dir := t.TempDir()
	_, err = TLSConfig(filepath.Join(dir, "missing.pem"))
	assert.ErrorContains(t, err, "missing.pem")
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not pem"), 0o600))
	_, err = TLSConfig(junk)
	assert.EqualError(t, err, "ca file "+junk+": no PEM certificate")
}
