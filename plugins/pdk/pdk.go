// Package pdk is the guest-side plugin development kit for gwabi v1.
//
// A plugin is plain Go: a type implementing Plugin, registered from the
// main package's init function:
//
//	package main
//
//	import "github.com/gr00tgw/gr00tgw/plugins/pdk"
//
//	func init() { pdk.Register(&myEmbodiment{}) }
//
//	func main() {} // required by -buildmode=c-shared, never called
//
// Built with the stock toolchain as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o my.wasm ./embodiments/my
//
// the package provides the //go:wasmexport shims (gw_abi_v1, gw_alloc,
// gw_free, gw_describe, gw_init, gw_pre, gw_post, and gw_reencode for a
// plugin that implements the optional Reencoder), guest memory handling
// and the envelope codec. Built natively (any GOOS other than wasip1) the
// same package compiles without the shims, so plugin logic is unit-tested
// with `go test`, and Runner drives it through the exact byte-level path
// the wasm shims use.
//
// The host calls an instance from one goroutine at a time; Plugin methods
// need no locking. Buffers the PDK hands to a plugin (Observation and
// PostInput slices) alias the call's input and are valid only during the
// call.
package pdk

import (
	"errors"
	"fmt"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/internal/wasmstr"
)

// Plugin is implemented by every embodiment plugin.
type Plugin interface {
	// Describe returns the plugin's identity and embodiment layout. It is
	// called once per instance, before Init; Name and Version must match
	// the plugin's manifest.
	Describe() abi.Description
	// Init receives the checkpoint statistics and processor settings for
	// the plugin's embodiment, once per instance. A returned *Error (or
	// any error) makes the instance unusable and fails plugin loading.
	Init(cfg *abi.InitConfig) error
	// Pre validates the observation's non-pixel parts and returns the
	// normalised state padded to Description.MaxStateDim. The returned
	// slice may be reused by the plugin on the next call.
	Pre(obs *Observation) ([]float32, error)
	// Post decodes the normalised action chunk into physical actions per
	// group. The returned Actions may be reused on the next call.
	Post(in *PostInput) (*Actions, error)
}

// StateInput is one raw state group as sent by the client.
type StateInput struct {
	Key string
	// Steps is the number of timesteps when the request sent [[D]…]
	// (nested), or 0 when it sent a flat [D].
	Steps int
	// Dim is the width of one step: len(Values) for a flat group,
	// len(Values)/Steps otherwise.
	Dim int
	// Values are the raw values, row-major, as float64 (JSON numbers).
	Values []float64
}

// CameraInput describes one camera's frames; pixels never cross the ABI.
type CameraInput struct {
	Key                             string
	Frames, Height, Width, Channels int
}

// Observation is the input of Pre.
type Observation struct {
	RequestID   string
	Embodiment  string // "" when the request did not name one
	Instruction string
	// StateDType is "float32" (default) or "float64": the dtype the
	// reference pipeline holds the raw state in.
	StateDType string
	State      []StateInput
	Cameras    []CameraInput
}

// StateGroup returns the state group named key, or nil.
func (o *Observation) StateGroup(key string) *StateInput { return findState(o.State, key) }

// Camera returns the camera named key, or nil.
func (o *Observation) Camera(key string) *CameraInput {
	for i := range o.Cameras {
		if wasmstr.Equal(o.Cameras[i].Key, key) {
			return &o.Cameras[i]
		}
	}
	return nil
}

// PostInput is the input of Post: the model's normalised chunk and the
// request's raw state (needed to compose relative actions).
type PostInput struct {
	RequestID  string
	Embodiment string
	StateDType string
	// ActionPred is the normalised chunk, row-major [Horizon, Dim].
	ActionPred []float32
	Horizon    int
	Dim        int
	State      []StateInput
}

// StateGroup returns the state group named key, or nil.
func (p *PostInput) StateGroup(key string) *StateInput { return findState(p.State, key) }

func findState(s []StateInput, key string) *StateInput {
	for i := range s {
		if wasmstr.Equal(s[i].Key, key) {
			return &s[i]
		}
	}
	return nil
}

// Actions is the output of Post.
type Actions struct {
	Groups []ActionOutput
}

// ActionOutput is one decoded action group, row-major [Horizon, Dim].
type ActionOutput struct {
	Key          string
	Horizon, Dim int
	Values       []float32
}

// Error is a validation error with a machine-readable code and the
// offending field, e.g. {invalid_state, state.eef_9d, "expected 9 values,
// got 8"}. The host surfaces it as *plugins.GuestError (HTTP 400).
type Error struct {
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Code + ": " + e.Message
	}
	return e.Code + ": " + e.Field + ": " + e.Message
}

// Errorf returns an *Error with a formatted message.
func Errorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

var registered Plugin

// Register installs the plugin served by this module's exports. Call it
// exactly once, from an init function; it panics on nil or a second call.
func Register(p Plugin) {
	if p == nil {
		panic("pdk: Register(nil)")
	}
	if registered != nil {
		panic("pdk: Register called twice")
	}
	registered = p
	runner = NewRunner(p)
}

//lint:ignore U1000 used by the wasip1 exports (exports_wasip1.go)
var runner *Runner

// asError converts err to the (status, *Error) pair of a result.
func asError(err error) (uint32, *Error) {
	var e *Error
	if errors.As(err, &e) {
		return abi.StatusInvalid, e
	}
	return abi.StatusPluginError, &Error{Code: abi.CodePluginError, Message: err.Error()}
}

// Equal reports a == b. In a wasm guest it compares 8 bytes per load
// (string == there ends in a byte-at-a-time loop); natively it is ==.
// Use it for the string comparisons on a plugin's per-request path.
func Equal(a, b string) bool { return wasmstr.Equal(a, b) }

// RuneCount returns utf8.RuneCountInString(s); in a wasm guest it skips
// ASCII 8 bytes at a time.
func RuneCount(s string) int { return wasmstr.RuneCount(s) }
