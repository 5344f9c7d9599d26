// Package client talks to a running gr00tgw. A Protocol fetches an
// embodiment's demo and sends /predict-shaped requests; Dial returns the
// implementation of one wire protocol: gr00tgw's HTTP API ("http"), the
// Open Inference Protocol v2 on the same port ("oip"), Isaac-GR00T's
// ZeroMQ policy protocol ("zmq") and openpi's websocket protocol
// ("openpi"). `gr00tgw predict`, `smoke` and `bench` are built on it.
//
// The wire-level clients are the subpackages — zmqclient, openpiclient,
// oipclient — and rawobs turns a /predict JSON body into the raw
// observation the robot protocols carry. Nothing here imports server code:
// the dependency closure is the standard library, the wire codec, core's
// image decoder, api/oip, msgpack and the websocket library (a test checks
// it), so a robot's process can link the client without the gateway.
package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Protocol is how a tool talks to a running gateway; each wire protocol is
// one implementation. Predict is safe for concurrent use (over openpi,
// whose connection carries one observation at a time, calls take turns).
type Protocol interface {
	// Demo returns an embodiment's demo ("": the server's default).
	Demo(ctx context.Context, embodiment string) (*Demo, error)
	// Predict sends req, a /predict JSON body, in the protocol's own form
	// and returns the answer.
	Predict(ctx context.Context, req json.RawMessage) (*Prediction, error)
	// Close releases the connections.
	Close() error
}

// Demo is GET /demo of one embodiment: the request to send and what its
// answer should be.
type Demo struct {
	Embodiment string
	// Request is the ready-to-post /predict JSON body (with the reference
	// noise; over a robot protocol, with a seed instead).
	Request json.RawMessage
	// Golden maps action group → [horizon][dim]; nil when the server has
	// no golden for this checkpoint (Note then says so).
	Golden map[string][][]float64
	// PCCMin is the server's actions PCC gate.
	PCCMin float64
	Note   string
}

// Prediction is one answered /predict-shaped request.
type Prediction struct {
	// Actions maps action group → [horizon][dim].
	Actions map[string][][]float64
	// Keys is the action groups in the embodiment's order.
	Keys []string
	// Timing is the server's timings as the protocol reports them, in
	// milliseconds: HTTP's timing_ms with nested maps flattened with dots
	// (device_stages.vision), OIP's device and total, openpi's infer and
	// prev_total; ZeroMQ reports none.
	Timing                     map[string]float64
	Model, Version, Embodiment string
	RequestID                  string
	// Wall is the client's time from sending to the last byte.
	Wall time.Duration
}

// Protocols lists the protocol names Dial knows, in help order.
var Protocols = []string{"http", "oip", "zmq", "openpi"}

// ErrUnknownProtocol is Dial's error for a name not in Protocols.
var ErrUnknownProtocol = errors.New("unknown protocol")

// Options configure Dial and NewHTTP. The zero value is plain HTTP with no
// timeout and no key.
type Options struct {
	// DemoURL is the gateway's HTTP API (http://host:port) from which the
	// robot protocols (zmq, openpi) fetch the demo and its reference; http
	// and oip use their own URL.
	DemoURL string
	// Timeout bounds each request (0: none); over HTTP it is also sent as
	// TimeoutHeader, over ZeroMQ 0 is zmqclient's default.
	Timeout time.Duration
	// TLS configures https:// connections (nil: Go's defaults, the system
	// roots); TLSConfig builds one that trusts a CA file.
	TLS *tls.Config
	// APIKey, when set, is sent as "Authorization: Bearer <key>" over HTTP,
	// OIP and openpi, and as api_token over ZeroMQ.
	APIKey string
	// WrapTransport, when set, wraps the HTTP transport (for instance to
	// explain TLS errors in a tool's own terms).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Dial returns the Protocol name for the server at url: http and oip talk
// to the gateway's HTTP port (http://host:port), zmq to tcp://host:port,
// openpi to ws://host:port. A name not in Protocols is an error wrapping
// ErrUnknownProtocol; a robot protocol's server that cannot be reached is
// an error too (HTTP connects per request).
func Dial(ctx context.Context, name, url string, o Options) (Protocol, error) {
	switch name {
	case "http":
		return NewHTTP(url, o), nil
	case "zmq", "openpi":
		return dialRobot(ctx, name, url, o.DemoURL, o)
	case "oip": // on the gateway's HTTP port: the demo comes from the same URL
		return dialRobot(ctx, name, url, url, o)
	}
	return nil, fmt.Errorf("%w %q: want one of %s", ErrUnknownProtocol, name, strings.Join(Protocols, ", "))
}
