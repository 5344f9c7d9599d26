package httpfront

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

// Every HTTP prediction protocol — POST /predict and /v1/predict (JSON or
// msgpack) and whatever mounts with PredictHandler (the Open Inference
// Protocol's /v2/models/{name}/infer, frontend/oip) — shares one request
// path: lifecycle and admission before the body is read, max_body_bytes,
// the request deadline headers, client-disconnect cancellation,
// Server-Timing, the request log's attributes and the predictions metric,
// around the protocol's own body format.

// FrontEnd is one HTTP prediction protocol. Build its handler with
// Server.PredictHandler.
type FrontEnd struct {
	// Protocol labels the predictions metric and spans ("http", "oip").
	Protocol string
	// Embodiment resolves the request's embodiment tag from its headers
	// and route parameters alone, before admission and before the body is
	// read ("" is the default embodiment). Its error (e.g. the 404 of
	// service.Core.ModelTag) is the answer; the tag returned with it
	// labels the refusal's metric. Nil means the default embodiment.
	Embodiment func(c *fiber.Ctx) (string, error)
	// Decode translates the body (read after admission, at most
	// max_body_bytes; valid until the handler returns) into a Request for
	// tag and returns the encoder of its answer. Its errors should be
	// *service.HandlerError (400 naming the field, 422 for the wrong shape
	// of body); they are rendered once at the edge.
	Decode func(c *fiber.Ctx, tag string, body []byte) (*service.Request, Responder, error)
	// Rename, if set, restates the service's errors in the protocol's
	// field names (e.g. options.rtc_overlap_steps → parameters.…).
	Rename func(error) error
}

// Responder writes a served prediction as the front end's 200 answer.
type Responder func(c *fiber.Ctx, resp *service.PredictResponse) error

// predictFrontEnd is POST /predict: the embodiment from the X-Embodiment
// header or the body (both set must agree), a JSON or msgpack body by
// Content-Type, the answer in msgpack when the client speaks it
// (wantsMsgpack), else JSON.
var predictFrontEnd = FrontEnd{
	Protocol:   "http",
	Embodiment: func(c *fiber.Ctx) (string, error) { return strings.TrimSpace(c.Get(service.EmbodimentHeader)), nil },
	Decode: func(c *fiber.Ctx, _ string, body []byte) (*service.Request, Responder, error) {
		if len(body) == 0 {
			return nil, nil, service.SchemaError("body", "empty body: send a /predict JSON or msgpack object")
		}
		decode := service.DecodeJSON
		if isMsgpack(c.Get(fiber.HeaderContentType)) {
			decode = service.DecodeMsgpack
		}
		r, err := decode(body)
		if err != nil {
			return nil, nil, err
		}
		if r.Embodiment, err = routeTag(c.Get(service.EmbodimentHeader), r.Embodiment); err != nil {
			return nil, nil, err
		}
		if err = sessionHeader(c, r); err != nil {
			return nil, nil, err
		}
		return r, encodePredict, nil
	},
}

func encodePredict(c *fiber.Ctx, resp *service.PredictResponse) error {
	if wantsMsgpack(c) {
		b, err := wire.Marshal(resp, wire.EncodingNPY)
		if err != nil {
			return fmt.Errorf("encode response: %w", err)
		}
		c.Set(fiber.HeaderContentType, service.MIMEMsgpack)
		return c.Send(b)
	}
	return c.JSON(resp)
}

// PredictHandler returns the Fiber handler of fe: the request is refused
// (503) while the server is not ready or past queue_depth before its body
// is read, then decoded by fe.Decode, predicted (the service's pipeline,
// labelled fe.Protocol and the route) and encoded by the returned
// encoder. Mount it on App() before Serve.
func (s *Server) PredictHandler(fe FrontEnd) fiber.Handler {
	return func(c *fiber.Ctx) (err error) {
		start := time.Now()
		rid, _ := c.Locals("rid").(string)
		o := service.PredictOptions{RequestID: rid, Protocol: fe.Protocol, Route: c.Route().Path}
		tag := ""
		defer func() { s.core.CountPrediction(c.UserContext(), o, tag, err) }()
		// A body left unread (the request refused before admission) is
		// drained (discarded, up to drainMax) so that the client, still
		// writing it, reads the refusal instead of a reset; a larger one
		// closes the connection after the answer.
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
		ctx, gone, release, err := s.admit(c)
		if err != nil {
			return err
		}
		defer release()

		// The raw body (read only now that the request is admitted), not
		// c.Body(): under Immutable that is a copy, and the parsers copy
		// every value they keep.
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
		resp, err := s.core.Run(ctx, r, o, start)
		if err != nil {
			if gone.fired() {
				return service.ErrClientClosed
			}
			if fe.Rename != nil {
				err = fe.Rename(err)
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

// admit is the admission of every HTTP predict route, before its body is
// read: 503 while not ready or past queue_depth, 413 from a
// Content-Length over max_body_bytes; then the request's deadline
// (requestDeadline) and the client-disconnect watch on its context.
// release (run once the answer is decided) stops the watch, cancels the
// context and frees the queue slot.
func (s *Server) admit(c *fiber.Ctx) (ctx context.Context, gone *clientWatch, release func(), err error) {
	if err := s.core.CheckReady(); err != nil {
		return nil, nil, nil, err
	}
	if n := int64(c.Request().Header.ContentLength()); n > int64(s.cfg.MaxBodyBytes) {
		return nil, nil, nil, s.errBodyTooLarge(n)
	}
	done, err := s.core.Admit()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), s.requestDeadline(c))
	ctx, gone = s.watchClient(ctx, c)
	return ctx, gone, func() { gone.stop(); cancel(); done() }, nil
}

func isMsgpack(ct string) bool {
	ct = strings.ToLower(ct)
	return strings.Contains(ct, "msgpack")
}

// wantsMsgpack reports whether the answer to c is msgpack: Accept names
// msgpack, or the request body was msgpack and Accept does not ask for
// JSON. Success and error bodies follow the same rule.
func wantsMsgpack(c *fiber.Ctx) bool {
	accept := strings.ToLower(c.Get(fiber.HeaderAccept))
	return strings.Contains(accept, "msgpack") ||
		(isMsgpack(c.Get(fiber.HeaderContentType)) && !strings.Contains(accept, "json"))
}

// routeTag picks the request's embodiment: the X-Embodiment header or the
// body's embodiment field ("" when neither names one: the default). Both
// set and different is the client's error.
func routeTag(header, body string) (string, error) {
	header = strings.TrimSpace(header)
	switch {
	case header != "" && body != "" && header != body:
		return "", service.Invalid("embodiment", "embodiment: header %s %q and body embodiment %q disagree", service.EmbodimentHeader, header, body)
	case header != "":
		return header, nil
	}
	return body, nil
}
