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
// Every request runs through gateway.Service.Predict, so admission, the
// queue, deadlines, the device lock, plugins, spans and metrics are the
// ones HTTP /predict has. The transport is the package's own minimal ZMTP
// 3.0 server (internal/zmtp; RATIONALE.md "Dependencies"): one goroutine
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/gr00tgw/gr00tgw/gateway"
	"github.com/gr00tgw/gr00tgw/gateway/secure"
	"github.com/gr00tgw/gr00tgw/wire"
	"github.com/gr00tgw/gr00tgw/gateway/zmq/internal/zmtp"
)

// Defaults of Options.
const (
	DefaultMaxMessageBytes = 64 << 20
	DefaultMaxBatch        = 8
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultReadTimeout     = 30 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
	DefaultMaxConnections  = 1024
	handshakeTimeout       = 10 * time.Second
	// discardMin is the smallest over-limit message that is read and
	// dropped (to answer an error and keep the connection) rather than
	// ending the connection: bytes read, never held.
	discardMin = 256 << 20
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("zmq: server closed")

// Options configure New.
type Options struct {
	// Gateway serves the predictions (required).
	Gateway gateway.Service
	// Token, when set, is required as every request's api_token
	// (constant-time compare); "" accepts every request, as upstream
	// does by default.
	Token string
	// Keys, when set (auth.api_keys_file), is required too: a request
	// passes when its api_token is Token or one of these keys. Reload
	// the keyring in place to rotate keys.
	Keys *secure.Keyring
	// MaxMessageBytes bounds a request message, checked against every
	// frame's declared length before it is read (default 64 MiB).
	MaxMessageBytes int
	// MaxElements bounds the decoded msgpack elements of one request
	// (default 1<<20).
	MaxElements int
	// MaxBatch bounds B of a batched observation (default 8).
	MaxBatch int
	// AllowKill lets a client's kill endpoint stop the server (OnKill);
	// off by default: kill is answered with an error.
	AllowKill bool
	// OnKill is called (once per accepted kill, in its own goroutine)
	// when AllowKill is set.
	OnKill func()
	// IdleTimeout closes a connection that sends nothing for this long
	// (default 10 min; pyzmq reconnects by itself).
	IdleTimeout time.Duration
	// ReadTimeout bounds the reading of one message once its first byte
	// arrived (default 30 s); WriteTimeout the writing of a reply.
	ReadTimeout, WriteTimeout time.Duration
	// MaxConnections bounds the connections served at once (default
	// 1024); beyond it new connections are closed at once.
	MaxConnections int
	// Logger receives connection and request logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Server is one ZeroMQ endpoint. Create it with New, run Serve on a
// listener, stop it with Shutdown. Safe for concurrent use.
type Server struct {
	o   Options
	log *slog.Logger
	sem chan struct{}

	baseCtx context.Context
	cancel  context.CancelFunc

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	draining atomic.Bool
	wg       sync.WaitGroup
}

// New checks o and returns a server.
func New(o Options) (*Server, error) {
	if o.Gateway == nil {
		return nil, errors.New("zmq: Options.Gateway is required")
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.MaxElements <= 0 {
		o.MaxElements = 1 << 20
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{o: o, log: o.Logger, sem: make(chan struct{}, o.MaxConnections),
		lns: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Serve accepts connections on ln until Shutdown (then it returns
// ErrServerClosed) or an accept error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.draining.Load() {
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
		select {
		case s.sem <- struct{}{}:
		default:
			s.log.Warn("zmq: connection refused: max connections reached", "peer", nc.RemoteAddr().String(), "max", s.o.MaxConnections)
			nc.Close()
			continue
		}
		c := &conn{s: s, nc: nc, idle: true}
		s.mu.Lock()
		if s.draining.Load() {
			s.mu.Unlock()
			nc.Close()
			<-s.sem
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting, closes idle connections, lets the requests in
// flight finish and answer (each connection closes after its reply), and
// returns when all connections are closed; when ctx ends first, the rest
// are cancelled and closed and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		if c.idle {
			c.nc.Close()
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
	}
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	<-done
	return ctx.Err()
}

// conn is one client connection.
type conn struct {
	s    *Server
	nc   net.Conn
	idle bool // waiting for a message (guarded by s.mu)
}

// setIdle marks the connection idle or busy; false when the server is
// draining (the connection should close).
func (c *conn) setIdle(idle bool) bool {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.idle = idle
	return !c.s.draining.Load()
}

func (c *conn) serve() {
	s := c.s
	peer := c.nc.RemoteAddr().String()
	defer func() {
		c.nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		<-s.sem
		s.wg.Done()
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
		if !c.setIdle(true) {
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
		if !c.setIdle(false) {
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
			rid := gateway.NewRequestID()
			_, end := s.o.Gateway.StartMessage(s.baseCtx, gateway.Message{Protocol: "zmq", Endpoint: "invalid", RequestID: rid, Start: start, Peer: peer})
			terr := &gateway.HandlerError{Status: http.StatusRequestEntityTooLarge, Code: gateway.CodeTooLarge, Field: "request",
				Err: fmt.Errorf("request: %v (zmq.max_message_bytes)", tl)}
			end(gateway.CodeTooLarge, terr)
			s.log.Info("zmq request refused", "request_id", rid, "peer", peer, "code", gateway.CodeTooLarge, "size", tl.Size)
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
	ctx, cancel := context.WithCancel(c.s.baseCtx)
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
		b, _ = wire.Marshal(wire.NewMap(3).Set("error", "encode reply: "+err.Error()).Set("code", gateway.CodeInternal).Set("request_id", rid), wire.EncodingNPY)
	}
	return b
}
