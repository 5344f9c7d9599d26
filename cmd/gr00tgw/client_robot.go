package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/gateway/openpi/openpiclient"
	"github.com/gr00tgw/gr00tgw/gateway/rawobs"
	"github.com/gr00tgw/gr00tgw/gateway/zmq/zmqclient"
	"github.com/gr00tgw/gr00tgw/wire"
)

// The robot protocols behind smoke and bench (--protocol zmq|openpi|oip).
// They carry raw uint8 frames and a seed (no explicit noise here), and have
// no /demo: the demo comes from the gateway's HTTP API (--demo-url), sent
// with a seed, and its reference is the same request answered by HTTP
// /predict — the protocols must reproduce it bit for bit.

// robotDemoSeed seeds the demo sent over a robot protocol.
const robotDemoSeed = 42

// robotTransport is one robot protocol's client.
type robotTransport interface {
	send(ctx context.Context, o *rawobs.Observation, embodiment string, seed uint64, keys []string) (map[string][][]float64, map[string]float64, error)
	close() error
}

// robotProtocol adapts a robotTransport to smoke and bench's protocol.
type robotProtocol struct {
	name string
	http *httpProtocol // the demo and its reference
	t    robotTransport
	keys []string // action keys of the last demo, in order
	tag  string
}

func (p *robotProtocol) fetchDemo(ctx context.Context, embodiment string) (*demoCase, error) {
	d, err := p.http.fetchDemo(ctx, embodiment)
	if err != nil {
		return nil, err
	}
	req, err := withSeed(d.Request, robotDemoSeed)
	if err != nil {
		return nil, err
	}
	ref, err := p.http.predict(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reference (HTTP /predict of the seeded demo): %w", err)
	}
	d.Request, d.Golden = req, ref.Actions
	d.PCCMin = 0.999999
	d.Note = fmt.Sprintf("reference: HTTP /predict of the same pixels with seed %d (%s carries no explicit noise); the actions must agree bit for bit", robotDemoSeed, p.name)
	p.keys, p.tag = ref.Keys, ref.Embodiment
	if d.Embodiment == "" {
		d.Embodiment = ref.Embodiment
	}
	return d, nil
}

func (p *robotProtocol) predict(ctx context.Context, req json.RawMessage) (*prediction, error) {
	o, err := rawobs.FromPredictJSON(req)
	if err != nil {
		return nil, err
	}
	seed := uint64(robotDemoSeed)
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
	return &prediction{Actions: acts, Keys: p.keys, Timing: timing, Embodiment: tag, Wall: time.Since(t0)}, nil
}

func (p *robotProtocol) close() error {
	p.http.close()
	return p.t.close()
}

// dialRobot connects to a robot-protocol endpoint at url, with the
// gateway's HTTP API at demoURL.
func dialRobot(ctx context.Context, name, url, demoURL string, timeout time.Duration, auth *authOptions) (protocol, error) {
	h, err := newHTTPProtocol(demoURL, timeout, auth)
	if err != nil {
		return nil, err
	}
	p := &robotProtocol{name: name, http: h}
	switch name {
	case "zmq":
		p.t, err = dialZMQ(ctx, url, timeout, auth.key())
	case "openpi":
		p.t, err = dialOpenPI(ctx, url, auth.key())
	case "oip":
		p.t, err = dialOIP(url, timeout, auth)
	}
	if err != nil {
		return nil, fmt.Errorf("--protocol %s: %w", name, err)
	}
	return p, nil
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
	c    *zmqclient.Client
	lang map[string]string // embodiment → language key
}

func dialZMQ(ctx context.Context, url string, timeout time.Duration, apiKey string) (*zmqTransport, error) {
	addr := strings.TrimPrefix(url, "tcp://")
	c, err := zmqclient.Dial(ctx, addr, zmqclient.Options{Timeout: timeout, Token: apiKey})
	if err != nil {
		return nil, err
	}
	return &zmqTransport{c: c, lang: map[string]string{}}, nil
}

func (t *zmqTransport) send(ctx context.Context, o *rawobs.Observation, tag string, seed uint64, _ []string) (map[string][][]float64, map[string]float64, error) {
	key, ok := t.lang[tag]
	if !ok {
		mc, err := t.c.GetModalityConfig(ctx, tag)
		if err != nil {
			return nil, nil, fmt.Errorf("get_modality_config: %w", err)
		}
		if l, ok := mc["language"]; ok && len(l.ModalityKeys) > 0 {
			key = l.ModalityKeys[0]
		}
		t.lang[tag] = key
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

// openpiTransport is openpi's websocket policy protocol.
type openpiTransport struct{ c *openpiclient.Client }

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
	reply, err := t.c.Infer(ctx, m)
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
