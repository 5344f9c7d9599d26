package runner

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/gr00tgw/gr00tgw/device"
)

// Options configure Open. Zero durations and counts take the defaults
// noted on each field.
type Options struct {
	// Command is the runner's argv (required): Open appends --fd 3
	// --backend B --weights-dir W --policy P --threads T --index I, and
	// the runner finds its socket at descriptor 3 (GR00TGW_RUNNER_FD=3).
	Command []string
	// Env is the runner's environment (nil: this process's).
	Env []string
	// Backend and Device are what each runner opens.
	Backend string
	Device  device.Options
	// Runners is how many runner processes serve (default 1); with
	// Device.Threads 0 each gets GOMAXPROCS/Runners threads (at least 1).
	Runners int
	// PingInterval is how often an idle or busy runner is pinged (1s);
	// PingTimeout how long a PONG may take before the runner is deemed
	// hung and killed (3s).
	PingInterval, PingTimeout time.Duration
	// CallGrace is how long a cancelled or timed-out PREDICT may take to
	// stop before the runner is killed (2s).
	CallGrace time.Duration
	// StartTimeout bounds a start: exec to HELLO, weights loaded (5m).
	StartTimeout time.Duration
	// MaxRestarts is how many consecutive failed restarts a runner gets
	// before it stays failed (5).
	MaxRestarts int
	// BackoffMin and BackoffMax bound the delay before a restart, doubled
	// after each failure (100ms, 5s).
	BackoffMin, BackoffMax time.Duration
	// DrawNoise, when set, makes the client draw the initial noise of a
	// request that has none (device.Inputs.Noise nil) from its seed with
	// core/model/noise.Randn — the in-process CPU backend's generator,
	// PyTorch's CPU torch.randn bit for bit — straight into the segment's
	// noise span, and send that span: a runner whose own generator differs
	// (CUDA's, another torch build's) then starts from the same noise as
	// the Go backend for the same seed. Unset, such a request goes with
	// noise null and the runner draws it from seed itself (device/RUNNER.md).
	DrawNoise bool
	// Logger receives supervision events (nil: slog.Default()).
	Logger *slog.Logger
	// Stderr receives the runners' stdout and stderr (nil: os.Stderr).
	Stderr io.Writer

	// stableUptime is how long a started runner must stay up before its
	// consecutive failures reset; a death sooner counts as a failed
	// restart (30s; tests set it through SetStableUptime).
	stableUptime time.Duration
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Runners <= 0 {
		o.Runners = 1
	}
	def(&o.PingInterval, time.Second)
	def(&o.PingTimeout, 3*time.Second)
	def(&o.CallGrace, 2*time.Second)
	def(&o.StartTimeout, 5*time.Minute)
	def(&o.BackoffMin, 100*time.Millisecond)
	def(&o.BackoffMax, 5*time.Second)
	def(&o.stableUptime, 30*time.Second)
	if o.MaxRestarts <= 0 {
		o.MaxRestarts = 5
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
}

// ServeOptions configure Serve.
type ServeOptions struct {
	// Layout is what the backend accepts (HELLO "layout").
	Layout Layout
	// Runner names the implementation in HELLO ("gr00tgw <version>").
	Runner string
}
