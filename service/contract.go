package service

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// What the robot-protocol front ends (frontend/zmq, frontend/openpi) need of
// the service besides Predict: the served embodiments' contracts, request
// ids, and one server span plus one metric per protocol message.

// ModalityConfig is one modality of an embodiment's processor contract in
// upstream's shape (Isaac-GR00T gr00t/data/types.py ModalityConfig, the
// "as_json" of get_modality_config): exactly these five fields. Nil slices
// are upstream's None.
type ModalityConfig struct {
	DeltaIndices         []int          `json:"delta_indices"`
	ModalityKeys         []string       `json:"modality_keys"`
	SinCosEmbeddingKeys  []string       `json:"sin_cos_embedding_keys"`
	MeanStdEmbeddingKeys []string       `json:"mean_std_embedding_keys"`
	ActionConfigs        []ActionConfig `json:"action_configs"`
}

// ActionConfig is one action key's representation with upstream's enum
// names: Rep RELATIVE, DELTA or ABSOLUTE; Type EEF or NON_EEF; Format
// DEFAULT, XYZ_ROT6D or XYZ_ROTVEC; StateKey nil for None.
type ActionConfig struct {
	Rep      string  `json:"rep"`
	Type     string  `json:"type"`
	Format   string  `json:"format"`
	StateKey *string `json:"state_key"`
}

// Modality names of a processor contract, in upstream's order.
var ModalityNames = []string{"video", "state", "action", "language"}

// DefaultLanguageKey is the language modality key of the N1.7 release
// embodiments, used when a binding carries no modality config.
const DefaultLanguageKey = "annotation.language.language_instruction"

// Contract is one served embodiment as a front end sees it: its plugin's
// description and its processor's modality config.
type Contract struct {
	// Info is the plugin's description (cameras, frames, groups, horizon).
	Info EmbodimentInfo
	// Modality is the modality config per ModalityNames entry.
	Modality map[string]ModalityConfig
	// Default reports whether requests that name no embodiment get it.
	Default bool
}

// LanguageKey is the contract's first language modality key (the one the
// instruction is read from).
func (c *Contract) LanguageKey() string {
	if m, ok := c.Modality["language"]; ok && len(m.ModalityKeys) > 0 {
		return m.ModalityKeys[0]
	}
	return DefaultLanguageKey
}

// StateSteps is the number of state time steps an observation carries
// (len of the state delta indices; 1 for every released embodiment).
func (c *Contract) StateSteps() int {
	if m, ok := c.Modality["state"]; ok && len(m.DeltaIndices) > 0 {
		return len(m.DeltaIndices)
	}
	return 1
}

// ActionDim is the sum of the action group widths.
func (c *Contract) ActionDim() int {
	n := 0
	for _, g := range c.Info.ActionGroups {
		n += g.Dim
	}
	return n
}

// modalityFromInfo builds a contract's modality config from the plugin's
// description alone (a binding without Binding.Modality): no action
// representations (None) and the release language key.
func modalityFromInfo(info EmbodimentInfo) map[string]ModalityConfig {
	keys := func(gs []Group) []string {
		out := make([]string, len(gs))
		for i, g := range gs {
			out[i] = g.Key
		}
		return out
	}
	horizon := make([]int, info.ActionHorizon)
	for i := range horizon {
		horizon[i] = i
	}
	return map[string]ModalityConfig{
		"video":    {DeltaIndices: append([]int(nil), info.VideoDeltaIndices...), ModalityKeys: append([]string(nil), info.Cameras...)},
		"state":    {DeltaIndices: []int{0}, ModalityKeys: keys(info.StateGroups)},
		"action":   {DeltaIndices: horizon, ModalityKeys: keys(info.ActionGroups)},
		"language": {DeltaIndices: []int{0}, ModalityKeys: []string{DefaultLanguageKey}},
	}
}

// Contract returns the contract of the embodiment serving tag ("" is the
// default). The errors are Predict's routing errors: 503 while not ready
// or while the tag warms up, 400 naming field "embodiment" when it is not
// served. The result is a copy the caller may keep.
func (s *Core) Contract(tag string) (*Contract, error) {
	_, e, err := s.route(tag)
	if err != nil {
		return nil, err
	}
	return s.contractOf(e), nil
}

// Contracts returns the contract of every served embodiment, by tag.
func (s *Core) Contracts() []*Contract {
	set := s.set.Load()
	if set == nil {
		return nil
	}
	out := make([]*Contract, 0, len(set.tags))
	for _, tag := range set.tags {
		out = append(out, s.contractOf(set.entries[tag]))
	}
	return out
}

func (s *Core) contractOf(e *entry) *Contract {
	c := &Contract{Info: e.info, Default: e.tag == s.cfg.Embodiment}
	if e.b.Modality != nil {
		c.Modality = make(map[string]ModalityConfig, len(e.b.Modality))
		for k, v := range e.b.Modality {
			c.Modality[k] = v
		}
	} else {
		c.Modality = modalityFromInfo(e.info)
	}
	return c
}

// Message describes one protocol message for StartMessage.
type Message struct {
	// Protocol is "zmq" or "openpi" (the predictions' protocol label).
	Protocol string
	// Endpoint is the message's endpoint (get_action, ping, infer, …).
	Endpoint string
	// RequestID is the id the reply carries.
	RequestID string
	// Start is when the message was received (zero: now).
	Start time.Time
	// Peer is the client's address, for the span.
	Peer string
}

// EndMessage ends a message started by StartMessage: code is the error
// code of the reply ("" when served), err its cause (nil when served).
type EndMessage func(code string, err error)

type protoInstruments struct {
	messages metric.Int64Counter
	duration metric.Float64Histogram
}

func (s *Core) protoInst() *protoInstruments {
	s.protoOnce.Do(func() {
		mp := s.opts.MeterProvider
		if mp == nil {
			mp = otel.GetMeterProvider()
		}
		m := mp.Meter(MeterName)
		in := &protoInstruments{}
		in.messages, _ = m.Int64Counter("gateway.protocol.messages",
			metric.WithDescription("robot-protocol messages (ZeroMQ, openpi websocket) by protocol, endpoint and error code (\"\": served)"))
		in.duration, _ = m.Float64Histogram("gateway.protocol.message.duration", metric.WithUnit("s"),
			metric.WithDescription("robot-protocol message wall time, receipt to reply, by protocol and endpoint"), SecondsBuckets)
		s.proto = in
	})
	return s.proto
}

// StartMessage starts the server span of one robot-protocol message (named
// "<protocol> <endpoint>", with the request id) under the server's base
// context values of ctx, and returns its context (hand it to Predict) and
// the function that ends it, recording gateway.protocol.messages and
// gateway.protocol.message.duration. Safe for concurrent use.
func (s *Core) StartMessage(ctx context.Context, m Message) (context.Context, EndMessage) {
	if m.Start.IsZero() {
		m.Start = time.Now()
	}
	attrs := []attribute.KeyValue{attribute.String("rpc.system", m.Protocol), attribute.String("rpc.method", m.Endpoint),
		attribute.String("request.id", m.RequestID)}
	if m.Peer != "" {
		attrs = append(attrs, attribute.String("client.address", m.Peer))
	}
	ctx, span := s.tracer.Start(ctx, m.Protocol+" "+m.Endpoint, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(m.Start), trace.WithAttributes(attrs...))
	in := s.protoInst()
	return ctx, func(code string, err error) {
		if err != nil {
			span.RecordError(err)
			span.SetAttributes(attribute.String("error.code", code))
			if code != CodeQueueFull && code != CodeStarting && code != CodeUnavailable {
				span.SetStatus(codes.Error, err.Error())
			}
		}
		span.End()
		ma := metric.WithAttributes(attribute.String("protocol", m.Protocol), attribute.String("endpoint", m.Endpoint))
		if in.messages != nil {
			in.messages.Add(ctx, 1, ma, metric.WithAttributes(attribute.String("code", code)))
		}
		if in.duration != nil {
			in.duration.Record(ctx, time.Since(m.Start).Seconds(), ma)
		}
	}
}

// Service is what a protocol front end needs of the service; *Core
// implements it (tests substitute fakes). Every method is safe for
// concurrent use.
type Service interface {
	// Ready reports whether predictions are served.
	Ready() bool
	// Contract is the contract of tag ("" the default); see
	// Core.Contract.
	Contract(tag string) (*Contract, error)
	// Contracts lists the served embodiments' contracts.
	Contracts() []*Contract
	// Predict serves one request (see Core.Predict).
	Predict(ctx context.Context, req *Request, o PredictOptions) (*PredictResponse, error)
	// StartMessage starts one message's span and metric.
	StartMessage(ctx context.Context, m Message) (context.Context, EndMessage)
	// ResetSession drops a session's state (see Core.ResetSession).
	ResetSession(id, field string) (bool, error)
}

var _ Service = (*Core)(nil)
