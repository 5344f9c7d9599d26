package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Headers and media types of gr00tgw's HTTP API.
const (
	// RequestIDHeader names a request in the server's logs and spans;
	// the server echoes it (or the one it generated) on every answer.
	RequestIDHeader = "X-Request-ID"
	// TimeoutHeader asks the server for a shorter deadline than its
	// request_timeout, in seconds.
	TimeoutHeader = "X-Request-Timeout"
	// MIMEJSON and MIMEMsgpack are the /predict body types.
	MIMEJSON    = "application/json"
	MIMEMsgpack = "application/msgpack"
)

// HTTP is gr00tgw's HTTP API: GET /demo and POST /predict. Safe for
// concurrent use.
type HTTP struct{ endpoint }

// NewHTTP returns the HTTP API at url (http://host:port or https://…;
// a trailing slash is ignored).
func NewHTTP(url string, o Options) *HTTP { return &HTTP{newEndpoint(url, o)} }

// endpoint is what the HTTP-based protocols (http, oip) hold: the base URL
// without a trailing slash, o.HTTPClient() and o.Timeout for one request.
type endpoint struct {
	base    string
	client  *http.Client
	timeout time.Duration
}

func newEndpoint(url string, o Options) endpoint {
	return endpoint{base: strings.TrimRight(url, "/"), client: o.HTTPClient(), timeout: o.Timeout}
}

// HTTPClient is an HTTP client with o's timeout and TLS configuration
// that sends o.APIKey as "Authorization: Bearer <key>" on every request
// that has no Authorization of its own.
func (o Options) HTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if o.TLS != nil {
		t.TLSClientConfig = o.TLS
	}
	var rt http.RoundTripper = t
	if o.APIKey != "" {
		rt = bearer{key: o.APIKey, next: t}
	}
	if o.WrapTransport != nil {
		rt = o.WrapTransport(rt)
	}
	return &http.Client{Timeout: o.Timeout, Transport: rt}
}

// bearer adds "Authorization: Bearer <key>" to requests that carry none.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.next.RoundTrip(r)
}

// demoExpected is the "expected" member of GET /demo.
type demoExpected struct {
	Actions map[string][][]float64 `json:"actions"`
	Gates   struct {
		PCCMin float64 `json:"actions_pcc_min"`
	} `json:"gates"`
	Note string `json:"note"`
}

// Demo is GET /demo[?embodiment=TAG].
func (h *HTTP) Demo(ctx context.Context, embodiment string) (*Demo, error) {
	u := h.base + "/demo"
	if embodiment != "" {
		u += "?embodiment=" + embodiment
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	var d struct {
		Embodiment string          `json:"embodiment"`
		Request    json.RawMessage `json:"request"`
		Expected   demoExpected    `json:"expected"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(d.Request) == 0 {
		return nil, fmt.Errorf("GET %s: no request in the answer", u)
	}
	return &Demo{Embodiment: d.Embodiment, Request: d.Request, Golden: d.Expected.Actions,
		PCCMin: d.Expected.Gates.PCCMin, Note: d.Expected.Note}, nil
}

// Post posts body (content type ct, also the Accept type) to /predict with
// the timeout header and, when set, a request id. It returns the answer as
// JSON (a msgpack answer is re-encoded), its headers and the wall time
// from sending to the last byte; a non-200 answer is an error carrying the
// status, the request id and the body.
func (h *HTTP) Post(ctx context.Context, body []byte, ct, requestID string) ([]byte, http.Header, time.Duration, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/predict", bytes.NewReader(body))
	if err != nil {
		return nil, nil, 0, err
	}
	hreq.Header.Set("Content-Type", ct)
	hreq.Header.Set("Accept", ct)
	if h.timeout > 0 {
		hreq.Header.Set(TimeoutHeader, fmt.Sprintf("%.3f", h.timeout.Seconds()))
	}
	if requestID != "" {
		hreq.Header.Set(RequestIDHeader, requestID)
	}
	start := time.Now()
	resp, err := h.client.Do(hreq)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("POST %s/predict: %w", h.base, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	wall := time.Since(start)
	if err != nil {
		return nil, nil, wall, fmt.Errorf("reading the response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.Header, wall, fmt.Errorf("%s (request id %s): %s", resp.Status, resp.Header.Get(RequestIDHeader), strings.TrimSpace(string(rb)))
	}
	if strings.Contains(resp.Header.Get("Content-Type"), "msgpack") {
		var v any
		if err := msgpack.Unmarshal(rb, &v); err != nil {
			return nil, resp.Header, wall, fmt.Errorf("msgpack response: %w", err)
		}
		if rb, err = json.Marshal(v); err != nil {
			return nil, resp.Header, wall, fmt.Errorf("msgpack response to JSON: %w", err)
		}
	}
	return rb, resp.Header, wall, nil
}

// Predict posts req as JSON and parses the answer.
func (h *HTTP) Predict(ctx context.Context, req json.RawMessage) (*Prediction, error) {
	rb, _, wall, err := h.Post(ctx, req, MIMEJSON, "")
	if err != nil {
		return nil, err
	}
	pr, err := ParsePrediction(rb)
	if err != nil {
		return nil, err
	}
	pr.Wall = wall
	return pr, nil
}

// Close closes the idle connections.
func (h *HTTP) Close() error {
	h.client.CloseIdleConnections()
	return nil
}

// ParsePrediction reads a /predict JSON answer; one without actions is an
// error.
func ParsePrediction(b []byte) (*Prediction, error) {
	var r struct {
		Actions    map[string][][]float64 `json:"actions"`
		Keys       []string               `json:"action_keys"`
		Timing     map[string]any         `json:"timing_ms"`
		Model      string                 `json:"model"`
		Version    string                 `json:"version"`
		Embodiment string                 `json:"embodiment"`
		RequestID  string                 `json:"request_id"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("response: %w", err)
	}
	if len(r.Actions) == 0 {
		return nil, errors.New("response: no actions")
	}
	p := &Prediction{Actions: r.Actions, Keys: r.Keys, Timing: map[string]float64{},
		Model: r.Model, Version: r.Version, Embodiment: r.Embodiment, RequestID: r.RequestID}
	flattenTiming(p.Timing, "", r.Timing)
	return p, nil
}

// flattenTiming copies the numbers of m into out, nested maps as
// prefix.key.
func flattenTiming(out map[string]float64, prefix string, m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case float64:
			out[prefix+k] = x
		case map[string]any:
			flattenTiming(out, prefix+k+".", x)
		}
	}
}
