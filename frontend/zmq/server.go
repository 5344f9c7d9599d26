// Package zmq serves Isaac-GR00T's ZeroMQ policy protocol (the
// PolicyServer / PolicyClient of gr00t/policy/server_client.py, N1.5 to
// N1.7 and upstream HEAD) on gr00tgw's pipeline: existing robot clients
// (pyzmq REQ sockets sending msgpack {"endpoint", "data", "api_token"})
// connect unchanged. Endpoints ping, get_modality_config, get_action,
// reset and kill (refused unless enabled); both array encodings in the
// field (N1.7 release's .npy-in-msgpack, msgpack_numpy's bin-keyed maps),
// the reply in the request's encoding; nested (N1.6/N1.7), flat (sim
// wrapper) and N1.5 observations; B > 1 batches served as B predictions.
//
// Every request runs through service.Service.Predict, so admission, the
// queue, deadlines, the device lock, plugins, spans and metrics are the
// ones HTTP /predict has. The transport is the package's own minimal ZMTP
// 3.0 peer (wire/zmtp; RATIONALE.md "Dependencies"): one goroutine
// per TCP connection, each connection one peer, so any number of clients
// are served at once.
package zmq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gr00tgw/gr00tgw/frontend"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
	"github.com/gr00tgw/gr00tgw/wire/zmtp"
)

// DefaultMaxBatch is Options.MaxBatch's default; the connection limits'
// defaults are frontend's (frontend.Limits).
const DefaultMaxBatch = 8

const (
	handshakeTimeout = 10 * time.Second
	// discardMin is the smallest over-limit message that is read and
	// dropped (to answer an error and keep the connection) rather than
	// ending the connection: bytes read, never held.
	discardMin = 256 << 20
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = frontend.ErrServerClosed

// Options configure New.
type Options struct {
	// Gateway serves the predictions (required).
	Gateway service.Service
	// Token, when set, is required as every request's api_token
	// (constant-time compare); "" accepts every request, as upstream
	// does by default.
	Token string
	// Keys, when set (auth.api_keys_file), is required too: a request
	// passes when its api_token is Token or one of these keys. Reload
	// the keyring in place to rotate keys.
	Keys *secure.Keyring
	// Limits bound connections and messages (frontend's defaults):
	// MaxMessageBytes is checked against every frame's declared length
	// before it is read; IdleTimeout closes a connection that sends
	// nothing (pyzmq reconnects by itself); beyond MaxConnections new
	// connections are closed at once.
	frontend.Limits
	// MaxBatch bounds B of a batched observation (default 8).
	MaxBatch int
	// AllowKill lets a client's kill endpoint stop the server (OnKill);
	// off by default: kill is answered with an error.
	AllowKill bool
	// OnKill is called (once per accepted kill, in its own goroutine)
	// when AllowKill is set.
	OnKill func()
	// Logger receives connection and request logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Server is one ZeroMQ endpoint, a frontend.FrontEnd. Create it with New,
// run Serve on a listener, stop it with Shutdown. Safe for concurrent use.
type Server struct {
	o     Options
	log   *slog.Logger
	conns *frontend.Conns
}

var _ frontend.FrontEnd = (*Server)(nil)

// New checks o and returns a server.
func New(o Options) (*Server, error) {
	if o.Gateway == nil {
		return nil, errors.New("zmq: Options.Gateway is required")
	}
	o.Limits = o.Limits.WithDefaults()
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Server{o: o, log: o.Logger, conns: frontend.NewConns(o.MaxConnections)}, nil
}

// Name is "zmq".
func (s *Server) Name() string { return "zmq" }

// Serve accepts connections on ln until Shutdown (then it returns
// ErrServerClosed) or an accept error.
func (s *Server) Serve(ln net.Listener) error {
	done, ok := s.conns.Listen(ln)
	if !ok {
		return ErrServerClosed
	}
	defer done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.conns.Draining() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("zmq: accept: %w", err)
		}
		backoff = 0
		if !s.conns.Acquire() {
			s.log.Warn("zmq: connection refused: max connections reached", "peer", nc.RemoteAddr().String(), "max", s.o.MaxConnections)
			nc.Close()
			continue
		}
		tc, ok := s.conns.Track(true, frontend.Handle{Close: func() { nc.Close() }})
		if !ok {
			nc.Close()
			s.conns.Release()
			return ErrServerClosed
		}
		c := &conn{s: s, nc: nc, tc: tc}
		go c.serve()
	}
}

// Shutdown stops accepting, closes idle connections, lets the requests in
// flight finish and answer (each connection closes after its reply), and
// returns when all connections are closed; when ctx ends first, the rest
// are cancelled and closed and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error { return s.conns.Shutdown(ctx, nil) }

// conn is one client connection.
type conn struct {
	s  *Server
	nc net.Conn
	tc *frontend.Conn // idle while waiting for a message
}

func (c *conn) serve() {
	s := c.s
	peer := c.nc.RemoteAddr().String()
	defer func() {
		c.nc.Close()
		c.tc.Done()
		s.conns.Release()
	}()
	c.nc.SetDeadline(time.Now().Add(handshakeTimeout)) //nolint:errcheck // a failed deadline fails the next read
	zc, err := zmtp.Handshake(c.nc, zmtp.Options{SocketType: "ROUTER", MaxMessage: s.o.MaxMessageBytes,
		DiscardMax: max(4*int64(s.o.MaxMessageBytes), discardMin)})
	if err != nil {
		s.log.Info("zmq: handshake failed", "peer", peer, "err", err.Error())
		return
	}
	c.nc.SetDeadline(time.Time{}) //nolint:errcheck
	s.log.Debug("zmq: connected", "peer", peer, "socket_type", zc.PeerType)
	for {
		if !c.tc.SetIdle(true) {
			return
		}
		c.nc.SetReadDeadline(time.Now().Add(s.o.IdleTimeout)) //nolint:errcheck
		if err := zc.AwaitData(); err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				s.log.Debug("zmq: idle connection closed", "peer", peer, "idle_timeout", s.o.IdleTimeout.String())
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				s.log.Info("zmq: connection closed", "peer", peer, "err", err.Error())
			}
			return
		}
		if !c.tc.SetIdle(false) {
			return
		}
		c.nc.SetReadDeadline(time.Now().Add(s.o.ReadTimeout)) //nolint:errcheck
		frames, err := zc.ReadMessage()
		start := time.Now() // the message is in memory: the host's work starts
		var payload []byte
		envelope := [][]byte{nil} // a REQ peer's empty delimiter
		var tl *zmtp.TooLargeError
		switch {
		case errors.As(err, &tl) && tl.Discarded:
			payload = nil
		case err != nil:
			s.log.Info("zmq: connection closed", "peer", peer, "err", err.Error())
			return
		default:
			envelope, payload = splitEnvelope(frames)
		}
		c.nc.SetReadDeadline(time.Time{}) //nolint:errcheck
		var reply []byte
		if tl != nil {
			rid := service.NewRequestID()
			_, end := s.o.Gateway.StartMessage(s.conns.Context(), service.Message{Protocol: "zmq", Endpoint: "invalid", RequestID: rid, Start: start, Peer: peer})
			terr := &service.HandlerError{Status: http.StatusRequestEntityTooLarge, Code: service.CodeTooLarge, Field: "request",
				Err: fmt.Errorf("request: %v (zmq.max_message_bytes)", tl)}
			end(service.CodeTooLarge, terr)
			s.log.Info("zmq request refused", "request_id", rid, "peer", peer, "code", service.CodeTooLarge, "size", tl.Size)
			rep, _ := errorReply(terr, rid)
			reply = marshalReply(rep, rid)
		} else {
			reply = c.handleWatched(zc, payload, peer, start)
		}
		c.nc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout)) //nolint:errcheck
		if err := zc.WriteMessage(append(envelope, reply)...); err != nil {
			s.log.Info("zmq: reply not delivered", "peer", peer, "err", err.Error())
			return
		}
		c.nc.SetWriteDeadline(time.Time{}) //nolint:errcheck
	}
}

// handleWatched runs the request while watching the connection: a peer
// that disconnects (a client past its 15 s timeout recreates its socket)
// cancels its request, queued or on the device.
func (c *conn) handleWatched(zc *zmtp.Conn, payload []byte, peer string, start time.Time) []byte {
	ctx, cancel := context.WithCancel(c.s.conns.Context())
	defer cancel()
	watch := make(chan struct{})
	c.nc.SetReadDeadline(time.Time{}) //nolint:errcheck
	go func() {
		defer close(watch)
		// Heartbeat PINGs during the request are answered (the reply is
		// written only after this returns) and the watch goes on; a data
		// frame (a pipelining DEALER) ends it unread.
		if err := zc.AwaitData(); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				cancel() // the peer is gone
			}
		}
	}()
	reply := c.s.handle(ctx, payload, peer, start)
	c.nc.SetReadDeadline(time.Unix(1, 0)) //nolint:errcheck // unblocks the watcher's Peek
	<-watch
	return reply
}

// splitEnvelope splits a message into its routing envelope (every frame
// up to and including the first empty one: a REQ peer's delimiter) and
// its payload (the last frame). A message without an empty frame (a bare
// DEALER) has no envelope.
func splitEnvelope(frames [][]byte) ([][]byte, []byte) {
	if len(frames) == 0 {
		return nil, nil
	}
	for i, f := range frames[:len(frames)-1] {
		if len(f) == 0 {
			return frames[:i+1], frames[len(frames)-1]
		}
	}
	return nil, frames[len(frames)-1]
}

// marshalReply encodes a reply; an encoding failure (a bug) is answered
// as an error.
func marshalReply(r reply, rid string) []byte {
	b, err := wire.Marshal(r.v, r.enc)
	if err != nil {
		b, _ = wire.Marshal(wire.NewMap(3).Set("error", "encode reply: "+err.Error()).Set("code", service.CodeInternal).Set("request_id", rid), wire.EncodingNPY)
	}
	return b
}
