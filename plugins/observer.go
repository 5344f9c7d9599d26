package plugins

import "time"

// Observer receives plugin metrics. The host calls it synchronously on the
// request path, so implementations must be cheap and safe for concurrent
// use. The gateway adapts it to OpenTelemetry instruments
// (gateway_plugin_duration_seconds{plugin,stage,outcome},
// gateway_plugin_instances_recycled_total{plugin,reason},
// gateway_plugin_pool_in_use{plugin}); the host itself does not import
// otel.
type Observer interface {
	// CallDone reports one Pre/Post (or init) call: stage is "init",
	// "pre" or "post"; outcome is one of the Outcome constants; d
	// includes waiting for an instance.
	CallDone(plugin, stage, outcome string, d time.Duration)
	// Recycled reports an instance discarded for reason (a Reason
	// constant).
	Recycled(plugin, reason string)
	// PoolInUse reports the number of instances currently checked out.
	PoolInUse(plugin string, inUse int)
}

// Outcomes reported to Observer.CallDone.
const (
	OutcomeOK            = "ok"
	OutcomeGuestError    = "guest_error"
	OutcomeTimeout       = "timeout"
	OutcomeTrap          = "trap"
	OutcomeBadPointer    = "bad_pointer"
	OutcomePoolExhausted = "pool_exhausted"
	OutcomeClosed        = "closed"
	OutcomeCanceled      = "canceled"
)

// Reasons reported to Observer.Recycled.
const (
	ReasonTrap        = "trap"
	ReasonTimeout     = "timeout"
	ReasonBadPointer  = "bad_pointer"
	ReasonPluginError = "plugin_error"
	ReasonMaxCalls    = "max_calls"
	ReasonMemory      = "memory_high_water"
	ReasonCanceled    = "canceled"
)

type nopObserver struct{}

func (nopObserver) CallDone(string, string, string, time.Duration) {}
func (nopObserver) Recycled(string, string)                        {}
func (nopObserver) PoolInUse(string, int)                          {}
