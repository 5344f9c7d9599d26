package plugins

import (
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tetratelabs/wazero"
)

// Host-wide defaults and caps. A manifest may lower the limits, never
// raise them past the host maxima (loading fails instead).
const (
	DefaultMaxPages     = 512 // 32 MiB per instance
	DefaultTimeout      = 50 * time.Millisecond
	DefaultMaxTimeout   = 5 * time.Second
	DefaultPoolSize     = 4
	DefaultMaxPoolSize  = 64
	DefaultMaxCalls     = 100_000
	DefaultStdioLimit   = 4 << 10 // bytes of guest stdout+stderr logged per call
	DefaultMaxInputSize = 1 << 20 // envelope limit, both directions
)

// Option configures Open, New and NewRegistry. Options are applied over the
// defaults in order.
type Option func(*options)

type options struct {
	cacheDir       string
	cache          wazero.CompilationCache
	logger         *slog.Logger
	observer       Observer
	checkpoint     Checkpoint
	maxPages       uint32
	maxTimeout     time.Duration
	maxPool        int
	maxCalls       int
	highWaterPages uint32
	acquireTimeout time.Duration
	stdioLimit     int
	interpreter    bool
	deadline       DeadlineMode
}

func defaultOptions() options {
	dir := ""
	if d, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(d, "gr00tgw", "wazero")
	}
	return options{
		cacheDir:   dir,
		logger:     slog.Default(),
		observer:   nopObserver{},
		maxPages:   DefaultMaxPages,
		maxTimeout: DefaultMaxTimeout,
		maxPool:    DefaultMaxPoolSize,
		maxCalls:   DefaultMaxCalls,
		stdioLimit: DefaultStdioLimit,
	}
}

// WithCacheDir sets the on-disk compilation cache directory (default
// os.UserCacheDir()/gr00tgw/wazero). "" keeps compiled code in memory only.
// The cache is keyed by wazero version and module hash, so it never serves
// stale code.
func WithCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// WithCompilationCache shares an existing cache (it overrides
// WithCacheDir); the caller keeps ownership and closes it after the
// plugins.
func WithCompilationCache(c wazero.CompilationCache) Option {
	return func(o *options) { o.cache = c }
}

// WithLogger sets the logger for host events and guest output (default
// slog.Default()). Guest lines carry plugin=<name>.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithObserver installs a metrics observer (default: none).
func WithObserver(obs Observer) Option { return func(o *options) { o.observer = obs } }

// WithCheckpoint supplies the statistics and processor config passed to
// every instance's gw_init.
func WithCheckpoint(c Checkpoint) Option { return func(o *options) { o.checkpoint = c } }

// WithHostLimits sets the host maxima: memory pages per instance (default
// 512 = 32 MiB), per-call timeout (default 5 s) and pool size (default
// 64). Zero keeps a default.
func WithHostLimits(maxPages uint32, maxTimeout time.Duration, maxPool int) Option {
	return func(o *options) {
		if maxPages > 0 {
			o.maxPages = maxPages
		}
		if maxTimeout > 0 {
			o.maxTimeout = maxTimeout
		}
		if maxPool > 0 {
			o.maxPool = maxPool
		}
	}
}

// WithRecycle sets when a healthy instance is replaced: after maxCalls
// calls (default 100000) or when its memory exceeds highWaterPages
// (default 3/4 of the plugin's max_pages). Zero keeps a default.
func WithRecycle(maxCalls int, highWaterPages uint32) Option {
	return func(o *options) {
		if maxCalls > 0 {
			o.maxCalls = maxCalls
		}
		if highWaterPages > 0 {
			o.highWaterPages = highWaterPages
		}
	}
}

// WithAcquireTimeout bounds the wait for a free instance (default: only the
// caller's context bounds it). When it expires the call fails with
// ErrPoolExhausted.
func WithAcquireTimeout(d time.Duration) Option { return func(o *options) { o.acquireTimeout = d } }

// WithStdioLimit caps the guest stdout+stderr bytes logged per call, and
// separately its gw_host.log bytes (default 4 KiB each); the rest is
// dropped and counted.
func WithStdioLimit(n int) Option { return func(o *options) { o.stdioLimit = n } }

// WithInterpreter selects wazero's interpreter instead of the compiler
// (for platforms without the compiler and for differential tests).
func WithInterpreter() Option { return func(o *options) { o.interpreter = true } }

// WithDeadlineMode selects how per-call deadlines are enforced (default
// DeadlineStopFlag; the interpreter always uses DeadlineCloseOnContextDone).
// Deadlines are enforced in every mode.
func WithDeadlineMode(m DeadlineMode) Option { return func(o *options) { o.deadline = m } }
