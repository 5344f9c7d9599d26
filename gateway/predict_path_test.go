package gateway

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
)

// A backend's input error (a request larger than its layout) is the
// client's fault: 400, not a 500 device failure.
func TestClassifyDeviceInputError(t *testing.T) {
	he := classify(fmt.Errorf("cpu: llm: %w", fmt.Errorf("cpu: invalid input: %w", device.ErrInput)), "device")
	require.Equal(t, http.StatusBadRequest, he.Status)
	require.Equal(t, CodeInvalid, he.Code)
	he = classify(fmt.Errorf("cpu: out of memory"), "device")
	require.Equal(t, http.StatusInternalServerError, he.Status)
}

// Signed msgpack seeds above 2^53 keep every bit.
func TestSeedSignedKeepsBits(t *testing.T) {
	for _, n := range []any{int64(1<<63 - 1), int64(1<<53 + 1), int32(7), int8(0)} {
		got, err := parseSeed(n)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(n), fmt.Sprint(got))
	}
	_, err := parseSeed(int64(-1))
	require.Error(t, err)
}

// A request whose deadline already passed never takes the device, even
// when the lock is free.
func TestAcquireDeadContext(t *testing.T) {
	l := newDeviceLock(2)
	l2 := &l
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l2.acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)
	rel, err := l2.acquire(context.Background())
	require.NoError(t, err)
	rel()
}

// Errors inside the [1][H][D] noise form name its real JSON path.
func TestNoiseFieldPathBatched(t *testing.T) {
	r := &predictRequest{}
	err := parseNoise(r, []any{[]any{[]any{1.0, 2.0}, []any{1.0, "x"}}})
	require.Error(t, err)
	var he *HandlerError
	require.ErrorAs(t, err, &he)
	require.Equal(t, "noise[0][1][1]", he.Field)
	require.Contains(t, err.Error(), "noise[0][1][1]")
}
