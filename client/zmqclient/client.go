// Package zmqclient is a Go client of Isaac-GR00T's ZeroMQ policy protocol
// (what gr00t/policy/server_client.py's PolicyClient speaks): a REQ peer
// over gr00tgw's own ZMTP 3.0 implementation, msgpack requests
// {"endpoint", "data", "api_token"}, arrays in any of the field's
// encodings. It talks to gr00tgw's ZeroMQ endpoint and to upstream's
// Python PolicyServer alike; tests, `gr00tgw smoke --protocol zmq` and
// `gr00tgw bench --protocol zmq` use it.
package zmqclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/wire"
	"github.com/gr00tgw/gr00tgw/wire/zmtp"
)

// DefaultTimeout is upstream PolicyClient's per-call timeout.
const DefaultTimeout = 15 * time.Second

// Options configure Dial.
type Options struct {
	// Token is sent as api_token when set.
	Token string
	// Encoding is how arrays are sent (default wire.EncodingNPY, the N1.7
	// release's); replies are decoded in any encoding.
	Encoding wire.Encoding
	// Timeout bounds each call when the context has no earlier deadline
	// (default 15 s, as upstream's RCVTIMEO/SNDTIMEO).
	Timeout time.Duration
	// MaxReplyBytes bounds a reply (default 64 MiB).
	MaxReplyBytes int
}

// Client is one REQ connection. A call that fails on the transport
// (timeout, reset) drops the connection and the next call reconnects, as
// upstream recreates its REQ socket. Safe for concurrent use (calls are
// serialised, as on a REQ socket).
type Client struct {
	addr string
	o    Options

	mu sync.Mutex
	nc net.Conn
	zc *zmtp.Conn
}

// ServerError is an {"error": ...} reply.
type ServerError struct {
	Message   string
	Code      string
	Field     string
	RequestID string
}

// Error formats the reply's message with its code and field.
func (e *ServerError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("server error: %s (code %s, field %s)", e.Message, e.Code, e.Field)
	}
	return "server error: " + e.Message
}

// Dial connects to addr ("host:port" or "tcp://host:port") and runs the
// handshake.
func Dial(ctx context.Context, addr string, o Options) (*Client, error) {
	if o.Encoding == wire.EncodingNone {
		o.Encoding = wire.EncodingNPY
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxReplyBytes <= 0 {
		o.MaxReplyBytes = 64 << 20
	}
	c := &Client{addr: strings.TrimPrefix(addr, "tcp://"), o: o}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) deadline(ctx context.Context) time.Time {
	d := time.Now().Add(c.o.Timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return d
}

func (c *Client) connect(ctx context.Context) error {
	var d net.Dialer
	dctx, cancel := context.WithDeadline(ctx, c.deadline(ctx))
	defer cancel()
	nc, err := d.DialContext(dctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("zmqclient: %w", err)
	}
	nc.SetDeadline(c.deadline(ctx)) //nolint:errcheck // the handshake reports it
	zc, err := zmtp.Handshake(nc, zmtp.Options{SocketType: "REQ", MaxMessage: c.o.MaxReplyBytes})
	if err != nil {
		nc.Close()
		return fmt.Errorf("zmqclient: %s: %w", c.addr, err)
	}
	c.nc, c.zc = nc, zc
	return nil
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc == nil {
		return nil
	}
	err := c.nc.Close()
	c.nc, c.zc = nil, nil
	return err
}

// CallRaw sends payload as one request message and returns the reply's
// payload (no msgpack involved: for tests of malformed requests).
func (c *Client) CallRaw(ctx context.Context, payload []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zc == nil {
		if err := c.connect(ctx); err != nil {
			return nil, err
		}
	}
	drop := func(err error) ([]byte, error) {
		c.nc.Close()
		c.nc, c.zc = nil, nil
		return nil, fmt.Errorf("zmqclient: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) }) //nolint:errcheck
	defer stop()
	c.nc.SetDeadline(c.deadline(ctx)) //nolint:errcheck
	if err := c.zc.WriteMessage(nil, payload); err != nil {
		return drop(err)
	}
	frames, err := c.zc.ReadMessage()
	if err != nil {
		return drop(err)
	}
	if len(frames) < 2 || len(frames[0]) != 0 {
		return drop(errors.New("reply without the REQ envelope"))
	}
	return frames[len(frames)-1], nil
}

// Call sends {"endpoint", "data" (when not nil), "api_token"} and returns
// the reply with arrays resolved to *wire.Array. An {"error": ...} reply
// is a *ServerError.
func (c *Client) Call(ctx context.Context, endpoint string, data any) (any, error) {
	req := wire.NewMap(3).Set("endpoint", endpoint)
	if data != nil {
		req.Set("data", data)
	}
	if c.o.Token != "" {
		req.Set("api_token", c.o.Token)
	}
	b, err := wire.Marshal(req, c.o.Encoding)
	if err != nil {
		return nil, err
	}
	out, err := c.CallRaw(ctx, b)
	if err != nil {
		return nil, err
	}
	return DecodeReply(out)
}

// DecodeReply decodes a reply payload: arrays resolved, an error map
// returned as *ServerError.
func DecodeReply(b []byte) (any, error) {
	if string(b) == "ERROR" { // N1.5 servers' failure reply
		return nil, &ServerError{Message: "server error (b\"ERROR\")"}
	}
	v, err := wire.Decode(b, wire.Limits{})
	if err != nil {
		return nil, fmt.Errorf("zmqclient: reply: %w", err)
	}
	v, _, err = wire.Resolve(v, "reply")
	if err != nil {
		return nil, fmt.Errorf("zmqclient: %w", err)
	}
	if m, ok := v.(*wire.Map); ok {
		if e, ok := m.Get("error"); ok {
			se := &ServerError{Message: fmt.Sprint(e)}
			se.Code, _ = wire.As[string](m, "code")
			se.Field, _ = wire.As[string](m, "field")
			se.RequestID, _ = wire.As[string](m, "request_id")
			return nil, se
		}
	}
	return v, nil
}

// Ping calls ping and returns the reply's status ("ok", or "starting"
// while gr00tgw warms up).
func (c *Client) Ping(ctx context.Context) (string, error) {
	v, err := c.Call(ctx, "ping", nil)
	if err != nil {
		return "", err
	}
	m, ok := v.(*wire.Map)
	if !ok {
		return "", fmt.Errorf("zmqclient: ping reply is %s", wire.TypeName(v))
	}
	s, _ := m.Get("status")
	str, _ := s.(string)
	return str, nil
}

// Reset calls reset with no options.
func (c *Client) Reset(ctx context.Context) error {
	_, err := c.Call(ctx, "reset", wire.NewMap(1).Set("options", nil))
	return err
}

// ModalityConfig is one modality of get_modality_config, as upstream's
// ModalityConfig dataclass is rebuilt from "as_json".
type ModalityConfig struct {
	DeltaIndices         []int
	ModalityKeys         []string
	SinCosEmbeddingKeys  []string
	MeanStdEmbeddingKeys []string
	// ActionConfigs holds {rep, type, format, state_key} per action key
	// (nil for None); StateKey "" is None.
	ActionConfigs []ActionConfig
	// Markers are the marker keys the map carried
	// ("__ModalityConfig_class__" and/or "__ModalityConfig__").
	Markers []string
	// Fields are the as_json keys, in wire order (upstream's dataclass
	// accepts exactly five).
	Fields []string
}

// ActionConfig is one action key's representation.
type ActionConfig struct{ Rep, Type, Format, StateKey string }

// GetModalityConfig calls get_modality_config (embodiment "" is the
// server's default) and parses the reply.
func (c *Client) GetModalityConfig(ctx context.Context, embodiment string) (map[string]ModalityConfig, error) {
	var data any
	if embodiment != "" {
		data = wire.NewMap(1).Set("options", wire.NewMap(1).Set("embodiment", embodiment))
	}
	v, err := c.Call(ctx, "get_modality_config", data)
	if err != nil {
		return nil, err
	}
	return ParseModalityConfig(v)
}

// ParseModalityConfig reads a get_modality_config reply.
func ParseModalityConfig(v any) (map[string]ModalityConfig, error) {
	m, ok := v.(*wire.Map)
	if !ok {
		return nil, fmt.Errorf("zmqclient: get_modality_config reply is %s", wire.TypeName(v))
	}
	out := map[string]ModalityConfig{}
	for i, k := range m.Keys {
		mm, ok := m.Values[i].(*wire.Map)
		if !ok {
			return nil, fmt.Errorf("zmqclient: modality %s is %s", k.Name, wire.TypeName(m.Values[i]))
		}
		var mc ModalityConfig
		for _, mk := range []string{"__ModalityConfig_class__", "__ModalityConfig__"} {
			if x, ok := mm.Get(mk); ok && x == true {
				mc.Markers = append(mc.Markers, mk)
			}
		}
		aj, _ := mm.Get("as_json")
		am, ok := aj.(*wire.Map)
		if !ok {
			return nil, fmt.Errorf("zmqclient: modality %s: as_json is %s", k.Name, wire.TypeName(aj))
		}
		for j, f := range am.Keys {
			mc.Fields = append(mc.Fields, f.Name)
			val := am.Values[j]
			switch f.Name {
			case "delta_indices":
				mc.DeltaIndices = ints(val)
			case "modality_keys":
				mc.ModalityKeys = strs(val)
			case "sin_cos_embedding_keys":
				mc.SinCosEmbeddingKeys = strs(val)
			case "mean_std_embedding_keys":
				mc.MeanStdEmbeddingKeys = strs(val)
			case "action_configs":
				list, _ := val.([]any)
				for _, x := range list {
					xm, _ := x.(*wire.Map)
					if xm == nil {
						continue
					}
					get := func(k string) string { v, _ := xm.Get(k); s, _ := v.(string); return s }
					mc.ActionConfigs = append(mc.ActionConfigs, ActionConfig{get("rep"), get("type"), get("format"), get("state_key")})
				}
			}
		}
		out[k.Name] = mc
	}
	return out, nil
}

func ints(v any) []int {
	list, _ := v.([]any)
	if list == nil {
		return nil
	}
	out := make([]int, 0, len(list))
	for _, x := range list {
		n, _ := x.(int64)
		out = append(out, int(n))
	}
	return out
}

func strs(v any) []string {
	list, _ := v.([]any)
	if list == nil {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// Form is how GetAction lays the observation out.
type Form string

// Observation forms (see frontend/zmq's Form).
const (
	Nested Form = "nested" // N1.6/N1.7: {video: {cam}, state: {group}, language: {key: [[str]]}}
	Flat   Form = "flat"   // N1.7 sim wrapper: video.<cam>, state.<group>, <language key>: [str]
	Legacy Form = "legacy" // N1.5: the flat observation as data itself, no options
)

// Observation is one batched observation: Video camera → uint8 (B, T, H,
// W, 3), State group → float32 (B, T, D), Language the B instructions
// under the embodiment's language key.
type Observation struct {
	Video       map[string]*wire.Array
	State       map[string]*wire.Array
	LanguageKey string
	Language    []string
}

// FromRaw builds a B = 1 observation from a decoded /predict body; the
// language key defaults to the N1.7 release's.
func FromRaw(o *rawobs.Observation, languageKey string) (*Observation, error) {
	if languageKey == "" {
		languageKey = "annotation.language.language_instruction"
	}
	out := &Observation{Video: map[string]*wire.Array{}, State: map[string]*wire.Array{}, LanguageKey: languageKey,
		Language: []string{o.Instruction}}
	for cam, frames := range o.Frames {
		pix, shape, err := rawobs.Stack(frames)
		if err != nil {
			return nil, fmt.Errorf("zmqclient: %s: %w", cam, err)
		}
		out.Video[cam] = wire.Uint8Array(append([]int{1}, shape...), pix)
	}
	for g, vals := range o.State {
		f := make([]float32, len(vals))
		for i, x := range vals {
			f[i] = float32(x)
		}
		out.State[g] = wire.Float32Array([]int{1, 1, len(vals)}, f)
	}
	return out, nil
}

// Batch repeats a B = 1 observation n times (B = n).
func (o *Observation) Batch(n int) *Observation {
	rep := func(a *wire.Array) *wire.Array {
		data := make([]byte, 0, n*len(a.Data))
		for range n {
			data = append(data, a.Data...)
		}
		shape := append([]int{a.Shape[0] * n}, a.Shape[1:]...)
		return &wire.Array{DType: a.DType, Shape: shape, Data: data}
	}
	out := &Observation{Video: map[string]*wire.Array{}, State: map[string]*wire.Array{}, LanguageKey: o.LanguageKey}
	for k, a := range o.Video {
		out.Video[k] = rep(a)
	}
	for k, a := range o.State {
		out.State[k] = rep(a)
	}
	for range n {
		out.Language = append(out.Language, o.Language...)
	}
	return out
}

// Value is the observation's msgpack tree in form f (for Call).
func (o *Observation) Value(f Form) any {
	if f == Nested {
		video, state := wire.NewMap(len(o.Video)), wire.NewMap(len(o.State))
		for _, k := range slices.Sorted(maps.Keys(o.Video)) {
			video.Set(k, o.Video[k])
		}
		for _, k := range slices.Sorted(maps.Keys(o.State)) {
			state.Set(k, o.State[k])
		}
		lang := make([]any, len(o.Language))
		for i, s := range o.Language {
			lang[i] = []any{s}
		}
		return wire.NewMap(3).Set("video", video).Set("state", state).Set("language", wire.NewMap(1).Set(o.LanguageKey, lang))
	}
	m := wire.NewMap(len(o.Video) + len(o.State) + 1)
	for _, k := range slices.Sorted(maps.Keys(o.Video)) {
		m.Set("video."+k, o.Video[k])
	}
	for _, k := range slices.Sorted(maps.Keys(o.State)) {
		m.Set("state."+k, o.State[k])
	}
	lang := make([]any, len(o.Language))
	for i, s := range o.Language {
		lang[i] = s
	}
	return m.Set(o.LanguageKey, lang)
}

// GetAction calls get_action with the observation in form f and options
// (embodiment, seed; nil for none; ignored by the Legacy form) and returns
// the action arrays by key as the server names them (group keys for
// Nested, action.<group> for Flat and Legacy).
func (c *Client) GetAction(ctx context.Context, obs *Observation, f Form, options map[string]any) (map[string]*wire.Array, error) {
	var data any
	if f == Legacy {
		data = obs.Value(Flat)
	} else {
		var opts any
		if options != nil {
			om := wire.NewMap(len(options))
			for k, v := range options {
				om.Set(k, v)
			}
			opts = om
		}
		data = wire.NewMap(2).Set("observation", obs.Value(f)).Set("options", opts)
	}
	v, err := c.Call(ctx, "get_action", data)
	if err != nil {
		return nil, err
	}
	var act any = v
	if f != Legacy {
		pair, ok := v.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("zmqclient: get_action reply is %s, want [action, info]", wire.TypeName(v))
		}
		act = pair[0]
	}
	m, ok := act.(*wire.Map)
	if !ok {
		return nil, fmt.Errorf("zmqclient: get_action action is %s, want a map", wire.TypeName(act))
	}
	out := make(map[string]*wire.Array, m.Len())
	for i, k := range m.Keys {
		a, ok := m.Values[i].(*wire.Array)
		if !ok {
			return nil, fmt.Errorf("zmqclient: action %s is %s, want an ndarray", k.Name, wire.TypeName(m.Values[i]))
		}
		out[k.Name] = a
	}
	return out, nil
}
