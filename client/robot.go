package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gr00tgw/gr00tgw/client/openpiclient"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/client/zmqclient"
	"github.com/gr00tgw/gr00tgw/wire"
)

// The robot protocols (zmq, openpi, oip) carry raw uint8 frames and a seed
// (no explicit noise here), and have no /demo: the demo comes from the
// gateway's HTTP API (Options.DemoURL), sent with a seed, and its
// reference is the same request answered by HTTP /predict — the protocols
// must reproduce it bit for bit.

// RobotDemoSeed seeds the demo sent over a robot protocol (and a request
// without a seed of its own).
const RobotDemoSeed = 42

// robotTransport is one robot protocol's client.
type robotTransport interface {
	send(ctx context.Context, o *rawobs.Observation, embodiment string, seed uint64, keys []string) (map[string][][]float64, map[string]float64, error)
	close() error
}

// robotProtocol adapts a robotTransport to Protocol.
type robotProtocol struct {
	name string
	http *HTTP // the demo and its reference
	t    robotTransport
	keys []string // action keys of the last demo, in order
	tag  string
}

// Demo fetches the HTTP demo, puts RobotDemoSeed in place of its noise and
// makes HTTP /predict's answer to that request the golden, with a gate
// that only bit-identical actions pass.
func (p *robotProtocol) Demo(ctx context.Context, embodiment string) (*Demo, error) {
	d, err := p.http.Demo(ctx, embodiment)
	if err != nil {
		return nil, err
	}
	req, err := WithSeed(d.Request, RobotDemoSeed)
	if err != nil {
		return nil, err
	}
	ref, err := p.http.Predict(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reference (HTTP /predict of the seeded demo): %w", err)
	}
	d.Request, d.Golden = req, ref.Actions
	d.PCCMin = 0.999999
	d.Note = fmt.Sprintf("reference: HTTP /predict of the same pixels with seed %d (%s carries no explicit noise); the actions must agree bit for bit", RobotDemoSeed, p.name)
	p.keys, p.tag = ref.Keys, ref.Embodiment
	if d.Embodiment == "" {
		d.Embodiment = ref.Embodiment
	}
	return d, nil
}

// Predict decodes req's frames to raw pixels and sends them with req's
// seed (RobotDemoSeed when it has none) to req's embodiment (the last
// demo's when it names none).
func (p *robotProtocol) Predict(ctx context.Context, req json.RawMessage) (*Prediction, error) {
	o, err := rawobs.FromPredictJSON(req)
	if err != nil {
		return nil, err
	}
	seed := uint64(RobotDemoSeed)
	if o.Seed != nil {
		seed = *o.Seed
	}
	tag := o.Embodiment
	if tag == "" {
		tag = p.tag
	}
	t0 := time.Now()
	acts, timing, err := p.t.send(ctx, o, tag, seed, p.keys)
	if err != nil {
		return nil, err
	}
	return &Prediction{Actions: acts, Keys: p.keys, Timing: timing, Embodiment: tag, Wall: time.Since(t0)}, nil
}

func (p *robotProtocol) Close() error {
	p.http.Close()
	return p.t.close()
}

// dialRobot connects to a robot-protocol endpoint at url, with the
// gateway's HTTP API at demoURL.
func dialRobot(ctx context.Context, name, url, demoURL string, o Options) (Protocol, error) {
	p := &robotProtocol{name: name, http: NewHTTP(demoURL, o)}
	var err error
	switch name {
	case "zmq":
		p.t, err = dialZMQ(ctx, url, o.Timeout, o.APIKey)
	case "openpi":
		p.t, err = dialOpenPI(ctx, url, o.APIKey)
	case "oip":
		p.t = newOIP(url, o)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// WithSeed returns the request JSON object req with "seed" in place of
// "noise", everything else kept.
func WithSeed(req json.RawMessage, seed int) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(req, &m); err != nil {
		return nil, fmt.Errorf("demo request: %w", err)
	}
	delete(m, "noise")
	m["seed"] = json.RawMessage(fmt.Sprint(seed))
	return json.Marshal(m)
}

// rows turns a float array of shape (..., H, D) — a leading batch of one
// dropped — into H rows of D.
func rows(a *wire.Array) ([][]float64, error) {
	shape := a.Shape
	for len(shape) > 2 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("action of shape %s, want (horizon, dim)", wire.ShapeString(a.Shape))
	}
	vals := a.Float64s()
	if vals == nil || len(vals) != shape[0]*shape[1] {
		return nil, fmt.Errorf("action array %s is not a float array", a)
	}
	out := make([][]float64, shape[0])
	for i := range out {
		out[i] = vals[i*shape[1] : (i+1)*shape[1]]
	}
	return out, nil
}

// zmqTransport is Isaac-GR00T's ZeroMQ policy protocol (nested form).
type zmqTransport struct {
	c *zmqclient.Client

	mu   sync.Mutex
	lang map[string]string // embodiment → language key
}

func dialZMQ(ctx context.Context, url string, timeout time.Duration, apiKey string) (*zmqTransport, error) {
	c, err := zmqclient.Dial(ctx, url, zmqclient.Options{Timeout: timeout, Token: apiKey})
	if err != nil {
		return nil, err
	}
	return &zmqTransport{c: c, lang: map[string]string{}}, nil
}

// languageKey is the embodiment's language key, asked once per embodiment
// (get_modality_config).
func (t *zmqTransport) languageKey(ctx context.Context, tag string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if key, ok := t.lang[tag]; ok {
		return key, nil
	}
	mc, err := t.c.GetModalityConfig(ctx, tag)
	if err != nil {
		return "", fmt.Errorf("get_modality_config: %w", err)
	}
	key := ""
	if l, ok := mc["language"]; ok && len(l.ModalityKeys) > 0 {
		key = l.ModalityKeys[0]
	}
	t.lang[tag] = key
	return key, nil
}

func (t *zmqTransport) send(ctx context.Context, o *rawobs.Observation, tag string, seed uint64, _ []string) (map[string][][]float64, map[string]float64, error) {
	key, err := t.languageKey(ctx, tag)
	if err != nil {
		return nil, nil, err
	}
	obs, err := zmqclient.FromRaw(o, key)
	if err != nil {
		return nil, nil, err
	}
	got, err := t.c.GetAction(ctx, obs, zmqclient.Nested, map[string]any{"embodiment": tag, "seed": int64(seed)})
	if err != nil {
		return nil, nil, err
	}
	acts := make(map[string][][]float64, len(got))
	for k, a := range got {
		if acts[k], err = rows(a); err != nil {
			return nil, nil, fmt.Errorf("action %s: %w", k, err)
		}
	}
	return acts, map[string]float64{}, nil
}

func (t *zmqTransport) close() error { return t.c.Close() }

// openpiTransport is openpi's websocket policy protocol: one observation
// at a time on the connection, so concurrent sends take turns.
type openpiTransport struct {
	mu sync.Mutex
	c  *openpiclient.Client
}

func dialOpenPI(ctx context.Context, url, apiKey string) (*openpiTransport, error) {
	var h http.Header
	if apiKey != "" {
		h = http.Header{"Authorization": {"Bearer " + apiKey}}
	}
	c, err := openpiclient.Dial(ctx, url, openpiclient.Options{Header: h})
	if err != nil {
		return nil, err
	}
	return &openpiTransport{c: c}, nil
}

func (t *openpiTransport) send(ctx context.Context, o *rawobs.Observation, tag string, seed uint64, _ []string) (map[string][][]float64, map[string]float64, error) {
	single := true
	for _, fs := range o.Frames {
		single = single && len(fs) == 1
	}
	m, err := openpiclient.FromRaw(o, single)
	if err != nil {
		return nil, nil, err
	}
	if o.Embodiment == "" && tag != "" {
		m.Set("embodiment", tag)
	}
	m.Set("seed", int64(seed))
	t.mu.Lock()
	reply, err := t.c.Infer(ctx, m)
	t.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	r, err := openpiclient.ParseResult(reply)
	if err != nil {
		return nil, nil, err
	}
	acts := make(map[string][][]float64, len(r.Groups))
	for k, a := range r.Groups {
		if acts[k], err = rows(a); err != nil {
			return nil, nil, fmt.Errorf("action_groups.%s: %w", k, err)
		}
	}
	timing := map[string]float64{"infer": r.InferMS}
	if r.PrevTotalMS >= 0 {
		timing["prev_total"] = r.PrevTotalMS
	}
	return acts, timing, nil
}

func (t *openpiTransport) close() error { return t.c.Close() }
