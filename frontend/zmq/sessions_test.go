package zmq

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/zmqclient"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/service/servicetest"
	"github.com/gr00tgw/gr00tgw/wire"
)

// TestSessionID: options.session_id names the request's session ("auto"
// steps pass through to the gateway); reset with it resets that session
// and answers {} as upstream; bad ids are refused naming
// options.session_id, and nothing reaches the gateway.
func TestSessionID(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg, MaxBatch: 4})
	c := dial(t, addr, zmqclient.Options{})
	ctx := context.Background()
	_, err := c.GetAction(ctx, droidObs(t), zmqclient.Nested, map[string]any{"session_id": "arm-1", "rtc_frozen_steps": "auto", "rtc_overlap_steps": "auto"})
	require.NoError(t, err)
	reqs := fg.Requests()
	r := reqs[len(reqs)-1]
	assert.Equal(t, "arm-1", r.Session)
	assert.Equal(t, "options.session_id", r.SessionField)
	require.NotNil(t, r.Options)
	assert.True(t, r.Options.FrozenAuto && r.Options.OverlapAuto)

	v, err := c.Call(ctx, "reset", wire.NewMap(1).Set("options", wire.NewMap(1).Set("session_id", "arm-1")))
	require.NoError(t, err)
	assert.Equal(t, wire.NewMap(0), v)
	assert.Equal(t, []string{"arm-1"}, fg.ResetsCopy())

	n := len(fg.Requests())
	for _, tc := range []struct {
		name string
		id   any
		obs  *zmqclient.Observation
		want string
	}{
		{"too long", strings.Repeat("x", 129), nil, "options.session_id: 129 bytes, at most 128"},
		{"empty", "", nil, "options.session_id: empty"},
		{"bad byte", "a b", nil, "options.session_id: \"a b\": byte 1"},
		{"not a str", int64(3), nil, "options.session_id: expected a str, got int"},
		{"batch", "arm-1", droidObs(t).Batch(2), "options.session_id: a session is one robot"},
		{"auto horizon", nil, nil, "options.action_horizon: expected an int, got str"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := map[string]any{"session_id": tc.id}
			if tc.id == nil {
				o = map[string]any{"session_id": "ok", "action_horizon": "auto"}
			}
			obs := tc.obs
			if obs == nil {
				obs = droidObs(t)
			}
			_, err := c.GetAction(ctx, obs, zmqclient.Nested, o)
			var se *zmqclient.ServerError
			require.ErrorAs(t, err, &se)
			assert.True(t, strings.HasPrefix(se.Message, tc.want), se.Message)
			_, err = c.Call(ctx, "reset", wire.NewMap(1).Set("options", wire.NewMap(1).Set("session_id", tc.id)))
			if tc.obs == nil && tc.id != nil {
				require.ErrorAs(t, err, &se, "reset refuses the id too")
			}
		})
	}
	assert.Len(t, fg.Requests(), n, "nothing reached the gateway")
	assert.Equal(t, []string{"arm-1", "arm-1"}, fg.ResetsCopy(), "only valid ids were reset")
	assert.Equal(t, "options.session_id", protoError(service.Invalid("session", "session: x"), 0, false).(*service.HandlerError).Field,
		"the service's session errors are restated")
}
