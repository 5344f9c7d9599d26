// Package config holds gr00tgw's typed configuration and loads it in layers:
// built-in defaults, then a YAML file, then the environment, then command-line
// flags, each layer overriding the one before. Every key has exactly one YAML
// name (`addr:`), one flag (`--addr`) and one or more environment names
// (`GR00TGW_ADDR`, plus the reference server's `GR00T_*` name where it means
// the same thing). Load records where each value came from (Provenance) so
// `gr00tgw config print` can show it, and rejects invalid values at start with
// the key and its source named.
//
// The key table is derived once, by reflection, from the struct tags of
// Config: `koanf` (YAML key segment), `flag` (flag name), `env` (extra
// environment names, comma separated, lowest precedence first; a name
// suffixed ":port" holds a port number only and means 0.0.0.0:<port>, for
// a host:port key) and `usage`.
// Adding a field with those tags is all it takes to add a key.
package config

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Config is the effective configuration of one gr00tgw process. The zero value
// is not useful; start from Default or Load. A Config is a plain value: copy
// it freely (its one slice, Embodiments, is never modified in place).
type Config struct {
	// Addr is the listen address of the HTTP server, read as every listen
	// address is (ListenAddr: host:port; a bare port or :port is loopback,
	// *:port every interface; Load stores the resolved host:port). The
	// environment variable PORT, which Knative/KServe and most container
	// platforms set, is an alias holding a port number only: PORT=8080
	// means 0.0.0.0:8080 (every interface, IPv4 and IPv6); GR00TGW_ADDR,
	// being later in the list, wins over it.
	Addr string `koanf:"addr" flag:"addr" env:"PORT:port" usage:"HTTP listen address: host:port, a port for loopback, *:port for every interface"`
	// ModelName is the served model name reported as "model" in responses.
	ModelName string `koanf:"model_name" flag:"model-name" usage:"model name reported in responses and /health"`
	// WeightsDir is the checkpoint directory (config.json, safetensors,
	// statistics.json, …); "" means the embedded default (testdata/n17-tiny
	// of the checkout or image). TokenizerDir and PluginsDir default the
	// same way (testdata/tokenizer/qwen3, build/plugins).
	WeightsDir string `koanf:"weights_dir" flag:"weights-dir" env:"GR00T_WEIGHTS_DIR" usage:"checkpoint directory (config.json, *.safetensors, statistics.json, processor_config.json, embodiment_id.json)"`
	// TokenizerDir holds tokenizer.json (+ preprocessor_config.json).
	TokenizerDir string `koanf:"tokenizer_dir" flag:"tokenizer-dir" env:"GR00T_TOKENIZER_DIR" usage:"tokenizer directory (tokenizer.json, tokenizer_config.json)"`
	// PluginsDir holds the embodiment plugins (<name>/plugin.yaml + .wasm).
	PluginsDir string `koanf:"plugins_dir" flag:"plugins-dir" usage:"embodiment plugin directory"`
	// PluginCacheDir is wazero's on-disk compilation cache directory; ""
	// keeps the plugin host's default ($XDG_CACHE_HOME/gr00tgw/wazero), "-"
	// compiles in memory only.
	PluginCacheDir string `koanf:"plugin_cache_dir" flag:"plugin-cache-dir" usage:"wazero compilation cache directory (empty: ~/.cache/gr00tgw/wazero; -: in memory only)"`
	// DemoDir holds demo observations (request.json + optional
	// actions.json golden) for warm-up and GET /demo: <demo_dir>/<tag>/
	// for any embodiment, <demo_dir> itself for the default one. Empty, or
	// when absent there: <weights_dir>/demo/<tag>, then for the default
	// <weights_dir>/demo and <weights_dir>/caseA, then the plugin's demo/.
	// A demo_dir that is set must exist (a config error otherwise, before
	// any weight loads); one without a given tag's demo falls back.
	DemoDir string `koanf:"demo_dir" flag:"demo-dir" usage:"demo observations: <dir>/<tag>/request.json (+ actions.json golden), <dir> itself for the default embodiment; empty: <weights_dir>/demo/<tag>, <weights_dir>/demo or caseA, the plugin's demo/"`
	// GoldenDir holds the goldens `gr00tgw golden` computed:
	// <golden_dir>/<checkpoint sha256>/<tag>/{request.json,actions.json}.
	// Warm-up gates an embodiment against its golden there when the
	// checkpoint ships none. "" means the user cache
	// ($XDG_CACHE_HOME/gr00tgw/goldens); "-" disables.
	GoldenDir string `koanf:"golden_dir" flag:"golden-dir" usage:"computed goldens (gr00tgw golden): <dir>/<checkpoint sha256>/<tag>/ (empty: the user cache; -: none)"`
	// Embodiment is the default embodiment tag: requests that name none
	// are served by it, and start-up fails when it cannot be served.
	Embodiment string `koanf:"embodiment" flag:"embodiment" env:"GR00T_EMBODIMENT" usage:"default embodiment tag (requests that name none; must be servable)"`
	// Embodiments, when set, limits the served embodiments to these tags
	// (the default is always served); empty serves every plugin in
	// plugins_dir.
	Embodiments []string `koanf:"embodiments" flag:"embodiments" usage:"embodiment tags to serve, comma-separated (empty: every plugin in plugins_dir)"`
	// Backend is the device backend kind: a registered one (device.Names:
	// cpu), served in process or by the Go runner, or BackendTorch, the
	// PyTorch runner (device.isolation process only; device.torch.*). A
	// device.runner_command of its own may serve any other kind.
	Backend string `koanf:"backend" flag:"backend" usage:"device backend kind: cpu, or torch (the PyTorch runner: device.isolation process, device.torch.*)"`
	// Policy is the dtype policy handed to the backend; with backend
	// torch it must stay at its default (device.torch.dtype says).
	Policy string `koanf:"policy" flag:"policy" env:"GR00T_POLICY" usage:"dtype policy of the backend (backend torch: leave it; device.torch.dtype says)"`
	// Threads caps the cores of a CPU backend and the host pipeline; 0 = all.
	Threads int `koanf:"threads" flag:"threads" env:"GR00T_TORCH_THREADS" usage:"cores used by the CPU backend (0: all)"`
	// DefaultSeed seeds the initial noise of a request that sends neither
	// seed nor noise (42: the seed server's contract), on every protocol;
	// the response reports it (seed, noise_source "seed").
	DefaultSeed int `koanf:"default_seed" flag:"default-seed" usage:"noise seed of a request that sends neither seed nor noise"`
	// RandomNoise, when true, gives such a request fresh noise instead: a
	// seed drawn per request (noise_source "random", the seed reported, so
	// the chunk can be replayed), as upstream's ZeroMQ policy server
	// samples per call. Warm-up always uses DefaultSeed.
	RandomNoise bool `koanf:"random_noise" flag:"random-noise" usage:"fresh noise (a random seed, reported) for requests that send neither seed nor noise"`
	// WarmupRuns is the number of warm-up predictions on the demo
	// observation before ready; each is checked against the golden.
	WarmupRuns int `koanf:"warmup_runs" flag:"warmup-runs" env:"GR00T_WARMUP_RUNS" usage:"warm-up predictions on the demo observation before ready"`
	// WarmupPCCMin is the minimum Pearson correlation of warm-up actions
	// with the demo golden; below it start-up fails.
	WarmupPCCMin float64 `koanf:"warmup_pcc_min" flag:"warmup-pcc-min" env:"GR00T_WARMUP_PCC_MIN" usage:"minimum PCC of warm-up actions vs the golden"`
	// MaxConnections caps the connections served at once (fasthttp
	// Concurrency); beyond it new connections are refused.
	MaxConnections int `koanf:"max_connections" flag:"max-connections" usage:"connections served at once (beyond: refused)"`
	// MaxBodyBytes caps a request body.
	MaxBodyBytes int `koanf:"max_body_bytes" flag:"max-body-bytes" usage:"request body size limit in bytes"`
	// QueueDepth is how many /predict requests may be in flight besides the
	// one on the device (decoding, encoding or waiting for the device
	// lock); beyond it /predict answers 503 with Retry-After at once.
	QueueDepth int `koanf:"queue_depth" flag:"queue-depth" usage:"predict requests in flight beyond the one on the device (503 past it)"`
	// RequestTimeout bounds one /predict call (a client may ask for less with
	// the X-Request-Timeout header); past it the answer is 504.
	RequestTimeout time.Duration `koanf:"request_timeout" flag:"request-timeout" usage:"per-request deadline (504 past it)"`
	// DrainTimeout bounds how long shutdown waits for in-flight requests.
	DrainTimeout time.Duration `koanf:"drain_timeout" flag:"drain-timeout" usage:"how long shutdown waits for in-flight requests"`
	// AdminToken enables POST /admin/reload for bearers of this token; "" disables the route.
	AdminToken string `koanf:"admin_token" flag:"admin-token" secret:"true" usage:"bearer token for POST /admin/reload (empty: route disabled)"`

	Log     Log     `koanf:"log"`
	OTel    OTel    `koanf:"otel"`
	Metrics Metrics `koanf:"metrics"`

	// ZMQ is the Isaac-GR00T ZeroMQ policy endpoint; OpenPI the openpi
	// websocket endpoint (frontend/zmq, frontend/openpi). Both are off
	// unless their addr is set.
	ZMQ    ZMQ    `koanf:"zmq"`
	OpenPI OpenPI `koanf:"openpi"`

	// Sessions bounds the per-robot session store (real-time chunking
	// across calls; config/sessions.go).
	Sessions Sessions `koanf:"sessions"`
	// RTC configures real-time chunking (rtc.mode).
	RTC RTC `koanf:"rtc"`

	// Device configures where the backend runs (device/runner).
	Device Device `koanf:"device"`

	// TLS, when its files are set, serves the HTTP API over HTTPS only;
	// Auth, when its key file is set, requires an API key on every
	// predict route of every protocol. Both are off by default and
	// re-read on SIGHUP (frontend/secure).
	TLS  TLS  `koanf:"tls"`
	Auth Auth `koanf:"auth"`

	// Safety is the safety gate after plugin.post; Record the flight
	// recorder (config/trust.go).
	Safety Safety `koanf:"safety"`
	Record Record `koanf:"record"`
}

// TLS configures HTTPS for the HTTP API (the OIP routes included).
type TLS struct {
	// CertFile is the PEM certificate (chain, leaf first); KeyFile its PEM
	// private key. Both or neither; "" serves plain HTTP.
	CertFile string `koanf:"cert_file" flag:"tls-cert-file" usage:"PEM certificate chain: serve HTTPS only (with tls.key_file; re-read on SIGHUP; empty: plain HTTP)"`
	KeyFile  string `koanf:"key_file" flag:"tls-key-file" usage:"PEM private key of tls.cert_file"`
}

// Auth configures API keys.
type Auth struct {
	// APIKeysFile is a file of accepted keys' hashes, one
	// "sha256:<hex> [label]" per line, '#' comments (`gr00tgw keys hash`
	// prints a line). When set, every predict route needs a key: HTTP
	// and OIP as "Authorization: Bearer <key>" or "X-API-Key: <key>",
	// ZeroMQ as the request's api_token, openpi on the websocket
	// upgrade. Health and /metrics stay open. "" is off.
	APIKeysFile string `koanf:"api_keys_file" flag:"api-keys-file" usage:"file of sha256:<hex> API key hashes, one a line (gr00tgw keys hash); when set every predict route needs a key (re-read on SIGHUP; empty: no keys)"`
}

// Device configures the backend's process isolation: serve runs the
// backend in runner child processes (gr00tgw runner, device/RUNNER.md) by
// default on Linux, supervised and restarted on a crash or hang; inproc
// keeps it in the gateway's process (tests, embedding, and the default on
// every other OS: the runner is Linux-only).
type Device struct {
	// Isolation is "process" (runner children; Linux only, the default
	// there) or "inproc" (the default elsewhere). process off Linux is a
	// config error.
	Isolation string `koanf:"isolation" flag:"device-isolation" usage:"where the backend runs: process (supervised runner children; Linux only, the default there) or inproc (the default elsewhere)"`
	// Runners is how many runner processes serve (one per accelerator;
	// threads are split between them). Only with isolation process.
	Runners int `koanf:"runners" flag:"device-runners" usage:"runner processes (one per device; each request goes to an idle one)"`
	// RunnerCommand is a runner's argv (empty: this binary's runner
	// subcommand); the gateway appends --fd 3 --backend … (device/RUNNER.md).
	RunnerCommand []string `koanf:"runner_command" flag:"device-runner-command" usage:"runner command, comma-separated argv (empty: gr00tgw runner)"`
	// RunnerPingInterval and RunnerPingTimeout: liveness pings; a runner
	// without a PONG within the timeout is killed and restarted.
	RunnerPingInterval time.Duration `koanf:"runner_ping_interval" flag:"device-runner-ping-interval" usage:"how often each runner is pinged"`
	RunnerPingTimeout  time.Duration `koanf:"runner_ping_timeout" flag:"device-runner-ping-timeout" usage:"a runner that does not answer a ping within this is killed and restarted"`
	// RunnerCallGrace is how long a prediction past its deadline may take
	// to stop before its runner is killed and restarted.
	RunnerCallGrace time.Duration `koanf:"runner_call_grace" flag:"device-runner-call-grace" usage:"time a cancelled prediction gets to stop before its runner is killed"`
	// RunnerStartTimeout bounds a runner's start (exec, weights, HELLO).
	RunnerStartTimeout time.Duration `koanf:"runner_start_timeout" flag:"device-runner-start-timeout" usage:"deadline for a runner to load and answer its handshake"`
	// RunnerMaxRestarts is how many consecutive failed restarts leave a
	// runner failed (the server then stays not ready, with the reason).
	RunnerMaxRestarts int `koanf:"runner_max_restarts" flag:"device-runner-max-restarts" usage:"consecutive failed restarts before a runner stays down"`
	// Torch configures the PyTorch runner (backend torch).
	Torch Torch `koanf:"torch"`
}

// Torch configures the PyTorch runner, the runner of backend torch: the
// Python package gr00t_torchrunner, embedded in gr00tgw and run by
// Python as `python -B -m gr00t_torchrunner` in runner children
// (device.isolation process; device/torchrunner). serve probes the
// interpreter before it listens and refuses a device or dtype it cannot
// serve. The dtype is Dtype's: the policy key stays at its default.
type Torch struct {
	// Device is cpu, cuda (the default; with device.runners N, runner i
	// uses cuda:(i mod the device count)) or cuda:N.
	Device string `koanf:"device" flag:"torch-device" usage:"device of the torch runners: cpu, cuda (runner i on cuda:(i mod devices)) or cuda:N (backend torch)"`
	// Dtype is auto (bf16 on CUDA, fp32 on CPU), bf16 or fp32.
	Dtype string `koanf:"dtype" flag:"torch-dtype" usage:"dtype of the torch runners: auto (bf16 on CUDA, fp32 on CPU), bf16 or fp32 (backend torch)"`
	// Python is the interpreter that runs them: a name on PATH or a path.
	Python string `koanf:"python" flag:"torch-python" usage:"Python interpreter with torch (>= 1.13) that runs the torch runners: a name on PATH or a path (backend torch)"`
	// Compile runs the model through torch.compile (torch >= 2.0; slower
	// start).
	Compile bool `koanf:"compile" flag:"torch-compile" usage:"torch.compile the model (torch >= 2.0; a slower start) (backend torch)"`
	// CUDAGraphs captures the denoising steps in CUDA graphs (CUDA only).
	CUDAGraphs bool `koanf:"cuda_graphs" flag:"torch-cuda-graphs" usage:"capture the denoising steps in CUDA graphs on CUDA devices (backend torch)"`
}

// ZMQ configures the Isaac-GR00T ZeroMQ policy endpoint (PolicyClient,
// port 5555 upstream).
type ZMQ struct {
	// Addr is its listen address: host:port, a bare port or :port
	// (loopback), *:port (every interface), tcp://host:port; "" is off.
	Addr string `koanf:"addr" flag:"zmq-addr" usage:"ZeroMQ (Isaac-GR00T PolicyClient) listen address: host:port, a port for loopback, *:port for every interface (empty: off)"`
	// APIToken, when set, is required as every request's api_token.
	APIToken string `koanf:"api_token" flag:"zmq-api-token" secret:"true" usage:"api_token every ZeroMQ request must carry (empty: none required)"`
	// MaxMessageBytes bounds one request message.
	MaxMessageBytes int `koanf:"max_message_bytes" flag:"zmq-max-message-bytes" usage:"largest ZeroMQ request message in bytes (checked before it is read)"`
	// MaxBatch bounds B of a batched observation.
	MaxBatch int `koanf:"max_batch" flag:"zmq-max-batch" usage:"largest batch B of one ZeroMQ get_action"`
	// AllowKill lets the kill endpoint shut the server down.
	AllowKill bool `koanf:"allow_kill" flag:"zmq-allow-kill" usage:"let a ZeroMQ client's kill endpoint shut the server down (default: refused)"`
	// IdleTimeout closes a connection silent for this long.
	IdleTimeout time.Duration `koanf:"idle_timeout" flag:"zmq-idle-timeout" usage:"close a ZeroMQ connection idle this long (clients reconnect by themselves)"`
	// ReadTimeout bounds the reading of one message once it started.
	ReadTimeout time.Duration `koanf:"read_timeout" flag:"zmq-read-timeout" usage:"deadline to receive one ZeroMQ message once it started"`
}

// OpenPI configures the openpi websocket policy endpoint
// (WebsocketClientPolicy, port 8000 upstream).
type OpenPI struct {
	// Addr is its listen address, read like zmq.addr; "" is off.
	Addr string `koanf:"addr" flag:"openpi-addr" usage:"openpi websocket listen address: host:port, a port for loopback, *:port for every interface (empty: off)"`
	// APIKey, when set, is required as "Authorization: Api-Key <key>".
	APIKey string `koanf:"api_key" flag:"openpi-api-key" secret:"true" usage:"key every openpi client must send as Authorization: Api-Key <key> (empty: none required)"`
	// MaxMessageBytes bounds one observation frame.
	MaxMessageBytes int `koanf:"max_message_bytes" flag:"openpi-max-message-bytes" usage:"largest openpi observation frame in bytes"`
	// IdleTimeout closes a connection that sends no observation this long.
	IdleTimeout time.Duration `koanf:"idle_timeout" flag:"openpi-idle-timeout" usage:"close an openpi connection idle this long"`
	// ReadTimeout bounds the reading of one observation once it started.
	ReadTimeout time.Duration `koanf:"read_timeout" flag:"openpi-read-timeout" usage:"deadline to receive one openpi observation once it started"`
}

// ListenAddr resolves a listen address — addr, zmq.addr and openpi.addr
// alike, one rule for all: a bare port
// ("5555") or ":5555" listens on loopback, "*:5555" on every interface
// (ZeroMQ's spelling), "tcp://host:port" drops the scheme; otherwise
// host:port as given. The port must be a number in [0, 65535].
func ListenAddr(s string) (string, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "tcp://")
	if s == "" {
		return "", fmt.Errorf("empty address")
	}
	if !strings.Contains(s, ":") {
		s = ":" + s
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port or a port: %w", s, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("%q: port %q is not a number in [0, 65535]", s, port)
	}
	switch host {
	case "":
		host = "127.0.0.1"
	case "*":
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, port), nil
}

// Log configures log/slog.
type Log struct {
	// Format is "json", "text", or "auto" (the default): text when the
	// log goes to a terminal, JSON otherwise (a file, a pipe, a container).
	Format string `koanf:"format" flag:"log-format" usage:"log format: auto (text on a terminal, else json), json or text"`
	// Level is "debug", "info", "warn" or "error".
	Level string `koanf:"level" flag:"log-level" usage:"log level: debug, info, warn, error"`
}

// OTel configures OpenTelemetry tracing.
type OTel struct {
	// ServiceName is the service.name resource attribute.
	ServiceName string `koanf:"service_name" flag:"otel-service-name" usage:"OpenTelemetry service.name"`
	Traces      Traces `koanf:"traces"`
}

// Traces selects the span exporter.
type Traces struct {
	// Exporter is one of none, stdout, otlp-grpc, otlp-http.
	Exporter string `koanf:"exporter" flag:"otel-traces-exporter" usage:"span exporter: none, stdout, otlp-grpc, otlp-http"`
	// Endpoint is the OTLP collector endpoint (host:port); "" uses the
	// exporter's default (and its OTEL_EXPORTER_OTLP_* variables).
	Endpoint string `koanf:"endpoint" flag:"otel-traces-endpoint" usage:"OTLP endpoint host:port (empty: exporter default)"`
	// Insecure disables TLS towards the OTLP endpoint.
	Insecure bool `koanf:"insecure" flag:"otel-traces-insecure" usage:"plain-text connection to the OTLP endpoint"`
	// SampleRatio is the parent-based trace-id ratio sampler's ratio.
	SampleRatio float64 `koanf:"sample_ratio" flag:"otel-traces-sample-ratio" usage:"fraction of root traces sampled (0..1)"`
}

// Metrics configures GET /metrics.
type Metrics struct {
	// Enabled serves OTel metrics in Prometheus text format at /metrics.
	Enabled bool `koanf:"enabled" flag:"metrics" usage:"serve Prometheus metrics at /metrics"`
}

// Default returns the built-in defaults.
//
// WarmupRuns is 1, not the reference server's 5: there the runs capture and
// replay Metal traces, and five replays catch trace instability; on the CPU
// backend a run has no capture step, is deterministic, and costs seconds on
// the real checkpoint, so one checked run proves fidelity without delaying
// readiness. Set GR00T_WARMUP_RUNS=5 to match the reference exactly.
func Default() Config {
	return Config{
		Addr:           "127.0.0.1:20000",
		DefaultSeed:    42,
		ModelName:      "GR00T-N1.7-3B",
		Embodiment:     "oxe_droid_relative_eef_relative_joint",
		Backend:        "cpu",
		Policy:         "fp32",
		WarmupRuns:     1,
		WarmupPCCMin:   0.999,
		MaxBodyBytes:   32 << 20,
		MaxConnections: 1024,
		QueueDepth:     8,
		RequestTimeout: 30 * time.Second,
		DrainTimeout:   30 * time.Second,
		Log:            Log{Format: "auto", Level: "info"},
		OTel: OTel{
			ServiceName: "gr00tgw",
			Traces:      Traces{Exporter: "none", SampleRatio: 1},
		},
		Metrics:  Metrics{Enabled: true},
		ZMQ:      ZMQ{MaxMessageBytes: 64 << 20, MaxBatch: 8, IdleTimeout: 10 * time.Minute, ReadTimeout: 30 * time.Second},
		OpenPI:   OpenPI{MaxMessageBytes: 64 << 20, IdleTimeout: 10 * time.Minute, ReadTimeout: 30 * time.Second},
		Sessions: defaultSessions(),
		RTC:      RTC{Mode: RTCModeUpstream},
		Device: Device{Isolation: defaultIsolation(), Runners: 1, RunnerPingInterval: time.Second, RunnerPingTimeout: 3 * time.Second,
			RunnerCallGrace: 2 * time.Second, RunnerStartTimeout: 5 * time.Minute, RunnerMaxRestarts: 5,
			Torch: Torch{Device: "cuda", Dtype: "auto", Python: "python3", CUDAGraphs: true}},
		Safety: Safety{Policy: "off"},
		Record: Record{MaxBytes: 1 << 30, Sample: 1},
	}
}

// BackendTorch is the backend kind of the PyTorch runner (config
// device.torch.*): it runs only in runner processes.
const BackendTorch = "torch"

// Validate checks every value and returns the first problem, naming the key.
// Load calls it (and adds the value's source to the message).
func (c *Config) Validate() error {
	for _, ch := range append(c.checks(), c.trustChecks()...) {
		if err := ch.check(); err != nil {
			return &KeyError{Key: ch.key, Err: err}
		}
	}
	return nil
}

type keyCheck struct {
	key   string
	check func() error
}

// goos is runtime.GOOS (a variable for tests).
var goos = runtime.GOOS

// defaultIsolation is device.isolation's default: process on Linux (the
// runner uses Linux-only calls: memfd, Pdeathsig), inproc elsewhere.
func defaultIsolation() string {
	if goos == "linux" {
		return "process"
	}
	return "inproc"
}

func oneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
}

func (c *Config) checks() []keyCheck {
	return append([]keyCheck{
		{"addr", func() error { _, err := ListenAddr(c.Addr); return err }},
		{"model_name", func() error {
			if c.ModelName == "" {
				return fmt.Errorf("must not be empty")
			}
			return nil
		}},
		{"embodiment", func() error {
			if c.Embodiment == "" {
				return fmt.Errorf("must not be empty")
			}
			return nil
		}},
		{"embodiments", func() error {
			for _, t := range c.Embodiments {
				if strings.ContainsAny(t, " \t/") {
					return fmt.Errorf("tag %q: tags have no spaces or slashes", t)
				}
			}
			return nil
		}},
		{"backend", func() error {
			if c.Backend == "" {
				return fmt.Errorf("must not be empty")
			}
			if c.Backend != BackendTorch {
				return nil
			}
			// The torch backend is a runner program only: there is no
			// in-process one to fall back to.
			if goos != "linux" {
				return fmt.Errorf("torch runs in runner processes (device.isolation process), which need Linux; this is %s", goos)
			}
			if c.Device.Isolation != "process" {
				return fmt.Errorf("torch runs in runner processes: set device.isolation process (it is %q)", c.Device.Isolation)
			}
			return nil
		}},
		{"policy", func() error {
			if c.Backend == BackendTorch && c.Policy != Default().Policy {
				return fmt.Errorf("%q: backend torch takes its dtype from device.torch.dtype; leave policy at its default (%s)", c.Policy, Default().Policy)
			}
			return nil
		}},
		{"threads", func() error {
			if c.Threads < 0 {
				return fmt.Errorf("%d is negative", c.Threads)
			}
			return nil
		}},
		{"default_seed", func() error {
			if c.DefaultSeed < 0 {
				return fmt.Errorf("%d is negative", c.DefaultSeed)
			}
			return nil
		}},
		{"warmup_runs", func() error {
			if c.WarmupRuns < 0 || c.WarmupRuns > 1000 {
				return fmt.Errorf("%d is outside [0, 1000]", c.WarmupRuns)
			}
			return nil
		}},
		{"warmup_pcc_min", func() error {
			if !(c.WarmupPCCMin >= -1 && c.WarmupPCCMin <= 1) {
				return fmt.Errorf("%v is outside [-1, 1]", c.WarmupPCCMin)
			}
			return nil
		}},
		{"max_body_bytes", func() error {
			if c.MaxBodyBytes < 1024 {
				return fmt.Errorf("%d is below 1024", c.MaxBodyBytes)
			}
			return nil
		}},
		{"max_connections", func() error {
			if c.MaxConnections < 8 {
				return fmt.Errorf("%d is below 8", c.MaxConnections)
			}
			return nil
		}},
		{"queue_depth", func() error {
			if c.QueueDepth < 0 {
				return fmt.Errorf("%d is negative", c.QueueDepth)
			}
			return nil
		}},
		{"request_timeout", func() error {
			if c.RequestTimeout <= 0 {
				return fmt.Errorf("%v must be positive", c.RequestTimeout)
			}
			return nil
		}},
		{"drain_timeout", func() error {
			if c.DrainTimeout <= 0 {
				return fmt.Errorf("%v must be positive", c.DrainTimeout)
			}
			return nil
		}},
		{"log.format", func() error { return oneOf(c.Log.Format, "auto", "json", "text") }},
		{"log.level", func() error { return oneOf(c.Log.Level, "debug", "info", "warn", "error") }},
		{"otel.service_name", func() error {
			if c.OTel.ServiceName == "" {
				return fmt.Errorf("must not be empty")
			}
			return nil
		}},
		{"otel.traces.exporter", func() error {
			return oneOf(c.OTel.Traces.Exporter, "none", "stdout", "otlp-grpc", "otlp-http")
		}},
		{"otel.traces.sample_ratio", func() error {
			r := c.OTel.Traces.SampleRatio
			if !(r >= 0 && r <= 1) {
				return fmt.Errorf("%v is outside [0, 1]", r)
			}
			return nil
		}},
		{"zmq.addr", func() error { return optionalAddr(c.ZMQ.Addr) }},
		{"zmq.max_message_bytes", func() error { return atLeast(c.ZMQ.MaxMessageBytes, 1024) }},
		{"zmq.max_batch", func() error {
			if c.ZMQ.MaxBatch < 1 || c.ZMQ.MaxBatch > 1024 {
				return fmt.Errorf("%d is outside [1, 1024]", c.ZMQ.MaxBatch)
			}
			return nil
		}},
		{"zmq.idle_timeout", func() error { return positive(c.ZMQ.IdleTimeout) }},
		{"zmq.read_timeout", func() error { return positive(c.ZMQ.ReadTimeout) }},
		{"openpi.addr", func() error { return optionalAddr(c.OpenPI.Addr) }},
		{"openpi.max_message_bytes", func() error { return atLeast(c.OpenPI.MaxMessageBytes, 1024) }},
		{"openpi.idle_timeout", func() error { return positive(c.OpenPI.IdleTimeout) }},
		{"openpi.read_timeout", func() error { return positive(c.OpenPI.ReadTimeout) }},
		{"tls.cert_file", func() error { return pairedFile(c.TLS.CertFile, c.TLS.KeyFile, "tls.key_file") }},
		{"tls.key_file", func() error { return pairedFile(c.TLS.KeyFile, c.TLS.CertFile, "tls.cert_file") }},
		{"auth.api_keys_file", func() error { return readableFile(c.Auth.APIKeysFile) }},
		{"demo_dir", func() error { return existingDir(c.DemoDir) }},
		{"device.isolation", func() error {
			if err := oneOf(c.Device.Isolation, "process", "inproc"); err != nil {
				return err
			}
			if c.Device.Isolation == "process" && goos != "linux" {
				return fmt.Errorf("process (runner children) needs Linux, this is %s: use inproc", goos)
			}
			return nil
		}},
		{"device.runners", func() error {
			if c.Device.Runners < 1 || c.Device.Runners > 64 {
				return fmt.Errorf("%d is outside [1, 64]", c.Device.Runners)
			}
			return nil
		}},
		{"device.runner_ping_interval", func() error { return positive(c.Device.RunnerPingInterval) }},
		{"device.runner_ping_timeout", func() error { return positive(c.Device.RunnerPingTimeout) }},
		{"device.runner_call_grace", func() error { return positive(c.Device.RunnerCallGrace) }},
		{"device.runner_start_timeout", func() error { return positive(c.Device.RunnerStartTimeout) }},
		{"device.runner_max_restarts", func() error { return atLeast(c.Device.RunnerMaxRestarts, 1) }},
		{"device.runner_command", func() error {
			if c.Backend == BackendTorch && len(c.Device.RunnerCommand) > 0 {
				return fmt.Errorf("%q: backend torch starts its own runner (device.torch.python -m gr00t_torchrunner); leave it empty", c.Device.RunnerCommand)
			}
			return nil
		}},
		{"device.torch.device", func() error {
			d := c.Device.Torch.Device
			if d == "cpu" || d == "cuda" {
				return nil
			}
			if n, ok := strings.CutPrefix(d, "cuda:"); ok {
				if i, err := strconv.Atoi(n); err == nil && i >= 0 && strconv.Itoa(i) == n {
					return nil
				}
			}
			return fmt.Errorf("%q is not cpu, cuda or cuda:N", d)
		}},
		{"device.torch.dtype", func() error { return oneOf(c.Device.Torch.Dtype, "auto", "bf16", "fp32") }},
		{"device.torch.python", func() error {
			if strings.TrimSpace(c.Device.Torch.Python) == "" {
				return fmt.Errorf("must not be empty")
			}
			return nil
		}},
	}, c.sessionChecks()...)
}

// pairedFile checks one of two files that go together: both set or
// neither, and a set one is a readable regular file.
func pairedFile(path, other, otherKey string) error {
	if path == "" && other != "" {
		return fmt.Errorf("must be set with %s", otherKey)
	}
	return readableFile(path)
}

// readableFile checks that path, when set, is a regular file that can be
// opened (its content is checked where it is parsed).
func readableFile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	return nil
}

// existingDir checks that path, when set, is a directory (a configured
// directory that is missing is an error, not a silent fallback).
func existingDir(path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	return nil
}

func optionalAddr(s string) error {
	if s == "" {
		return nil
	}
	_, err := ListenAddr(s)
	return err
}

func atLeast(n, lo int) error {
	if n < lo {
		return fmt.Errorf("%d is below %d", n, lo)
	}
	return nil
}

func positive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%v must be positive", d)
	}
	return nil
}

// KeyError is a configuration problem with one key. Source, when known, says
// which layer supplied the bad value ("file /etc/gr00tgw.yaml", "env
// GR00T_WARMUP_RUNS", "flag --threads", "default").
type KeyError struct {
	Key    string
	Source string
	Err    error
}

// Error formats "config: key[<key>] (from <source>): <cause>".
func (e *KeyError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("config: key[%s] (from %s): %v", e.Key, e.Source, e.Err)
	}
	return fmt.Sprintf("config: key[%s]: %v", e.Key, e.Err)
}

// Unwrap returns the cause.
func (e *KeyError) Unwrap() error { return e.Err }
