package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/gateway/openpi"
	"github.com/gr00tgw/gr00tgw/gateway/secure"
	"github.com/gr00tgw/gr00tgw/gateway/zmq"
	"github.com/gr00tgw/gr00tgw/service"
)

// protocolServers are serve's robot-protocol endpoints (config zmq.*,
// openpi.*), each on its own listener, all on the one gateway.
type protocolServers struct {
	zmq    *zmq.Server
	openpi *openpi.Server
	// errs receives an endpoint's Serve error (not its clean close).
	errs chan error
	// kill is closed when a ZeroMQ client's kill was accepted
	// (zmq.allow_kill).
	kill     chan struct{}
	killOnce sync.Once
}

// startProtocols opens the configured endpoints' listeners (after the HTTP
// one) and serves them; an endpoint whose addr is empty stays off.
// keys (auth.api_keys_file, nil: off) is required by both, besides their
// own zmq.api_token and openpi.api_key.
func startProtocols(cfg config.Config, srv service.Service, log *slog.Logger, version string, keys *secure.Keyring) (*protocolServers, error) {
	p := &protocolServers{errs: make(chan error, 2), kill: make(chan struct{})}
	listen := func(key, addr string) (net.Listener, error) {
		a, err := config.ListenAddr(addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return nil, fmt.Errorf("listen %s %s: %w", key, a, err)
		}
		return ln, nil
	}
	if cfg.ZMQ.Addr != "" {
		ln, err := listen("zmq.addr", cfg.ZMQ.Addr)
		if err != nil {
			return nil, err
		}
		z, err := zmq.New(zmq.Options{
			Gateway: srv, Token: cfg.ZMQ.APIToken, Keys: keys, MaxMessageBytes: cfg.ZMQ.MaxMessageBytes, MaxBatch: cfg.ZMQ.MaxBatch,
			AllowKill: cfg.ZMQ.AllowKill, OnKill: func() { p.killOnce.Do(func() { close(p.kill) }) },
			IdleTimeout: cfg.ZMQ.IdleTimeout, ReadTimeout: cfg.ZMQ.ReadTimeout, MaxConnections: cfg.MaxConnections, Logger: log,
		})
		if err != nil {
			ln.Close()
			return nil, err
		}
		p.zmq = z
		go func() {
			if err := z.Serve(ln); err != nil && !errors.Is(err, zmq.ErrServerClosed) {
				p.errs <- err
			}
		}()
		log.Info("listening (ZeroMQ: Isaac-GR00T policy protocol)", "addr", ln.Addr().String(), "api_token", cfg.ZMQ.APIToken != "", "api_keys", keys.Enabled(),
			"allow_kill", cfg.ZMQ.AllowKill)
	}
	if cfg.OpenPI.Addr != "" {
		ln, err := listen("openpi.addr", cfg.OpenPI.Addr)
		if err != nil {
			p.shutdown(context.Background())
			return nil, err
		}
		o, err := openpi.New(openpi.Options{
			Gateway: srv, APIKey: cfg.OpenPI.APIKey, Keys: keys, MaxMessageBytes: cfg.OpenPI.MaxMessageBytes,
			IdleTimeout: cfg.OpenPI.IdleTimeout, ReadTimeout: cfg.OpenPI.ReadTimeout, MaxConnections: cfg.MaxConnections,
			Version: version, Logger: log,
		})
		if err != nil {
			ln.Close()
			p.shutdown(context.Background())
			return nil, err
		}
		p.openpi = o
		go func() {
			if err := o.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.errs <- err
			}
		}()
		log.Info("listening (openpi websocket policy protocol)", "addr", ln.Addr().String(), "api_key", cfg.OpenPI.APIKey != "", "api_keys", keys.Enabled())
	}
	return p, nil
}

// shutdown stops accepting on every endpoint and lets their requests in
// flight answer, bounded by ctx.
func (p *protocolServers) shutdown(ctx context.Context) error {
	var wg sync.WaitGroup
	var zerr, oerr error
	if p.zmq != nil {
		wg.Add(1)
		go func() { defer wg.Done(); zerr = p.zmq.Shutdown(ctx) }()
	}
	if p.openpi != nil {
		wg.Add(1)
		go func() { defer wg.Done(); oerr = p.openpi.Shutdown(ctx) }()
	}
	wg.Wait()
	return errors.Join(zerr, oerr)
}
