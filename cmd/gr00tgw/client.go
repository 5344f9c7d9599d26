package main

// The client side shared by predict, smoke and bench: GET /demo, POST
// /predict, the comparison with a golden, and the protocol seam smoke and
// bench talk through (one implementation per wire protocol).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/service"
)

// demoCase is GET /demo of one embodiment: the request to post and what
// its answer should be.
type demoCase struct {
	Embodiment string
	// Request is the ready-to-post /predict JSON body (with the reference
	// noise).
	Request json.RawMessage
	// Golden maps action group → [horizon][dim]; nil when the server has
	// no golden for this checkpoint (Note then says so).
	Golden map[string][][]float64
	// PCCMin is the server's actions PCC gate.
	PCCMin float64
	Note   string
}

// demoExpected is the "expected" member of GET /demo.
type demoExpected struct {
	Actions map[string][][]float64 `json:"actions"`
	Gates   struct {
		PCCMin float64 `json:"actions_pcc_min"`
	} `json:"gates"`
	Note string `json:"note"`
}

// fetchDemo is GET base/demo[?embodiment=TAG].
func fetchDemo(ctx context.Context, client *http.Client, base, embodiment string) (*demoCase, error) {
	u := base + "/demo"
	if embodiment != "" {
		u += "?embodiment=" + embodiment
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
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
	return &demoCase{Embodiment: d.Embodiment, Request: d.Request, Golden: d.Expected.Actions,
		PCCMin: d.Expected.Gates.PCCMin, Note: d.Expected.Note}, nil
}

// postPredictBody posts body (content type ct, also the Accept type) to
// base/predict with the timeout header and, when set, a request id. It
// returns the answer as JSON (a msgpack answer is re-encoded), its headers
// and the wall time from sending to the last byte; a non-200 answer is an
// error carrying the status, the request id and the body.
func postPredictBody(ctx context.Context, client *http.Client, base string, body []byte, ct string, timeout time.Duration, rid string) ([]byte, http.Header, time.Duration, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/predict", bytes.NewReader(body))
	if err != nil {
		return nil, nil, 0, err
	}
	hreq.Header.Set("Content-Type", ct)
	hreq.Header.Set("Accept", ct)
	if timeout > 0 {
		hreq.Header.Set(service.TimeoutHeader, fmt.Sprintf("%.3f", timeout.Seconds()))
	}
	if rid != "" {
		hreq.Header.Set(service.RequestIDHeader, rid)
	}
	start := time.Now()
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("POST %s/predict: %w", base, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	wall := time.Since(start)
	if err != nil {
		return nil, nil, wall, fmt.Errorf("reading the response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.Header, wall, fmt.Errorf("%s (request id %s): %s", resp.Status, resp.Header.Get(service.RequestIDHeader), strings.TrimSpace(string(rb)))
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

// groupDiff is how one action group compares with the golden.
type groupDiff struct {
	PCC    jsonFloat `json:"pcc"`
	MaxAbs jsonFloat `json:"max_abs_diff"`
}

// goldenDiff is how a set of actions compares with the golden: all groups
// flattened together, and each group.
type goldenDiff struct {
	PCC      jsonFloat            `json:"pcc"`
	MaxAbs   jsonFloat            `json:"max_abs_diff"`
	PerGroup map[string]groupDiff `json:"per_group"`
	// Order is the golden's groups in report order.
	Order []string `json:"-"`
}

// compareGolden compares got with want group by group (order first, then
// any other golden group in name order). A group missing from got or of
// another shape is an error naming it.
func compareGolden(got, want map[string][][]float64, order []string) (goldenDiff, error) {
	d := goldenDiff{PerGroup: map[string]groupDiff{}, Order: reportOrder(want, order)}
	var all, allWant []float64
	maxAll := 0.0
	for _, k := range d.Order {
		g, ok := got[k]
		if !ok {
			return d, fmt.Errorf("group %s: in the golden, not in the answer", k)
		}
		a, err := flatRows(g, want[k])
		if err != nil {
			return d, fmt.Errorf("group %s: %w", k, err)
		}
		b := flatten(want[k])
		md := maxAbsDiff(a, b)
		d.PerGroup[k] = groupDiff{PCC: jsonFloat(tensor.PCC(a, b)), MaxAbs: jsonFloat(md)}
		maxAll = math.Max(maxAll, md)
		all, allWant = append(all, a...), append(allWant, b...)
	}
	d.PCC, d.MaxAbs = jsonFloat(tensor.PCC(all, allWant)), jsonFloat(maxAll)
	return d, nil
}

// reportOrder is the groups of m: those in order first, then the rest by
// name.
func reportOrder[V any](m map[string]V, order []string) []string {
	out := make([]string, 0, len(m))
	seen := map[string]bool{}
	for _, k := range order {
		if _, ok := m[k]; ok && !seen[k] {
			out, seen[k] = append(out, k), true
		}
	}
	for _, k := range sortedKeys(m) {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// flatRows flattens got after checking it has want's shape.
func flatRows(got, want [][]float64) ([]float64, error) {
	if len(got) != len(want) {
		return nil, fmt.Errorf("%d steps, golden %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			return nil, fmt.Errorf("step %d: %d values, golden %d", i, len(got[i]), len(want[i]))
		}
	}
	return flatten(got), nil
}

func flatten(rows [][]float64) []float64 {
	var out []float64
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// maxAbsDiff is max|a−b| (NaN when any difference is NaN).
func maxAbsDiff(a, b []float64) float64 {
	md := 0.0
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.NaN()
		}
		md = math.Max(md, d)
	}
	return md
}

// actionsDiff compares two answers to the same request: whether they are
// bit-identical and their largest difference (+Inf when the groups or
// shapes differ).
func actionsDiff(a, b map[string][][]float64) (identical bool, maxDiff float64) {
	if len(a) != len(b) {
		return false, math.Inf(1)
	}
	identical = true
	for k, ra := range a {
		rb, ok := b[k]
		if !ok {
			return false, math.Inf(1)
		}
		fb, err := flatRows(rb, ra)
		if err != nil {
			return false, math.Inf(1)
		}
		fa := flatten(ra)
		for i := range fa {
			if math.Float64bits(fa[i]) != math.Float64bits(fb[i]) {
				identical = false
			}
		}
		maxDiff = math.Max(maxDiff, maxAbsDiff(fa, fb))
	}
	return identical, maxDiff
}

// jsonFloat is a float64 whose JSON form is null when it is not finite
// (a PCC of a constant group is NaN).
type jsonFloat float64

// MarshalJSON writes the number, or null for NaN and ±Inf.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// The protocol seam of smoke and bench.

// prediction is one answered /predict-shaped request.
type prediction struct {
	Actions map[string][][]float64
	// Keys is the action groups in the embodiment's order.
	Keys []string
	// Timing is the server's timing_ms, nested maps flattened with dots
	// (device_stages.vision).
	Timing                     map[string]float64
	Model, Version, Embodiment string
	RequestID                  string
	// Wall is the client's time from sending to the last byte.
	Wall time.Duration
}

// protocol is how smoke and bench talk to a running gateway; each wire
// protocol (--protocol) is one implementation.
type protocol interface {
	// fetchDemo returns an embodiment's demo ("": the default's).
	fetchDemo(ctx context.Context, embodiment string) (*demoCase, error)
	// predict sends req, a /predict JSON body, in the protocol's own form.
	predict(ctx context.Context, req json.RawMessage) (*prediction, error)
	close() error
}

// protocolNames lists --protocol's values in help order.
var protocolNames = []string{"http", "oip", "zmq", "openpi"}

// dialProtocol returns the implementation of protocol name for url; the
// robot protocols fetch the demo from the HTTP API at demoURL.
func dialProtocol(ctx context.Context, name, url, demoURL string, timeout time.Duration, auth *authOptions) (protocol, error) {
	switch name {
	case "http":
		return newHTTPProtocol(url, timeout, auth)
	case "zmq", "openpi":
		return dialRobot(ctx, name, url, demoURL, timeout, auth)
	case "oip": // on the gateway's HTTP port: the demo comes from the same URL
		return dialRobot(ctx, name, url, url, timeout, auth)
	}
	return nil, fmt.Errorf("%w: --protocol %q: want one of %s", errUsage, name, strings.Join(protocolNames, ", "))
}

// httpProtocol is gr00tgw's HTTP API: GET /demo, POST /predict in JSON.
type httpProtocol struct {
	base    string
	client  *http.Client
	timeout time.Duration
}

func newHTTPProtocol(url string, timeout time.Duration, auth *authOptions) (*httpProtocol, error) {
	client, err := auth.httpClient(timeout)
	if err != nil {
		return nil, err
	}
	return &httpProtocol{base: strings.TrimRight(url, "/"), client: client, timeout: timeout}, nil
}

func (p *httpProtocol) fetchDemo(ctx context.Context, embodiment string) (*demoCase, error) {
	return fetchDemo(ctx, p.client, p.base, embodiment)
}

func (p *httpProtocol) predict(ctx context.Context, req json.RawMessage) (*prediction, error) {
	rb, _, wall, err := postPredictBody(ctx, p.client, p.base, req, "application/json", p.timeout, "")
	if err != nil {
		return nil, err
	}
	pr, err := parsePrediction(rb)
	if err != nil {
		return nil, err
	}
	pr.Wall = wall
	return pr, nil
}

func (p *httpProtocol) close() error {
	p.client.CloseIdleConnections()
	return nil
}

// parsePrediction reads a /predict JSON answer.
func parsePrediction(b []byte) (*prediction, error) {
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
	p := &prediction{Actions: r.Actions, Keys: r.Keys, Timing: map[string]float64{},
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

// clientOptions are the flags smoke and bench share.
type clientOptions struct {
	url, protocol, embodiment, out, demoURL string
	timeout, wait                           time.Duration
	auth                                    *authOptions
}

// addClientFlags defines the shared flags on fs.
func addClientFlags(fs *pflag.FlagSet) *clientOptions {
	o := &clientOptions{}
	fs.StringVar(&o.url, "url", "http://127.0.0.1:20000", "server address: http://HOST:PORT, tcp://HOST:PORT (zmq), ws://HOST:PORT (openpi)")
	fs.StringVar(&o.demoURL, "demo-url", "http://127.0.0.1:20000", "the gateway's HTTP API, for the demo and its reference (--protocol zmq|openpi)")
	fs.StringVar(&o.protocol, "protocol", "http", "wire protocol: "+strings.Join(protocolNames, "|"))
	fs.StringVar(&o.embodiment, "embodiment", "", "embodiment tag whose demo to use (empty: the server's default)")
	fs.StringVar(&o.out, "out", "", "also write the report as JSON here")
	fs.DurationVar(&o.timeout, "timeout", 120*time.Second, "per-request timeout (also sent as "+service.TimeoutHeader+")")
	fs.DurationVar(&o.wait, "wait", 0, "retry fetching the demo this long while the server starts (0: no retry)")
	o.auth = addAuthFlags(fs)
	return o
}

// connect dials the protocol and fetches the demo, retrying the fetch for
// up to --wait while the server is not ready.
func (o *clientOptions) connect(ctx context.Context) (protocol, *demoCase, error) {
	p, err := dialProtocol(ctx, o.protocol, o.url, o.demoURL, o.timeout, o.auth)
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(o.wait)
	for {
		d, err := p.fetchDemo(ctx, o.embodiment)
		if err == nil {
			return p, d, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = p.close()
			return nil, nil, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// writeJSONFile writes v, indented, to path.
func writeJSONFile(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
