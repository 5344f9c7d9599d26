package openpi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/openpiclient"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/service/servicetest"
	"github.com/gr00tgw/gr00tgw/wire"
)

// TestConnectionSession: each connection is a session of its own (one id
// for all its observations, another for the next connection, reset when
// it ends); an observation may name one (session_id), which the
// connection resets on its first use; bad ids are refused naming
// session_id, and nothing reaches the gateway.
func TestConnectionSession(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg})
	ctx := context.Background()
	infer := func(c *openpiclient.Client, m *wire.Map) error {
		_, err := c.Infer(ctx, m)
		return err
	}
	c1 := dial(t, addr, openpiclient.Options{})
	require.NoError(t, infer(c1, droidObs()))
	require.NoError(t, infer(c1, droidObs()))
	reqs := fg.Requests()
	own := reqs[0].Session
	assert.True(t, strings.HasPrefix(own, "openpi-"), own)
	assert.Equal(t, own, reqs[1].Session, "one connection, one session")
	require.NoError(t, c1.Close())
	assert.Eventually(t, func() bool {
		fg2 := fg.ResetsCopy()
		return len(fg2) == 1 && fg2[0] == own
	}, 5*time.Second, 5*time.Millisecond, "the connection's session is reset when it ends")

	c2 := dial(t, addr, openpiclient.Options{})
	require.NoError(t, infer(c2, droidObs()))
	assert.NotEqual(t, own, fg.Requests()[2].Session, "a new connection, a new session")
	require.NoError(t, infer(c2, droidObs().Set("session_id", "arm-1")))
	require.NoError(t, infer(c2, droidObs().Set("session_id", "arm-1")))
	assert.Equal(t, "arm-1", fg.Requests()[4].Session)
	assert.Equal(t, []string{own, "arm-1"}, fg.ResetsCopy(), "a named session is reset on its first use by a connection")

	n := len(fg.Requests())
	for _, tc := range []struct {
		name string
		id   any
		want string
	}{
		{"too long", strings.Repeat("x", 129), "session_id: 129 bytes, at most 128\ncode: invalid\nfield: session_id"},
		{"bad byte", "a/b", "session_id: \"a/b\": byte 1"},
		{"empty", "", "session_id: empty"},
		{"not a str", int64(3), "session_id: expected a str, got int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr, openpiclient.Options{})
			err := infer(c, droidObs().Set("session_id", tc.id))
			var se *openpiclient.ServerError
			require.ErrorAs(t, err, &se)
			assert.True(t, strings.HasPrefix(se.Text, tc.want), se.Text)
		})
	}
	assert.Len(t, fg.Requests(), n, "nothing reached the gateway")
	assert.Equal(t, "session_id", protoError(service.Invalid("session", "session: x")).(*service.HandlerError).Field)
}
