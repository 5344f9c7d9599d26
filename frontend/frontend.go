// Package frontend holds what every protocol front end shares: the
// lifecycle interface serve starts and drains them through (FrontEnd),
// their connection limits with defaults (Limits), the bookkeeping of
// their connections — a bound on how many are served at once, which ones
// wait for a request and which serve one, draining and the forced close
// at a deadline (Conns) —, a per-connection read deadline for transports
// read through a context (Deadline), and the restating of a service
// error's field in a protocol's own names (RenameField).
//
// The lifecycle follows Caddy's App Start/Stop: a front end is built
// with its options, Serve runs it on a listener the caller opened, and
// Shutdown drains it, bounded by a context.
package frontend

import (
	"context"
	"net"
	"net/http"
	"time"
)

// FrontEnd is one protocol endpoint on the gateway's service.
type FrontEnd interface {
	// Name names the protocol in logs and errors ("zmq", "openpi").
	Name() string
	// Serve accepts connections on ln until Shutdown, then returns an
	// error matching ErrServerClosed; any other error (accepting failed)
	// is returned as it happens. Shutdown closes the listeners Serve
	// runs on.
	Serve(ln net.Listener) error
	// Shutdown stops accepting, lets the requests in flight answer and
	// returns when every connection is closed; when ctx ends first, the
	// rest are cancelled and closed and ctx's error is returned.
	Shutdown(ctx context.Context) error
}

// ErrServerClosed is what Serve returns after Shutdown. It is net/http's
// own value, so that a front end built on http.Server returns its Serve
// error as it is.
var ErrServerClosed = http.ErrServerClosed

// Defaults of Limits.
const (
	DefaultMaxConnections  = 1024
	DefaultMaxMessageBytes = 64 << 20
	DefaultMaxElements     = 1 << 20
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultReadTimeout     = 30 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
)

// Limits bound a front end's connections and messages. Zero fields take
// the defaults (WithDefaults).
type Limits struct {
	// MaxConnections bounds the connections served at once (default
	// 1024); beyond it a new connection is refused at once.
	MaxConnections int
	// MaxMessageBytes bounds one request message (default 64 MiB).
	MaxMessageBytes int
	// MaxElements bounds the decoded msgpack elements of one request
	// (default 1<<20, wire.DefaultLimits).
	MaxElements int
	// IdleTimeout closes a connection that sends no request for this
	// long (default 10 min).
	IdleTimeout time.Duration
	// ReadTimeout bounds the reading of one request once its first byte
	// arrived (default 30 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of one reply (default 30 s).
	WriteTimeout time.Duration
}

// WithDefaults returns l with every zero or negative field set to its
// default.
func (l Limits) WithDefaults() Limits {
	orDefault(&l.MaxConnections, DefaultMaxConnections)
	orDefault(&l.MaxMessageBytes, DefaultMaxMessageBytes)
	orDefault(&l.MaxElements, DefaultMaxElements)
	orDefault(&l.IdleTimeout, DefaultIdleTimeout)
	orDefault(&l.ReadTimeout, DefaultReadTimeout)
	orDefault(&l.WriteTimeout, DefaultWriteTimeout)
	return l
}

func orDefault[T int | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}
