package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// What a prediction protocol served on the gateway's own HTTP listener
// (the Open Inference Protocol's /v2/models/{name}/infer, gateway/oip)
// needs: /predict's request path — lifecycle and admission before the body
// is read, max_body_bytes, the request deadline headers, client-disconnect
// cancellation, Server-Timing, the request log's attributes and the
// predictions metric — around the front end's own body format.

// HTTPFrontEnd is one HTTP prediction protocol. Build its handler with
// Server.PredictHandler.
type HTTPFrontEnd struct {
	// Protocol labels the predictions metric and spans ("oip").
	Protocol string
	// Embodiment resolves the request's embodiment tag from its headers
	// and route parameters alone, before admission and before the body is
	// read ("" is the default embodiment). Its error (e.g. the 404 of
	// ModelTag) is the answer; the tag returned with it labels the
	// refusal's metric. Nil means the default embodiment.
	Embodiment func(c *fiber.Ctx) (string, error)
	// Decode translates the body (read after admission, at most
	// max_body_bytes; valid until the handler returns) into a Request for
	// tag and returns the encoder of its answer. Its errors should be
	// *HandlerError (400 naming the field, 422 for the wrong shape of
	// body); they are rendered once at the edge.
	Decode func(c *fiber.Ctx, tag string, body []byte) (*Request, HTTPEncoder, error)
}

// HTTPEncoder writes a served prediction as the front end's 200 answer.
type HTTPEncoder func(c *fiber.Ctx, resp *PredictResponse) error

// PredictHandler returns the Fiber handler of fe: the request is refused
// (503) while the server is not ready or past queue_depth before its body
// is read, exactly as POST /predict, then decoded by fe.Decode, predicted
// (Server.Predict's pipeline, labelled fe.Protocol and the route) and
// encoded by the returned encoder. Mount it on App() before Serve.
func (s *Server) PredictHandler(fe HTTPFrontEnd) fiber.Handler {
	return func(c *fiber.Ctx) (err error) {
		start := time.Now()
		rid, _ := c.Locals("rid").(string)
		o := PredictOptions{RequestID: rid, Protocol: fe.Protocol, Route: c.Route().Path}
		tag := ""
		defer func() { s.countPrediction(c.UserContext(), o, tag, err) }()
		read := false
		defer func() {
			if !read && c.Request().Header.ContentLength() != 0 {
				s.drainBody(c)
			}
		}()
		if fe.Embodiment != nil {
			if tag, err = fe.Embodiment(c); err != nil {
				return err
			}
		}
		ctx, gone, release, err := s.admitHTTP(c)
		if err != nil {
			return err
		}
		defer release()

		body, err := s.readBody(c)
		if err != nil {
			return err
		}
		read = true
		r, enc, err := fe.Decode(c, tag, body)
		if err != nil {
			return err
		}
		if r.Embodiment == "" {
			r.Embodiment = tag
		}
		tag = r.Embodiment
		parse := time.Since(start)
		resp, err := s.predictAdmitted(ctx, r, o, start)
		if err != nil {
			if gone.fired() {
				return errClientClosed
			}
			return err
		}
		resp.TimingMS.Parse = ms(parse)
		t := &resp.TimingMS
		c.Set("Server-Timing", fmt.Sprintf("parse;dur=%.3f, decode;dur=%.3f, plugin_pre;dur=%.3f, encode;dur=%.3f, queue;dur=%.3f, device;dur=%.3f, decode_actions;dur=%.3f, total;dur=%.3f",
			t.Parse, t.Decode, t.PluginPre, t.Encode, t.Queue, t.Device, t.DecodeActions, t.Total))
		c.Locals("logattrs", []any{"protocol", fe.Protocol, "embodiment", resp.Embodiment, "seq_len", resp.SeqLen,
			"noise_source", resp.NoiseSource, "decode_ms", t.Decode, "encode_ms", t.Encode, "queue_ms", t.Queue,
			"device_ms", t.Device, "total_ms", t.Total})
		return enc(c, resp)
	}
}

// ModelTag resolves a /v2/models/{name} name to the tag of the served
// embodiment it addresses: the model's own names (model_name,
// nvidia/GR00T-N1.7-3B, GR00T-N1.7-3B) address the default embodiment,
// any other name is an embodiment tag. Errors: 503 while the server or the
// embodiment is starting, 404 (field "model") for a name that is neither;
// the tag the name would address is returned with them (it labels the
// refusal's metric).
func (s *Server) ModelTag(name string) (string, error) {
	e, err := s.modelEntry(name)
	if err != nil {
		return s.modelTag(name), err
	}
	return e.tag, nil
}

// Version is the gr00tgw build version the server reports (Options.Version).
func (s *Server) Version() string { return s.opts.Version }

// countPrediction records one prediction attempt of any outcome in
// gateway.predictions: protocol, route (the HTTP route or the protocol's
// endpoint), embodiment (embodimentLabel) and the answer's error code (""
// when served).
func (s *Server) countPrediction(ctx context.Context, o PredictOptions, tag string, err error) {
	code := ""
	if err != nil {
		code = classify(err, "request").Code
	}
	route := o.Route
	if route == "" {
		route = o.Protocol
	}
	s.inst.predictions.Add(ctx, 1, metric.WithAttributes(attribute.String("protocol", o.Protocol),
		attribute.String("route", route), attribute.String("embodiment", s.embodimentLabel(tag)), attribute.String("code", code)))
}

// embodimentLabel bounds the embodiment label's values to the tags the
// server knows (served, starting or refused): "" is the default
// embodiment, any other name a client sent is "unknown".
func (s *Server) embodimentLabel(tag string) string {
	if tag == "" {
		return s.cfg.Embodiment
	}
	set := s.set.Load()
	if set == nil {
		if tag == s.cfg.Embodiment {
			return tag
		}
		return "unknown"
	}
	if _, ok := set.entries[tag]; ok {
		return tag
	}
	if _, ok := set.refused[tag]; ok || set.starting[tag] || tag == s.cfg.Embodiment {
		return tag
	}
	return "unknown"
}
