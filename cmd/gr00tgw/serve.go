package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device"
	_ "github.com/gr00tgw/gr00tgw/device/cpu" // registers backend "cpu"
	"github.com/gr00tgw/gr00tgw/device/runner"
	"github.com/gr00tgw/gr00tgw/gateway"
	"github.com/gr00tgw/gr00tgw/gateway/adapt"
	"github.com/gr00tgw/gr00tgw/gateway/oip"
)

func init() {
	register(&command{name: "serve", summary: "serve the HTTP API (POST /predict, /health, /info, /metrics, ...)", run: runServe})
}

// newLogger builds the process logger from the log.* keys.
func newLogger(c config.Log) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// runServe is `gr00tgw serve`: listen at once (/health = starting), load and
// warm up, then serve until SIGTERM/SIGINT (drain, release, exit 0).
// SIGHUP reloads the plugins, the TLS certificate and the API keys. Any start-up failure returns an error naming
// the cause (exit 1).
func runServe(ctx context.Context, args []string) error {
	fs := newFlags("serve", "[--config FILE] [--<key> value ...]",
		"Serves the HTTP API. Every configuration key is a flag, an environment\nvariable and a YAML key (`gr00tgw config print` shows the effective values).\nSIGHUP or POST /admin/reload re-reads plugins_dir; SIGTERM drains and exits.")
	file := configFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	loaded, err := loadConfig(fs, *file)
	if err != nil {
		return err
	}
	cfg := loaded.Config
	log := newLogger(cfg.Log)
	slog.SetDefault(log)
	ver := versionString()
	log.Info("gr00tgw starting", "version", ver, "addr", cfg.Addr, "backend", cfg.Backend, "policy", cfg.Policy)
	sec, err := loadSecurity(cfg, log)
	if err != nil {
		return err
	}

	tp, stopTraces, err := gateway.NewTracerProvider(ctx, cfg.OTel, ver, nil)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTraces(sctx); err != nil {
			log.Warn("flushing spans", "err", err)
		}
	}()
	opts := gateway.Options{Config: cfg, Logger: log, TracerProvider: tp, Version: ver, Keys: sec.keys}
	if cfg.Metrics.Enabled {
		mp, h, err := gateway.NewPrometheus()
		if err != nil {
			return err
		}
		defer func() { _ = mp.Shutdown(context.Background()) }()
		opts.MeterProvider, opts.MetricsHandler = mp, h
	}
	srv, err := gateway.New(opts)
	if err != nil {
		return err
	}
	oip.Mount(srv) // Open Inference Protocol v2: GET /v2, POST /v2/models/{name}/infer

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	ln = sec.listen(ln)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening (health: starting)", "addr", ln.Addr().String())
	protos, err := startProtocols(cfg, srv, log, ver, sec.keys)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}

	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	startErr := make(chan error, 1)
	go func() {
		startErr <- srv.Start(startCtx, func(ctx context.Context) (*gateway.Deps, error) {
			return openServing(ctx, cfg, log, opts.MeterProvider)
		})
	}()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	shutdown := func() error {
		cancelStart()
		log.Info("shutting down: draining in-flight requests", "drain_timeout", cfg.DrainTimeout.String())
		// The robot-protocol endpoints stop accepting and answer their
		// requests in flight while the gateway drains (it closes the
		// backend only once every admitted request has finished).
		pctx, cancelP := context.WithTimeout(context.Background(), cfg.DrainTimeout)
		defer cancelP()
		pdone := make(chan error, 1)
		go func() { pdone <- protos.shutdown(pctx) }()
		err := srv.Shutdown(context.Background())
		if err != nil {
			log.Warn("shutdown", "err", err)
		}
		if err := <-pdone; err != nil {
			log.Warn("shutdown: robot-protocol endpoints", "err", err)
		}
		log.Info("Closing device; bye")
		return nil
	}
	for {
		select {
		case err := <-startErr:
			if err != nil && ctx.Err() != nil {
				return shutdown() // stopped by a signal while starting: a clean exit
			}
			if err != nil {
				log.Error("start-up failed", "err", err)
				_ = protos.shutdown(context.Background())
				_ = srv.Shutdown(context.Background())
				return err
			}
			startErr = nil
		case <-hup:
			sec.reload(log)
			log.Info("SIGHUP: reloading plugins")
			// Server.Reload is tracked by the server (Shutdown waits for
			// it, and it refuses to start once shutdown began).
			go func() {
				if _, err := srv.Reload(ctx); err != nil {
					log.Error("SIGHUP reload", "err", err)
				}
			}()
		case err := <-serveErr:
			if err != nil {
				_ = protos.shutdown(context.Background())
				_ = srv.Shutdown(context.Background())
				return fmt.Errorf("serve: %w", err)
			}
			return nil
		case err := <-protos.errs:
			log.Error("robot-protocol endpoint failed", "err", err)
			_ = shutdown()
			return fmt.Errorf("serve: %w", err)
		case <-protos.kill:
			log.Warn("kill requested by a ZeroMQ client (zmq.allow_kill)")
			return shutdown()
		case <-ctx.Done():
			return shutdown()
		}
	}
}

// openServing builds the serving dependencies from cfg (gateway/adapt):
// the embodiment plugins, tokenizer + processor, the backend and the demo.
// Directories left empty default to the embedded assets of the checkout or
// image (package assets): the n17-tiny checkpoint, the vendored tokenizer,
// build/plugins, and the checkpoint's demo. Tests replace it.
var openServing = func(ctx context.Context, cfg config.Config, log *slog.Logger, mp metric.MeterProvider) (*gateway.Deps, error) {
	root, err := assets.Root()
	if err != nil && (cfg.WeightsDir == "" || cfg.TokenizerDir == "" || cfg.PluginsDir == "") {
		return nil, err
	}
	return adapt.OpenWith(ctx, cfg, adapt.Resolve(cfg, root), log, mp, backendOpener(cfg, log))
}

// backendOpener opens the backend where config device.isolation says:
// nil (adapt's in-process device.Open) for inproc; for process, a pool of
// device.runners supervised runner children — this binary's `runner`
// subcommand unless device.runner_command names another program.
func backendOpener(cfg config.Config, log *slog.Logger) device.OpenFunc {
	if cfg.Device.Isolation != "process" {
		return nil
	}
	return func(ctx context.Context, o device.Options) (device.Backend, error) {
		argv := cfg.Device.RunnerCommand
		if len(argv) == 0 {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("runner: %w", err)
			}
			argv = []string{exe, "runner", "--log-format", cfg.Log.Format}
		}
		log.Info(fmt.Sprintf("Starting %d runner process(es): %s", cfg.Device.Runners, argv[0]))
		return runner.Open(ctx, runner.Options{
			Command: argv, Backend: cfg.Backend, Device: o, Runners: cfg.Device.Runners,
			PingInterval: cfg.Device.RunnerPingInterval, PingTimeout: cfg.Device.RunnerPingTimeout,
			CallGrace: cfg.Device.RunnerCallGrace, StartTimeout: cfg.Device.RunnerStartTimeout,
			MaxRestarts: cfg.Device.RunnerMaxRestarts, Logger: log,
		})
	}
}
