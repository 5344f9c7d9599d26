package adapt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gr00tgw/gr00tgw/gateway"
	"github.com/gr00tgw/gr00tgw/plugins"
)

// pluginErr is where plugin host errors get their HTTP status (the one
// mapping; the edge renders it).
func TestPluginErr(t *testing.T) {
	timeout := &plugins.CallError{Plugin: "p", Stage: "pre", Kind: plugins.ErrTimeout, Err: context.DeadlineExceeded}
	trap := &plugins.CallError{Plugin: "p", Stage: "post", Kind: plugins.ErrTrap, Err: errors.New("unreachable")}
	for _, tt := range []struct {
		err   error
		want  int
		field string
	}{
		{&plugins.GuestError{Code: "invalid_state", Field: "state.x", Message: "bad"}, http.StatusBadRequest, "state.x"},
		{&plugins.GuestError{Code: "invalid_state", Message: "bad"}, http.StatusBadRequest, "state"},
		{fmt.Errorf("wrapped: %w", &plugins.GuestError{Code: "plugin_error", Internal: true}), http.StatusInternalServerError, ""},
		{fmt.Errorf("%w: busy: %w", plugins.ErrPoolExhausted, context.DeadlineExceeded), http.StatusServiceUnavailable, ""},
		{timeout, http.StatusGatewayTimeout, ""},
		{trap, http.StatusInternalServerError, ""},
		{plugins.ErrClosed, http.StatusInternalServerError, ""},
	} {
		var he *gateway.HandlerError
		got := http.StatusInternalServerError
		field := ""
		if errors.As(pluginErr(tt.err), &he) {
			got, field = he.Status, he.Field
		}
		assert.Equal(t, tt.want, got, "%v", tt.err)
		assert.Equal(t, tt.field, field, "%v", tt.err)
	}
}
