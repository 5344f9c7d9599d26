package httpfront

import (
	"context"
	"github.com/gr00tgw/gr00tgw/service"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPredictCallerGone: Server.Predict (the robot front ends' entry)
// reports a caller whose context was cancelled mid-request (zmq's watcher
// or openpi's reader saw the peer go) as client_closed (499), as HTTP does,
// not as the 503 of a server shutting down.
func TestPredictCallerGone(t *testing.T) {
	f := newFixture(t, true)
	f.backend.gate = make(chan struct{})
	f.backend.started = make(chan struct{}, 1)
	raw, err := os.ReadFile("../../service/testdata/droid_request.json")
	require.NoError(t, err)
	r, err := service.DecodeJSON(raw)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-f.backend.started; cancel() }()
	_, err = f.core.Predict(ctx, r, service.PredictOptions{Protocol: "zmq", Route: "get_action"})
	var he *service.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, service.StatusClientClosed, he.Status)
	assert.Equal(t, service.CodeClientClosed, he.Code)
}
