package httpfront

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/gr00tgw/gr00tgw/service"
)

// Request bodies are streamed (fiber StreamRequestBody): fasthttp reads the
// headers and at most 8 KiB of a body before the handler runs, and /predict
// reads the rest only after admission (queue_depth+1 requests in flight),
// so the memory the gateway spends on bodies is bounded by
// (queue_depth+1) × max_body_bytes whatever clients send: a request beyond
// the queue is refused before its body is read, a body over the limit is
// refused from its Content-Length (or as soon as a chunked body passes it),
// and a slow upload is bounded by the read timeout.

// errBodyTooLarge is the answer to a body over max_body_bytes.
func (s *Server) errBodyTooLarge(n int64) *service.HandlerError {
	return &service.HandlerError{Status: http.StatusRequestEntityTooLarge, Code: service.CodeTooLarge, Field: "body",
		Err: fmt.Errorf("body of %d bytes is over max_body_bytes %d", n, s.cfg.MaxBodyBytes)}
}

// readBody reads the request body under max_body_bytes. A body left unread
// (refused, or cut short) closes the connection after the answer.
func (s *Server) readBody(c *fiber.Ctx) ([]byte, error) {
	req := c.Request()
	limit := int64(s.cfg.MaxBodyBytes)
	if n := int64(req.Header.ContentLength()); n > limit {
		c.Context().SetConnectionClose()
		return nil, s.errBodyTooLarge(n)
	}
	if !req.IsBodyStream() {
		return req.Body(), nil
	}
	var buf bytes.Buffer
	if n := req.Header.ContentLength(); n > 0 {
		buf.Grow(n)
	}
	n, err := io.Copy(&buf, io.LimitReader(req.BodyStream(), limit+1))
	if n > limit {
		c.Context().SetConnectionClose()
		return nil, s.errBodyTooLarge(n)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		c.Context().SetConnectionClose()
		return nil, &service.HandlerError{Status: http.StatusBadRequest, Code: service.CodeInvalid, Field: "body",
			Err: fmt.Errorf("body: read after %d bytes: %w", n, err)}
	}
	return buf.Bytes(), nil
}

// drainMax is the most of a refused body the server reads (and discards)
// to answer on a healthy connection: a DROID request is ≈ 140 KB.
const drainMax = 4 << 20

// drainBody discards an unread body up to drainMax (a refused one, or one
// over max_body_bytes but under drainMax); past it, or on a read error,
// the connection closes after the answer.
func (s *Server) drainBody(c *fiber.Ctx) {
	req := c.Request()
	if n := req.Header.ContentLength(); n > drainMax || !req.IsBodyStream() {
		if req.IsBodyStream() || n > 0 {
			c.Context().SetConnectionClose()
		}
		return
	}
	n, err := io.Copy(io.Discard, io.LimitReader(req.BodyStream(), drainMax+1))
	if n > drainMax || (err != nil && !errors.Is(err, io.EOF)) {
		c.Context().SetConnectionClose()
	}
}

// clientWatch polls a request's connection and cancels the request when
// the client has gone, so that a queued or running prediction gives its
// queue slot and the device back (within clientPoll, and the backend's
// next cancellation check).
type clientWatch struct {
	done   chan struct{}
	closed chan struct{}
}

// clientPoll is how often an in-flight /predict checks its connection.
const clientPoll = 20 * time.Millisecond

func (s *Server) watchClient(ctx context.Context, c *fiber.Ctx) (context.Context, *clientWatch) {
	w := &clientWatch{done: make(chan struct{}), closed: make(chan struct{})}
	conn := c.Context().Conn()
	if tcpConn(conn) == nil {
		return ctx, w
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(clientPoll)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				cancel()
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if peerClosed(conn) {
					close(w.closed)
					cancel()
					return
				}
			}
		}
	}()
	return ctx, w
}

func (w *clientWatch) stop() { close(w.done) }

func (w *clientWatch) fired() bool {
	select {
	case <-w.closed:
		return true
	default:
		return false
	}
}
