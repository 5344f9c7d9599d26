// Package openpi serves openpi's websocket policy protocol
// (openpi/serving/websocket_policy_server.py and openpi_client's
// WebsocketClientPolicy) on gr00tgw's pipeline, so evaluation harnesses
// written against openpi connect unchanged: GET /healthz, one binary
// msgpack metadata frame on connect (the served embodiments' contracts),
// then one observation per binary frame answered by one binary frame
// with actions, action_groups, server_timing and the request id. Arrays
// use openpi_client.msgpack_numpy's bin-keyed encoding. On an error the
// server sends one text frame naming the field, then closes with 1011, as
// upstream does.
//
// Every observation runs through service.Service.Predict (admission,
// queue, deadlines, device lock, plugins, spans and metrics shared with
// HTTP). The websocket layer is github.com/coder/websocket (RATIONALE.md
// "Dependencies"); message size is bounded by this package's own limited
// reader, which allocates as bytes arrive.
package openpi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/gr00tgw/gr00tgw/frontend"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/service"
)

// Options configure New.
type Options struct {
	// Gateway serves the predictions (required).
	Gateway service.Service
	// APIKey, when set, is required as the handshake's "Authorization:
	// Api-Key <key>" header (constant-time compare; 401 otherwise). ""
	// accepts every client, as upstream does.
	APIKey string
	// Keys, when set (auth.api_keys_file), is required too: the upgrade
	// passes with APIKey or one of these keys, sent as "Authorization:
	// Bearer <key>", "X-API-Key: <key>" or "Authorization: Api-Key <key>";
	// otherwise it is refused with 401 before the upgrade.
	Keys *secure.Keyring
	// Limits bound connections and observations (frontend's defaults):
	// MaxMessageBytes one observation frame; IdleTimeout closes a
	// connection that sends no observation; ReadTimeout bounds the
	// reading of one observation once it started, WriteTimeout the
	// writing of one reply; beyond MaxConnections the handshake is
	// refused with 503.
	frontend.Limits
	// Metadata adds keys to the metadata frame sent on connect.
	Metadata map[string]any
	// Version is reported in the metadata.
	Version string
	// Logger receives connection and request logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Server is one openpi websocket endpoint, a frontend.FrontEnd. Safe for
// concurrent use.
type Server struct {
	o     Options
	log   *slog.Logger
	http  *http.Server
	conns *frontend.Conns
}

var _ frontend.FrontEnd = (*Server)(nil)

// New checks o and returns a server.
func New(o Options) (*Server, error) {
	if o.Gateway == nil {
		return nil, errors.New("openpi: Options.Gateway is required")
	}
	o.Limits = o.Limits.WithDefaults()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{o: o, log: o.Logger, conns: frontend.NewConns(o.MaxConnections)}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)}
	return s, nil
}

// Name is "openpi".
func (s *Server) Name() string { return "openpi" }

// Serve answers on ln until Shutdown (then it returns
// http.ErrServerClosed, which is frontend.ErrServerClosed).
func (s *Server) Serve(ln net.Listener) error { return s.http.Serve(ln) }

// Shutdown stops accepting, closes idle connections (1001 going away),
// lets the observations in flight answer, then closes their connections;
// when ctx ends first the rest are cancelled and closed.
func (s *Server) Shutdown(ctx context.Context) error {
	// The http.Server's Shutdown closes the listeners and waits for the
	// handshakes; the hijacked websockets are the Conns'.
	return s.conns.Shutdown(ctx, s.http.Shutdown)
}

// ServeHTTP answers GET /healthz and upgrades every other request to the
// policy websocket (openpi serves the policy on any path).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !s.o.Gateway.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "starting\n") //nolint:errcheck
			return
		}
		io.WriteString(w, "OK\n") //nolint:errcheck
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		w.Header().Set("Upgrade", "websocket")
		http.Error(w, "this is an openpi websocket policy server: connect with a websocket client (GET /healthz for health)", http.StatusUpgradeRequired)
		return
	}
	if s.o.APIKey != "" || s.o.Keys.Enabled() {
		if !s.authorized(r.Header) {
			s.log.Info("openpi: handshake refused: missing or invalid API key", "peer", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="gr00tgw"`)
			http.Error(w, "unauthorized: "+service.ErrUnauthorized.Error()+
				`: send "Authorization: Bearer <key>", "X-API-Key: <key>" or "Authorization: Api-Key <key>" on the upgrade request`, http.StatusUnauthorized)
			return
		}
	}
	if s.conns.Draining() {
		http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
		return
	}
	if !s.conns.Acquire() {
		http.Error(w, fmt.Sprintf("too many connections (%d)", s.o.MaxConnections), http.StatusServiceUnavailable)
		return
	}
	defer s.conns.Release()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.log.Info("openpi: handshake failed", "peer", r.RemoteAddr, "err", err.Error())
		return
	}
	ws.SetReadLimit(-1) // our own limited reader enforces MaxMessageBytes
	c := &conn{s: s, ws: ws, peer: r.RemoteAddr, stopCh: make(chan struct{})}
	tc, ok := s.conns.Track(false, frontend.Handle{Drain: c.stop, Close: func() { _ = ws.CloseNow() }})
	if !ok {
		ws.Close(websocket.StatusGoingAway, "server shutting down") //nolint:errcheck
		return
	}
	defer tc.Done()
	c.serve()
}

// authorized reports whether the upgrade request carries openpi.api_key
// (as "Authorization: Api-Key <key>", openpi's form) or one of the
// keyring's keys (secure.FromHeaders: Bearer, X-API-Key or Api-Key).
// Both are compared in constant time.
func (s *Server) authorized(h http.Header) bool {
	ok := false
	if s.o.APIKey != "" {
		got, _ := strings.CutPrefix(h.Get("Authorization"), "Api-Key ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.o.APIKey)) == 1 {
			ok = true
		}
	}
	if _, match := s.o.Keys.Check(secure.FromHeaders(h.Get)); match {
		ok = true
	}
	return ok
}

// conn is one websocket client.
type conn struct {
	s      *Server
	ws     *websocket.Conn
	peer   string
	once   sync.Once
	stopCh chan struct{} // closed by Shutdown
	sess   connSession   // the connection's robot session (sessions.go)
}

func (c *conn) stop() { c.once.Do(func() { close(c.stopCh) }) }

// message is one frame read by the reader goroutine.
type message struct {
	typ  websocket.MessageType
	data []byte
	at   time.Time // its first frame arrived (server_timing's cycle starts)
	read time.Time // all of it is in memory (the message span starts)
	err  error
}

var (
	errIdle        = errors.New("idle timeout")
	errReadTimeout = errors.New("read timeout")
)

// tooLargeError is an observation over MaxMessageBytes.
type tooLargeError struct{ limit int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("observation: message over the maximum message size of %d bytes (openpi.max_message_bytes)", e.limit)
}

// read reads the next message, at most MaxMessageBytes (the buffer grows
// with the bytes received), under the ReadTimeout once it started.
func (c *conn) read(ctx context.Context, dl *frontend.Deadline) message {
	s := c.s
	typ, r, err := c.ws.Reader(ctx)
	if err != nil {
		if f := dl.Fired(); f != nil {
			return message{err: f}
		}
		return message{err: err}
	}
	at := time.Now()
	dl.Arm(s.o.ReadTimeout, errReadTimeout)
	var buf bytes.Buffer
	_, err = buf.ReadFrom(io.LimitReader(r, int64(s.o.MaxMessageBytes)+1))
	dl.Disarm()
	if err != nil {
		if f := dl.Fired(); f != nil {
			return message{err: f}
		}
		return message{err: err}
	}
	if buf.Len() > s.o.MaxMessageBytes {
		return message{err: &tooLargeError{limit: s.o.MaxMessageBytes}}
	}
	return message{typ: typ, data: buf.Bytes(), at: at, read: time.Now()}
}

func (c *conn) serve() {
	s := c.s
	defer c.ws.CloseNow() //nolint:errcheck // after a clean close this is a no-op
	defer c.sess.close(s.o.Gateway)
	// Predictions of this connection: cancelled when the peer goes away.
	pctx, cancelPred := context.WithCancel(s.conns.Context())
	defer cancelPred()

	// The reader runs from the start, so that a peer that leaves while
	// the gateway warms up is seen (its slot freed) and its pings are
	// answered.
	rctx, cancelRead := context.WithCancel(pctx)
	defer cancelRead()
	dl := frontend.NewDeadline(cancelRead)
	defer dl.Disarm()
	msgs := make(chan message)
	// quit, not pctx, ends the reader's hand-off: the reader cancels pctx
	// itself when the peer goes, and must still deliver that error (a
	// select on pctx lost it half the time: the connection then waited
	// for a message that never came, holding its slot until shutdown).
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			m := c.read(rctx, dl)
			if m.err != nil {
				var tl *tooLargeError
				if !errors.As(m.err, &tl) && m.err != errIdle && m.err != errReadTimeout {
					cancelPred() // the peer is gone: stop its prediction
				}
			}
			select {
			case msgs <- m:
			case <-quit:
				return
			}
			if m.err != nil {
				return
			}
		}
	}()

	// Wait for readiness before the metadata (openpi clients block on it).
	// A message sent before it (no openpi client does) is served after.
	var early *message
	for in := msgs; !s.o.Gateway.Ready(); {
		select {
		case <-c.stopCh:
			c.ws.Close(websocket.StatusGoingAway, "server shutting down") //nolint:errcheck
			return
		case m := <-in:
			if m.err != nil {
				s.log.Debug("openpi: connection closed while starting", "peer", c.peer, "err", m.err.Error())
				return
			}
			early, in = &m, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := c.write(websocket.MessageBinary, metadata(s)); err != nil {
		return
	}
	s.log.Debug("openpi: connected", "peer", c.peer)
	if early == nil {
		dl.Arm(s.o.IdleTimeout, errIdle)
	}
	var prevTotal time.Duration = -1
	for {
		var m message
		if early != nil {
			m, early = *early, nil
		} else {
			select {
			case m = <-msgs:
				dl.Disarm() // serving: bounded by the request's own deadline
			case <-c.stopCh:
				c.ws.Close(websocket.StatusGoingAway, "server shutting down") //nolint:errcheck
				return
			}
		}
		if m.err != nil {
			var tl *tooLargeError
			switch {
			case errors.As(m.err, &tl):
				rid := service.NewRequestID()
				_, end := s.o.Gateway.StartMessage(s.conns.Context(), service.Message{Protocol: "openpi", Endpoint: "infer", RequestID: rid, Peer: c.peer})
				he := &service.HandlerError{Status: http.StatusRequestEntityTooLarge, Code: service.CodeTooLarge, Field: "observation", Err: m.err}
				end(he.Code, he)
				c.fail(he, rid)
			case m.err == errIdle || m.err == errReadTimeout:
				s.log.Debug("openpi: connection closed", "peer", c.peer, "reason", m.err.Error())
				c.ws.CloseNow() //nolint:errcheck // the timer's cancel already closed it
			default:
				s.log.Debug("openpi: connection closed", "peer", c.peer, "err", m.err.Error())
			}
			return
		}
		rid := service.NewRequestID()
		if m.typ != websocket.MessageBinary {
			c.fail(schema("observation", "observation: expected a binary msgpack frame, got a text frame"), rid)
			return
		}
		out, err := s.infer(pctx, m.data, rid, m.read, prevTotal, c.peer, &c.sess)
		if err != nil {
			c.fail(err, rid)
			return
		}
		if err := c.write(websocket.MessageBinary, out); err != nil {
			return
		}
		prevTotal = time.Since(m.at)
		s.log.Info("openpi request", "request_id", rid, "peer", c.peer, "bytes", len(m.data),
			"duration_ms", float64(time.Since(m.read).Microseconds())/1e3)
		dl.Arm(s.o.IdleTimeout, errIdle)
		select {
		case <-c.stopCh:
			c.ws.Close(websocket.StatusGoingAway, "server shutting down") //nolint:errcheck
			return
		default:
		}
	}
}

func (c *conn) write(typ websocket.MessageType, b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.o.WriteTimeout)
	defer cancel()
	err := c.ws.Write(ctx, typ, b)
	if err != nil {
		c.s.log.Info("openpi: reply not delivered", "peer", c.peer, "err", err.Error())
	}
	return err
}

// fail sends err as upstream does: one text frame, then close 1011.
func (c *conn) fail(err error, rid string) {
	var he *service.HandlerError
	if !errors.As(err, &he) {
		he = &service.HandlerError{Status: http.StatusInternalServerError, Code: service.CodeInternal, Err: err}
	}
	lvl := c.s.log.Info
	if he.Code == service.CodeInternal || he.Code == service.CodeDevice {
		lvl = c.s.log.Error
	}
	lvl("openpi request failed", "request_id", rid, "peer", c.peer, "code", he.Code, "field", he.Field, "err", he.Err.Error())
	text := he.Err.Error() + "\ncode: " + he.Code
	if he.Field != "" {
		text += "\nfield: " + he.Field
	}
	text += "\nrequest_id: " + rid + "\n"
	if c.write(websocket.MessageText, []byte(text)) == nil {
		c.ws.Close(websocket.StatusInternalError, "error: see the previous frame") //nolint:errcheck
	}
}
