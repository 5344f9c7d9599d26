package plugins

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHTTPStatusAndCallError(t *testing.T) {
	timeout := &CallError{Plugin: "p", Stage: "pre", Kind: ErrTimeout, Err: fmt.Errorf("deadline 5ms exceeded: %w", context.DeadlineExceeded)}
	trap := &CallError{Plugin: "p", Stage: "post", Kind: ErrTrap, Err: errors.New("wasm error: unreachable\nwasm stack trace:\n\t.runtime.abort")}
	bad := &CallError{Plugin: "p", Stage: "pre", Kind: ErrBadPointer, Err: fmt.Errorf("%w: result length 3", ErrBadPointer)}
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 200},
		{&GuestError{Code: "invalid_state"}, 400},
		{fmt.Errorf("wrapped: %w", &GuestError{Code: "plugin_error", Internal: true}), 500},
		{fmt.Errorf("%w: x", ErrUnknownEmbodiment), 400},
		{fmt.Errorf("%w: busy: %w", ErrPoolExhausted, context.DeadlineExceeded), 503},
		{ErrClosed, 503},
		{timeout, 504},
		{trap, 500},
		{bad, 500},
	} {
		assert.Equal(t, tt.want, HTTPStatus(tt.err), "%v", tt.err)
	}
	assert.ErrorIs(t, timeout, context.DeadlineExceeded)
	assert.EqualError(t, trap, "wasm: plugin[p] post: plugins: guest trapped: wasm error: unreachable")
	assert.EqualError(t, bad, "wasm: plugin[p] pre: plugins: guest returned an invalid result: result length 3")
}
