package device

import (
	"context"
	"errors"
	"time"
)

// ErrRestarting is wrapped by a backend's errors when the device went away
// under a call (its runner process exited, was killed or stopped
// answering) or is being restarted: the call may succeed if retried later.
// The gateway answers 503 device_restarting with Retry-After.
var ErrRestarting = errors.New("device: restarting")

// Slotted is implemented by a backend that runs more than one Predict at a
// time (a pool of runner processes, one per accelerator). Slots is how many
// calls it runs at once; the gateway's device lock admits that many.
type Slotted interface {
	Slots() int
}

// Supervised is implemented by a backend that watches devices which can go
// away and come back (runner processes). The gateway reports Supervision in
// /health, /v2/health/ready, /info and its metrics, and refuses predicts
// while no device serves.
type Supervised interface {
	Supervision() Supervision
}

// Supervision is a snapshot of a supervised backend.
type Supervision struct {
	// Serving is true when at least one device takes calls.
	Serving bool
	// Failed is true when a device gave up restarting (too many
	// consecutive failures) and no device serves: the backend stays down.
	Failed bool
	// Reason says why a device does not serve ("" when all do).
	Reason string
	// Runners describes each device, in index order.
	Runners []RunnerStatus
}

// RunnerStatus is one supervised device.
type RunnerStatus struct {
	Index int `json:"index"`
	// PID is the runner process (0 while none runs).
	PID int `json:"pid"`
	// State is one of the RunnerState values: "ok", "starting",
	// "restarting" or "failed".
	State string `json:"state"`
	// Restarts counts restarts since the backend opened; Failures the
	// consecutive failed starts now.
	Restarts int `json:"restarts"`
	Failures int `json:"consecutive_failures"`
	// LastCause is why the last runner went away ("" before any):
	// "exit status 3", "signal killed", "hung: no pong within 3s", …
	LastCause string `json:"last_cause,omitempty"`
	// LastCauseKind is the metric label of LastCause: exit, signal, hang,
	// protocol, gate, start.
	LastCauseKind string `json:"last_cause_kind,omitempty"`
	// LastStderr holds the last lines the runner wrote to stderr before it
	// went away.
	LastStderr []string `json:"last_stderr,omitempty"`
	// Since is when the device entered State.
	Since time.Time `json:"since"`
	// RestartsByCause counts restarts by LastCauseKind.
	RestartsByCause map[string]int `json:"restarts_by_cause,omitempty"`
}

// RunnerState is a supervised device's state (RunnerStatus.State, the
// state label of the gateway's runner metrics).
type RunnerState string

const (
	// RunnerStarting: the device is starting, or passing its gate after a
	// restart; it takes no calls yet.
	RunnerStarting RunnerState = "starting"
	// RunnerOK: the device takes calls.
	RunnerOK RunnerState = "ok"
	// RunnerRestarting: the device went away and is being restarted.
	RunnerRestarting RunnerState = "restarting"
	// RunnerFailed: the device gave up restarting; it stays down.
	RunnerFailed RunnerState = "failed"
)

// GateFunc checks a freshly (re)started device before it takes traffic:
// the gateway's warm-up on the demo observation, golden-checked. b runs on
// that device only.
type GateFunc func(ctx context.Context, b Backend) error

// Gated is implemented by a supervised backend that restarts devices. The
// gateway calls SetGate once it has warmed up: SetGate runs gate on every
// device not yet checked (blocking until each passed or failed) and on
// every restarted device before it serves again.
type Gated interface {
	SetGate(ctx context.Context, gate GateFunc) error
}

// PixelArena is implemented by a backend that wants pixel_values written
// into memory of its own (a runner's shared memory), so that Predict passes
// them to the device without a copy. PixelBuffer returns a buffer of at
// least the layout's pixel_values size (Facts.MaxPatches rows) and its
// release; ok is false when none is available (the caller uses its own
// memory, and Predict copies). The caller writes the pixels, calls Predict
// with Inputs.PixelValues a prefix of buf, and calls release exactly once
// after Predict returned. Safe for concurrent use.
type PixelArena interface {
	PixelBuffer() (buf []float32, release func(), ok bool)
}
