package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/frontend"
	"github.com/gr00tgw/gr00tgw/frontend/openpi"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/frontend/zmq"
	"github.com/gr00tgw/gr00tgw/service"
)

// protocolServers are serve's robot-protocol endpoints (config zmq.*,
// openpi.*), each a frontend.FrontEnd on its own listener, all on the one
// gateway; they are started and drained alike.
type protocolServers struct {
	fronts []frontend.FrontEnd
	// errs receives an endpoint's Serve error (not its clean close).
	errs chan error
	// kill is closed when a ZeroMQ client's kill was accepted
	// (zmq.allow_kill).
	kill     chan struct{}
	killOnce sync.Once
}

// protocolEndpoint is one configured endpoint before it listens.
type protocolEndpoint struct {
	key, addr string // the config key of its address, and the address
	build     func() (frontend.FrontEnd, error)
	// logMsg and logAttrs are the "listening" log line.
	logMsg   string
	logAttrs []any
}

// startProtocols opens the configured endpoints' listeners (after the HTTP
// one) and serves them; an endpoint whose addr is empty stays off.
// keys (auth.api_keys_file, nil: off) is required by both, besides their
// own zmq.api_token and openpi.api_key.
func startProtocols(cfg config.Config, srv service.Service, log *slog.Logger, version string, keys *secure.Keyring) (*protocolServers, error) {
	p := &protocolServers{errs: make(chan error, 2), kill: make(chan struct{})}
	endpoints := []protocolEndpoint{{
		key: "zmq.addr", addr: cfg.ZMQ.Addr,
		build: func() (frontend.FrontEnd, error) {
			return zmq.New(zmq.Options{
				Gateway: srv, Token: cfg.ZMQ.APIToken, Keys: keys, MaxBatch: cfg.ZMQ.MaxBatch,
				Limits: frontend.Limits{MaxMessageBytes: cfg.ZMQ.MaxMessageBytes, IdleTimeout: cfg.ZMQ.IdleTimeout,
					ReadTimeout: cfg.ZMQ.ReadTimeout, MaxConnections: cfg.MaxConnections},
				AllowKill: cfg.ZMQ.AllowKill, OnKill: func() { p.killOnce.Do(func() { close(p.kill) }) },
				Logger: log,
			})
		},
		logMsg:   "listening (ZeroMQ: Isaac-GR00T policy protocol)",
		logAttrs: []any{"api_token", cfg.ZMQ.APIToken != "", "api_keys", keys.Enabled(), "allow_kill", cfg.ZMQ.AllowKill},
	}, {
		key: "openpi.addr", addr: cfg.OpenPI.Addr,
		build: func() (frontend.FrontEnd, error) {
			return openpi.New(openpi.Options{
				Gateway: srv, APIKey: cfg.OpenPI.APIKey, Keys: keys,
				Limits: frontend.Limits{MaxMessageBytes: cfg.OpenPI.MaxMessageBytes, IdleTimeout: cfg.OpenPI.IdleTimeout,
					ReadTimeout: cfg.OpenPI.ReadTimeout, MaxConnections: cfg.MaxConnections},
				Version: version, Logger: log,
			})
		},
		logMsg:   "listening (openpi websocket policy protocol)",
		logAttrs: []any{"api_key", cfg.OpenPI.APIKey != "", "api_keys", keys.Enabled()},
	}}
	for _, e := range endpoints {
		if e.addr == "" {
			continue
		}
		if err := p.start(e, log); err != nil {
			p.shutdown(context.Background()) //nolint:errcheck // the start error is the one to report
			return nil, err
		}
	}
	return p, nil
}

// start listens on e's address and serves e's front end there.
func (p *protocolServers) start(e protocolEndpoint, log *slog.Logger) error {
	a, err := config.ListenAddr(e.addr)
	if err != nil {
		return fmt.Errorf("%s: %w", e.key, err)
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return fmt.Errorf("listen %s %s: %w", e.key, a, err)
	}
	f, err := e.build()
	if err != nil {
		ln.Close()
		return err
	}
	p.fronts = append(p.fronts, f)
	go func() {
		if err := f.Serve(ln); err != nil && !errors.Is(err, frontend.ErrServerClosed) {
			p.errs <- err
		}
	}()
	log.Info(e.logMsg, append([]any{"addr", ln.Addr().String()}, e.logAttrs...)...)
	return nil
}

// shutdown stops accepting on every endpoint and lets their requests in
// flight answer, bounded by ctx; the endpoints drain at once.
func (p *protocolServers) shutdown(ctx context.Context) error {
	errs := make([]error, len(p.fronts))
	var wg sync.WaitGroup
	for i, f := range p.fronts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Shutdown(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", f.Name(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
