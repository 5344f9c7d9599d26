package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/binding"
	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/cpu" // registers backend "cpu"
	"github.com/gr00tgw/gr00tgw/device/runner"
	"github.com/gr00tgw/gr00tgw/device/torchrunner"
	httpfront "github.com/gr00tgw/gr00tgw/frontend/http"
	"github.com/gr00tgw/gr00tgw/frontend/oip"
	"github.com/gr00tgw/gr00tgw/service"
)

func init() {
	register(&command{name: "serve", summary: "serve the HTTP API (POST /predict, /health, /info, /metrics, ...)", run: runServe})
}

// newLogger builds the process logger from the log.* keys; format auto is
// text on a terminal, JSON otherwise.
func newLogger(c config.Log) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: lvl}
	if logFormat(c) == "text" {
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
	loaded, err := parseConfig(fs, args, file)
	if err != nil {
		return err
	}
	cfg := loaded.Config
	log := newLogger(cfg.Log)
	slog.SetDefault(log)
	ver := versionString()
	log.Info("gr00tgw starting", "version", ver, "addr", cfg.Addr, "backend", cfg.Backend, "policy", cfg.Policy)
	// The backend kind, and for torch the interpreter, before anything
	// listens or loads: a host that cannot serve the configuration fails
	// here with one line naming the key.
	if err := checkBackend(ctx, loaded, log); err != nil {
		return err
	}
	cfg = loaded.Config // checkBackend may have resolved device.torch.python
	sec, err := loadSecurity(cfg, log)
	if err != nil {
		return err
	}

	tp, stopTraces, err := service.NewTracerProvider(ctx, cfg.OTel, ver, nil)
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
	opts := service.Options{Config: cfg, Logger: log, TracerProvider: tp, Version: ver}
	hopts := httpfront.Options{TracerProvider: tp, Keys: sec.keys}
	if cfg.Metrics.Enabled {
		mp, h, err := httpfront.NewPrometheus()
		if err != nil {
			return err
		}
		defer func() { _ = mp.Shutdown(context.Background()) }()
		opts.MeterProvider, hopts.MeterProvider, hopts.MetricsHandler = mp, mp, h
	}
	core, err := service.New(opts)
	if err != nil {
		return err
	}
	srv, err := httpfront.New(core, hopts)
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
	protos, err := startProtocols(cfg, core, log, ver, sec.keys)
	if err != nil {
		_ = core.Shutdown(context.Background(), srv.Shutdown)
		return err
	}
	// stop drains the service with every front end alongside: they stop
	// accepting and answer their requests in flight while the service
	// drains (it closes the backend only once every admitted request has
	// finished).
	stop := func() error { return core.Shutdown(context.Background(), srv.Shutdown, protos.shutdown) }

	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	startErr := make(chan error, 1)
	go func() {
		startErr <- core.Start(startCtx, func(ctx context.Context) (*service.Deps, error) {
			return openServing(ctx, cfg, log, opts.MeterProvider)
		})
	}()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	shutdown := func() error {
		cancelStart()
		log.Info("shutting down: draining in-flight requests", "drain_timeout", cfg.DrainTimeout.String())
		if err := stop(); err != nil {
			log.Warn("shutdown", "err", err)
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
				_ = stop()
				return err
			}
			startErr = nil
		case <-hup:
			sec.reload(log)
			log.Info("SIGHUP: reloading plugins")
			// Server.Reload is tracked by the server (Shutdown waits for
			// it, and it refuses to start once shutdown began).
			go func() {
				if _, err := core.Reload(ctx); err != nil {
					log.Error("SIGHUP reload", "err", err)
				}
			}()
		case err := <-serveErr:
			if err != nil {
				_ = stop()
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

// openServing builds the serving dependencies from cfg (package binding):
// the embodiment plugins, tokenizer + processor, the backend and the demo.
// Directories left empty default to the embedded assets of the checkout or
// image (package assets): the n17-tiny checkpoint, the vendored tokenizer,
// build/plugins, and the checkpoint's demo. Tests replace it.
var openServing = func(ctx context.Context, cfg config.Config, log *slog.Logger, mp metric.MeterProvider) (*service.Deps, error) {
	root, err := assets.Root()
	if err != nil && (cfg.WeightsDir == "" || cfg.TokenizerDir == "" || cfg.PluginsDir == "") {
		return nil, err
	}
	return binding.OpenWith(ctx, cfg, binding.Resolve(cfg, root), log, mp, backendOpener(cfg, log))
}

// defaultTokenizer is the embedded default's Qwen3 tokenizer.json (package
// assets), for a checkpoint without its own; "" when the default is not
// found (a checkpoint without a tokenizer then fails to open, naming it).
func defaultTokenizer() string {
	d, err := assets.Path(assets.TokenizerDir)
	if err != nil {
		return ""
	}
	return filepath.Join(d, "tokenizer.json")
}

// backendOpener opens the backend where config device.isolation says:
// nil (adapt's in-process device.Open) for inproc; for process, a pool of
// device.runners supervised runner children — this binary's `runner`
// subcommand unless device.runner_command names another program, and for
// backend torch the PyTorch runner (device.torch.python -m
// gr00t_torchrunner, the package extracted from this binary), which is
// sent the noise of each request's seed (runner.Options.DrawNoise).
func backendOpener(cfg config.Config, log *slog.Logger) device.OpenFunc {
	if cfg.Device.Isolation != "process" {
		return nil
	}
	return func(ctx context.Context, o device.Options) (device.Backend, error) {
		argv := cfg.Device.RunnerCommand
		var env []string
		torch := cfg.Backend == config.BackendTorch
		if torch {
			dir, err := torchrunner.Extract()
			if err != nil {
				return nil, err
			}
			argv, env = torchOptions(cfg).Command(dir, nil)
		} else if len(argv) == 0 {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("runner: %w", err)
			}
			argv = []string{exe, "runner", "--log-format", logFormat(cfg.Log)}
		}
		log.Info(fmt.Sprintf("Starting %d runner process(es): %s", cfg.Device.Runners, argv[0]))
		return runner.Open(ctx, runner.Options{
			Command: argv, Env: env, Backend: cfg.Backend, Device: o, Runners: cfg.Device.Runners,
			// torch's randn equals the Go backend's noise only on its CPU
			// AVX2 kernel: the gateway sends the noise of the request's seed.
			DrawNoise:    torch,
			PingInterval: cfg.Device.RunnerPingInterval, PingTimeout: cfg.Device.RunnerPingTimeout,
			CallGrace: cfg.Device.RunnerCallGrace, StartTimeout: cfg.Device.RunnerStartTimeout,
			MaxRestarts: cfg.Device.RunnerMaxRestarts, Logger: log,
		})
	}
}

// torchOptions are the torch runner's options of cfg (device.torch.*).
func torchOptions(cfg config.Config) torchrunner.Options {
	t := cfg.Device.Torch
	return torchrunner.Options{Python: t.Python, Device: t.Device, Dtype: t.Dtype, Compile: t.Compile, CUDAGraphs: t.CUDAGraphs}
}

// debianPython is Debian's interpreter, tried when device.torch.python is
// left at its default and the python3 on PATH has no torch.
const debianPython = "/usr/bin/python3"

// checkBackend refuses, before serve listens, a backend kind this binary
// cannot start: one neither registered (device.Names) nor torch, unless
// device.runner_command names a runner of its own (which may serve any
// kind), and a policy the cpu backend does not have (cpu.Policies). For torch it probes device.torch.python (torchrunner.Probe, up
// to a minute: torch's import and CUDA's start) and checks that it can
// serve device.torch.* (torchrunner.Check); a problem is a config error
// naming the key and where its value came from. What the probe found is
// logged once. With device.torch.python at its default and no torch in the
// python3 on PATH, it tries Debian's /usr/bin/python3 and, when that has
// torch, sets l.Config's device.torch.python to it.
func checkBackend(ctx context.Context, l *config.Loaded, log *slog.Logger) error {
	cfg := l.Config
	if cfg.Backend != config.BackendTorch {
		if len(cfg.Device.RunnerCommand) > 0 {
			return nil // a runner of its own: it says what it serves in HELLO
		}
		if cfg.Backend == cpu.Name && !slices.Contains(cpu.Policies(), cfg.Policy) {
			return &config.KeyError{Key: "policy", Source: l.Provenance["policy"].String(),
				Err: fmt.Errorf("%q is not a dtype policy of backend cpu (have %s)", cfg.Policy, strings.Join(cpu.Policies(), ", "))}
		}
		if slices.Contains(device.Names(), cfg.Backend) {
			return nil
		}
		known := append(device.Names(), config.BackendTorch)
		return &config.KeyError{Key: "backend", Source: l.Provenance["backend"].String(),
			Err: fmt.Errorf("%q is not a backend kind (known: %s)", cfg.Backend, strings.Join(known, ", "))}
	}
	o, f, err := probeTorch(ctx, l, log)
	var ke *torchrunner.KeyError
	if errors.As(err, &ke) {
		return &config.KeyError{Key: ke.Key, Source: l.Provenance[ke.Key].String(), Err: ke.Err}
	}
	if err != nil {
		return err
	}
	log.Info("torch runner: probed "+o.Python, "python", f.Executable, "python_version", f.PythonVersion, "torch", f.Torch,
		"cuda", f.CUDAVersion, "cuda_devices", f.DeviceNames(), "device", o.Device, "dtype", o.Dtype,
		"compile", o.Compile, "cuda_graphs", o.CUDAGraphs)
	return nil
}

// probeTorch probes device.torch.python and checks device.torch.* against
// what it found. When the key is at its default and the python3 on PATH (a
// pyenv or venv one, say) cannot serve (no torch, too old), Debian's
// /usr/bin/python3 — where python3-torch installs — is tried, and when its
// interpreter and torch will do it is used (what it cannot serve, e.g. no
// CUDA, is then the error): l.Config's device.torch.python is set to it.
func probeTorch(ctx context.Context, l *config.Loaded, log *slog.Logger) (torchrunner.Options, torchrunner.Facts, error) {
	o := torchOptions(l.Config)
	f, err := torchrunner.Probe(ctx, o.Python)
	if err == nil {
		err = o.Check(f)
	}
	var ke *torchrunner.KeyError
	if errors.As(err, &ke) && ke.Key == torchrunner.KeyPython && l.Provenance[torchrunner.KeyPython].Layer == config.LayerDefault {
		if d, derr := torchrunner.Probe(ctx, debianPython); derr == nil && d.Executable != f.Executable {
			var dk *torchrunner.KeyError
			if dErr := o.Check(d); !errors.As(dErr, &dk) || dk.Key != torchrunner.KeyPython {
				log.Info("torch runner: "+o.Python+" on PATH cannot serve; using "+debianPython, "path_python", f.Executable, "reason", ke.Err.Error())
				f, o.Python, err = d, debianPython, dErr
				l.Config.Device.Torch.Python = debianPython
			}
		}
	}
	return o, f, err
}

// logFormat resolves log.format auto: text when stderr is a terminal.
func logFormat(c config.Log) string { return logFormatFor(c, os.Stderr) }

func logFormatFor(c config.Log, f *os.File) string {
	if c.Format == "auto" {
		if isTerminal(f) {
			return "text"
		}
		return "json"
	}
	return c.Format
}
