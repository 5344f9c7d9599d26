package plugins

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCallError(t *testing.T) {
	timeout := &CallError{Plugin: "p", Stage: "pre", Kind: ErrTimeout, Err: fmt.Errorf("deadline 5ms exceeded: %w", context.DeadlineExceeded)}
	trap := &CallError{Plugin: "p", Stage: "post", Kind: ErrTrap, Err: errors.New("wasm error: unreachable\nwasm stack trace:\n\t.runtime.abort")}
	bad := &CallError{Plugin: "p", Stage: "pre", Kind: ErrBadPointer, Err: fmt.Errorf("%w: result length 3", ErrBadPointer)}
	assert.ErrorIs(t, timeout, context.DeadlineExceeded)
	assert.ErrorIs(t, timeout, ErrTimeout)
	assert.ErrorIs(t, trap, ErrTrap)
	assert.EqualError(t, trap, "wasm: plugin[p] post: plugins: guest trapped: wasm error: unreachable")
	assert.EqualError(t, bad, "wasm: plugin[p] pre: plugins: guest returned an invalid result: result length 3")
}
