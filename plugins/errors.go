package plugins

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on. The gateway maps them to HTTP status
// codes once, at the edge: ErrPoolExhausted → 503 (Retry-After),
// ErrTimeout → 504, ErrTrap/ErrBadPointer/ErrClosed → 500.
var (
	// ErrPoolExhausted: no instance became free before the caller's
	// context (or the acquire timeout) expired.
	ErrPoolExhausted = errors.New("plugins: instance pool exhausted")
	// ErrClosed: the plugin was closed before the call started.
	ErrClosed = errors.New("plugins: plugin closed")
	// ErrTimeout: a guest call ran past its deadline and was stopped.
	ErrTimeout = errors.New("plugins: guest call timed out")
	// ErrTrap: a guest call trapped (panic, unreachable, out of memory,
	// exit); the instance was discarded.
	ErrTrap = errors.New("plugins: guest trapped")
	// ErrBadPointer: a guest returned a result pointer/length outside its
	// memory or a malformed result; the instance was discarded.
	ErrBadPointer = errors.New("plugins: guest returned an invalid result")
)

// GuestError is an error reported by the plugin itself through the ABI
// (result status 1 or 2): a validation failure of the request, or an
// internal plugin failure when Internal is set. The gateway maps it to 400
// (Internal: 500) with body {"error": Message, "code": Code, "field": Field}.
type GuestError struct {
	Plugin  string // plugin name
	Stage   string // "init", "pre" or "post"
	Code    string // e.g. "invalid_state"
	Field   string // e.g. "state.eef_9d"; may be empty
	Message string // e.g. "expected 9 values, got 8"
	// Internal is true for status 2 (plugin_error): not the client's fault.
	Internal bool
}

func (e *GuestError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("plugin[%s] %s: %s: %s", e.Plugin, e.Stage, e.Code, e.Message)
	}
	return fmt.Sprintf("plugin[%s] %s: %s: %s: %s", e.Plugin, e.Stage, e.Code, e.Field, e.Message)
}

// CallError reports a guest call that failed at the runtime level. Kind is
// one of ErrTimeout, ErrTrap or ErrBadPointer (errors.Is works on both the
// kind and the wrapped cause, e.g. context.DeadlineExceeded). The instance
// that failed has been discarded and replaced.
type CallError struct {
	Plugin string
	Stage  string
	Kind   error
	Err    error
}

// Error returns a one-line message; the wrapped Err may hold the guest's
// multi-line wasm stack trace (the host logs it when it discards the
// instance).
func (e *CallError) Error() string {
	msg := e.Err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if errors.Is(e.Err, e.Kind) {
		return fmt.Sprintf("wasm: plugin[%s] %s: %s", e.Plugin, e.Stage, msg)
	}
	return fmt.Sprintf("wasm: plugin[%s] %s: %v: %s", e.Plugin, e.Stage, e.Kind, msg)
}

// Unwrap returns the kind sentinel and the cause.
func (e *CallError) Unwrap() []error { return []error{e.Kind, e.Err} }
