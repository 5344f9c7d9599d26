// Package openpiclient is a Go client of openpi's websocket policy
// protocol (what openpi_client.WebsocketClientPolicy speaks): connect,
// read the metadata frame, then send one msgpack observation per binary
// frame and read one reply. Arrays use openpi_client.msgpack_numpy's
// encoding. It talks to gr00tgw's openpi endpoint and to openpi's own
// server; tests, `gr00tgw smoke --protocol openpi` and `gr00tgw bench
// --protocol openpi` use it.
package openpiclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/coder/websocket"

	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/wire"
)

// Options configure Dial.
type Options struct {
	// APIKey is sent as "Authorization: Api-Key <key>" when set.
	APIKey string
	// Header is added to the upgrade request (e.g. "Authorization: Bearer
	// <key>" or "X-API-Key" for a gateway with auth.api_keys_file).
	Header http.Header
	// MaxReplyBytes bounds a reply frame (default 64 MiB).
	MaxReplyBytes int64
}

// Client is one websocket connection. Not safe for concurrent use (one
// observation at a time, as the protocol is).
type Client struct {
	ws *websocket.Conn
	// Metadata is the server's metadata frame.
	Metadata *wire.Map
}

// ServerError is the server's text error frame and the close that
// followed it.
type ServerError struct {
	// Text is the error frame.
	Text string
	// CloseCode is the close status (1011 for upstream's errors; -1 when
	// the connection ended otherwise).
	CloseCode websocket.StatusCode
}

// Error formats the text frame with the close code.
func (e *ServerError) Error() string {
	return fmt.Sprintf("error in inference server (close %d):\n%s", e.CloseCode, e.Text)
}

// Dial connects to url ("ws://host:port", or "host:port") and reads the
// metadata frame. A refused handshake (401 for a wrong key) is an error
// naming the HTTP status.
func Dial(ctx context.Context, url string, o Options) (*Client, error) {
	if !strings.HasPrefix(url, "ws://") && !strings.HasPrefix(url, "wss://") {
		url = "ws://" + url
	}
	if o.MaxReplyBytes <= 0 {
		o.MaxReplyBytes = 64 << 20
	}
	h := o.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if o.APIKey != "" {
		h.Set("Authorization", "Api-Key "+o.APIKey)
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("openpiclient: %s: handshake refused: HTTP %d: %w", url, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("openpiclient: %s: %w", url, err)
	}
	ws.SetReadLimit(o.MaxReplyBytes)
	c := &Client{ws: ws}
	typ, b, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow() //nolint:errcheck
		return nil, fmt.Errorf("openpiclient: metadata: %w", err)
	}
	if typ != websocket.MessageBinary {
		ws.CloseNow() //nolint:errcheck
		return nil, &ServerError{Text: string(b), CloseCode: -1}
	}
	v, err := decode(b)
	if err != nil {
		ws.CloseNow() //nolint:errcheck
		return nil, fmt.Errorf("openpiclient: metadata: %w", err)
	}
	m, ok := v.(*wire.Map)
	if !ok {
		ws.CloseNow() //nolint:errcheck
		return nil, fmt.Errorf("openpiclient: metadata is %s, want a map", wire.TypeName(v))
	}
	c.Metadata = m
	return c, nil
}

func decode(b []byte) (any, error) {
	v, err := wire.Decode(b, wire.Limits{})
	if err != nil {
		return nil, err
	}
	v, _, err = wire.Resolve(v, "reply")
	return v, err
}

// Conn is the underlying websocket connection (to send frames the
// protocol does not, in tests).
func (c *Client) Conn() *websocket.Conn { return c.ws }

// Close closes the connection normally.
func (c *Client) Close() error { return c.ws.Close(websocket.StatusNormalClosure, "") }

// InferRaw sends one binary frame and returns the reply frame. A text
// reply (the server's error) is a *ServerError carrying the close code
// that follows it.
func (c *Client) InferRaw(ctx context.Context, frame []byte) ([]byte, error) {
	if err := c.ws.Write(ctx, websocket.MessageBinary, frame); err != nil {
		return nil, fmt.Errorf("openpiclient: %w", err)
	}
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		if code := websocket.CloseStatus(err); code != -1 {
			return nil, &ServerError{CloseCode: code, Text: err.Error()}
		}
		return nil, fmt.Errorf("openpiclient: %w", err)
	}
	if typ == websocket.MessageText {
		se := &ServerError{Text: string(b), CloseCode: -1}
		if _, _, err := c.ws.Read(ctx); err != nil {
			se.CloseCode = websocket.CloseStatus(err)
		}
		return nil, se
	}
	return b, nil
}

// Infer sends obs (a map of observation/<key> arrays, prompt, …) and
// returns the reply map with arrays resolved.
func (c *Client) Infer(ctx context.Context, obs *wire.Map) (*wire.Map, error) {
	b, err := wire.Marshal(obs, wire.EncodingOpenPI)
	if err != nil {
		return nil, err
	}
	out, err := c.InferRaw(ctx, b)
	if err != nil {
		return nil, err
	}
	v, err := decode(out)
	if err != nil {
		return nil, fmt.Errorf("openpiclient: reply: %w", err)
	}
	m, ok := v.(*wire.Map)
	if !ok {
		return nil, fmt.Errorf("openpiclient: reply is %s, want a map", wire.TypeName(v))
	}
	return m, nil
}

// Result is gr00tgw's reply, parsed.
type Result struct {
	// Actions is float32 (horizon, Σ dims), the groups concatenated in
	// the embodiment's action-key order.
	Actions *wire.Array
	// Groups is each action group, float32 (horizon, dim).
	Groups map[string]*wire.Array
	// InferMS is server_timing.infer_ms; PrevTotalMS its prev_total_ms
	// (-1 on a connection's first reply).
	InferMS, PrevTotalMS float64
	// RequestID names the request in the server's logs and spans.
	RequestID string
}

// ParseResult reads a reply map.
func ParseResult(m *wire.Map) (*Result, error) {
	r := &Result{Groups: map[string]*wire.Array{}, PrevTotalMS: -1}
	var ok bool
	if r.Actions, ok = wire.As[*wire.Array](m, "actions"); !ok {
		return nil, errors.New("openpiclient: reply has no actions array")
	}
	if gm, ok := wire.As[*wire.Map](m, "action_groups"); ok {
		for i, k := range gm.Keys {
			if arr, ok := gm.Values[i].(*wire.Array); ok {
				r.Groups[k.Name] = arr
			}
		}
	}
	if tm, ok := wire.As[*wire.Map](m, "server_timing"); ok {
		r.InferMS, _ = wire.As[float64](tm, "infer_ms")
		if x, ok := tm.Get("prev_total_ms"); ok { // absent: -1
			r.PrevTotalMS, _ = x.(float64)
		}
	}
	r.RequestID, _ = wire.As[string](m, "request_id")
	return r, nil
}

// FromRaw builds an observation from a decoded /predict body: each camera
// as observation/<camera> uint8 (T, H, W, 3) (or (H, W, 3) with
// singleFrame when T = 1), each state group as observation/<group>
// float32 (D,), the instruction as prompt.
func FromRaw(o *rawobs.Observation, singleFrame bool) (*wire.Map, error) {
	m := wire.NewMap(len(o.Frames) + len(o.State) + 2)
	for _, cam := range o.Cameras() {
		pix, shape, err := rawobs.Stack(o.Frames[cam])
		if err != nil {
			return nil, fmt.Errorf("openpiclient: %s: %w", cam, err)
		}
		if singleFrame && shape[0] == 1 {
			shape = shape[1:]
		}
		m.Set("observation/"+cam, wire.Uint8Array(shape, pix))
	}
	for _, g := range slices.Sorted(maps.Keys(o.State)) {
		vals := o.State[g]
		f := make([]float32, len(vals))
		for i, x := range vals {
			f[i] = float32(x)
		}
		m.Set("observation/"+g, wire.Float32Array([]int{len(f)}, f))
	}
	m.Set("prompt", o.Instruction)
	if o.Embodiment != "" {
		m.Set("embodiment", o.Embodiment)
	}
	return m, nil
}
