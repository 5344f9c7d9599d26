package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gr00tgw/gr00tgw/device"
)

// Error codes carried in the "code" member of an error body.
const (
	CodeSchema       = "schema"        // 422: wrong JSON/msgpack type, unknown or missing field
	CodeInvalid      = "invalid"       // 400: a value violates the contract
	CodeStarting     = "starting"      // 503: not ready yet (load and warm-up running)
	CodeUnavailable  = "unavailable"   // 503: draining for shutdown, or failed to start
	CodeQueueFull    = "queue_full"    // 503: the device wait queue is full
	CodeTimeout      = "timeout"       // 504: the request's deadline passed
	CodeDevice       = "device"        // 500: the backend failed
	CodeInternal     = "internal"      // 500: anything else
	CodeTooLarge     = "too_large"     // 413: body over max_body_bytes
	CodeUnauthorized = "unauthorized"  // 401: admin route without a valid token
	CodeUnsupported  = "unsupported"   // 415 / 501
	CodeNotFound     = "not_found"     // 404
	CodeMethod       = "bad_method"    // 405
	CodeReloadFailed = "reload_failed" // 500: plugin reload failed (old plugins keep serving)
)

// FieldError is implemented by errors that blame one request field. The
// gateway answers 400 with {"error": Error(), "field": Field()}. Code, when
// the error also has a `Code() string` method, becomes the body's "code".
// Collaborating packages (image decoding, tokenizer, plugins) implement it,
// or adapters wrap their errors with NewFieldError.
type FieldError interface {
	error
	Field() string
}

type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }
func (e *fieldError) Field() string { return e.field }

// NewFieldError wraps err as a FieldError blaming field.
func NewFieldError(field string, err error) error {
	return &fieldError{field: field, err: err}
}

// HandlerError is an error with the HTTP answer attached (Caddy's
// HandlerError). Handlers return it; the edge renders it once.
type HandlerError struct {
	// Status is the HTTP status.
	Status int
	// Code is a short machine-readable reason (Code* constants).
	Code string
	// Field is the request field blamed, "" if none.
	Field string
	// Err is the cause; its message is the body's "error".
	Err error
	// RetryAfter, when > 0, is sent as Retry-After (seconds).
	RetryAfter int
	// PlainText renders the body as text/plain (the reference server's
	// device failures).
	PlainText bool
}

// Error formats status, code, field and cause (for logs; the HTTP body
// carries the cause's message alone).
func (e *HandlerError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%d %s: field[%s]: %v", e.Status, e.Code, e.Field, e.Err)
	}
	return fmt.Sprintf("%d %s: %v", e.Status, e.Code, e.Err)
}

// Unwrap returns the cause.
func (e *HandlerError) Unwrap() error { return e.Err }

// SchemaError is a 422 (code schema) naming field: the body has the wrong
// shape (a wrong type, an unknown or missing field). Front ends use it for
// their own wire formats, so every protocol reports alike.
func SchemaError(field, format string, args ...any) *HandlerError {
	return &HandlerError{Status: http.StatusUnprocessableEntity, Code: CodeSchema, Field: field, Err: fmt.Errorf(format, args...)}
}

// Invalid is a 400 (code invalid) naming field: a value violates the
// contract (a dtype, shape, range or unknown tag).
func Invalid(field, format string, args ...any) *HandlerError {
	return &HandlerError{Status: http.StatusBadRequest, Code: CodeInvalid, Field: field, Err: fmt.Errorf(format, args...)}
}

// schemaError and invalid are the package's short names for them.
var schemaError, invalid = SchemaError, Invalid

// ErrorBody is the JSON (and msgpack) error shape every HTTP-style front
// end writes: {"error", "code", "field"}, plus "detail" (the same message)
// so clients of the reference FastAPI server, which read "detail", keep
// working.
type ErrorBody struct {
	Error     string `json:"error" msgpack:"error"`
	Code      string `json:"code" msgpack:"code"`
	Field     string `json:"field,omitempty" msgpack:"field,omitempty"`
	Detail    string `json:"detail" msgpack:"detail"`
	RequestID string `json:"request_id,omitempty" msgpack:"request_id,omitempty"`
}

// Body is he as an ErrorBody for the request requestID ("" leaves it out).
func (he *HandlerError) Body(requestID string) ErrorBody {
	msg := he.Err.Error()
	return ErrorBody{Error: msg, Code: he.Code, Field: he.Field, Detail: msg, RequestID: requestID}
}

// Classify maps any error to a HandlerError, once: a *HandlerError is
// returned as is, deadlines are 504, cancellations 503, a FieldError 400
// naming its field, a device failure 500 text/plain. stage names where it
// happened ("decode", "device", …) and decides the default for
// unclassified errors.
func Classify(err error, stage string) *HandlerError { return classify(err, stage) }

// classify maps any error to a HandlerError. stage names where it happened
// ("decode", "device", …) and decides the default for unclassified errors.
func classify(err error, stage string) *HandlerError {
	var he *HandlerError
	if errors.As(err, &he) {
		return he
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &HandlerError{Status: http.StatusGatewayTimeout, Code: CodeTimeout, Err: fmt.Errorf("%s: deadline exceeded: %w", stage, err)}
	}
	if errors.Is(err, context.Canceled) {
		return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 1, Err: fmt.Errorf("%s: cancelled (server shutting down): %w", stage, err)}
	}
	if errors.Is(err, device.ErrRestarting) {
		return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeRestarting, RetryAfter: 2,
			Err: fmt.Errorf("%s: %w", stage, err)}
	}
	if errors.Is(err, device.ErrInput) {
		// The encoder checked the request against the backend's limits
		// before the lock: an input the device refuses is a gateway,
		// encoder or plugin bug, not the client's fault.
		return &HandlerError{Status: http.StatusInternalServerError, Code: CodeInternal,
			Err: fmt.Errorf("%s: internal error: the gateway sent an input its backend cannot run: %w", stage, err)}
	}
	var fe FieldError
	if errors.As(err, &fe) {
		code := CodeInvalid
		if c, ok := fe.(interface{ Code() string }); ok && c.Code() != "" {
			code = c.Code()
		}
		return &HandlerError{Status: http.StatusBadRequest, Code: code, Field: fe.Field(), Err: err}
	}
	if stage == "device" {
		return &HandlerError{Status: http.StatusInternalServerError, Code: CodeDevice, PlainText: true, Err: fmt.Errorf("device failure: %w", err)}
	}
	return &HandlerError{Status: http.StatusInternalServerError, Code: CodeInternal, Err: fmt.Errorf("%s: %w", stage, err)}
}

// StatusClientClosed is the status logged (and counted) for a request
// whose client disconnected before its answer (nginx's 499).
const StatusClientClosed = 499

// CodeClientClosed is its code.
const CodeClientClosed = "client_closed"

// ErrClientClosed is the answer to a request whose client went away.
var ErrClientClosed = &HandlerError{Status: StatusClientClosed, Code: CodeClientClosed,
	Err: errors.New("client closed the connection; the request was cancelled")}

// ErrUnauthorized is the cause of every refusal for a missing or wrong
// API key (auth.api_keys_file), on every protocol; errors.Is finds it.
var ErrUnauthorized = errors.New("missing or invalid API key")

// Unauthorized is the HandlerError of a refused API key: 401, code
// "unauthorized", the cause wrapping ErrUnauthorized (the HTTP edge adds
// WWW-Authenticate: Bearer). how says how to send a key on the
// protocol.
func Unauthorized(field, how string) *HandlerError {
	return &HandlerError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Field: field,
		Err: &unauthorizedError{how: how}}
}

type unauthorizedError struct{ how string }

func (e *unauthorizedError) Error() string {
	if e.how == "" {
		return ErrUnauthorized.Error()
	}
	return ErrUnauthorized.Error() + ": " + e.how
}

func (e *unauthorizedError) Unwrap() error { return ErrUnauthorized }
