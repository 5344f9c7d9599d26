package service

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
)

// The status mapping, in one table: the client's errors are 4xx, the
// server's 5xx — a device input error included (the encoder checks the
// request against the backend's limits before the lock, so one reaching
// the device is a bug on this side).
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		stage  string
		status int
		code   string
	}{
		{"device input error", fmt.Errorf("cpu: llm: %w", fmt.Errorf("cpu: invalid input: %w", device.ErrInput)), "device", 500, CodeInternal},
		{"device failure", fmt.Errorf("cpu: out of memory"), "device", 500, CodeDevice},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "device", 504, CodeTimeout},
		{"cancelled", context.Canceled, "queue", 503, CodeUnavailable},
		{"field", NewFieldError("images.cam[0]", errors.New("bad png")), "decode", 400, CodeInvalid},
		{"internal", errors.New("boom"), "encode", 500, CodeInternal},
		{"handler", &HandlerError{Status: 422, Code: CodeSchema, Err: errors.New("x")}, "decode", 422, CodeSchema},
	} {
		he := classify(tc.err, tc.stage)
		assert.Equal(t, tc.status, he.Status, tc.name)
		assert.Equal(t, tc.code, he.Code, tc.name)
	}
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
	l := newDeviceLock(2, 1)
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
	r := &Request{}
	err := parseNoise(r, []any{[]any{[]any{1.0, 2.0}, []any{1.0, "x"}}})
	require.Error(t, err)
	var he *HandlerError
	require.ErrorAs(t, err, &he)
	require.Equal(t, "noise[0][1][1]", he.Field)
	require.Contains(t, err.Error(), "noise[0][1][1]")
}

// Raw frames in msgpack: {data, shape [H, W, 3], dtype uint8}; a malformed
// one names its field.
func TestParseRawFrame(t *testing.T) {
	pix := make([]byte, 4*6*3)
	ok, err := parseRawFrame(map[string]any{"data": pix, "shape": []any{int64(4), int64(6), int64(3)}, "dtype": "uint8"}, "images.cam[0]")
	require.NoError(t, err)
	assert.Equal(t, 4, ok.Height)
	assert.Equal(t, 6, ok.Width)
	for _, tc := range []struct {
		name, field string
		m           map[string]any
	}{
		{"no data", "images.cam[0].data", map[string]any{"shape": []any{int64(4), int64(6), int64(3)}}},
		{"str data", "images.cam[0].data", map[string]any{"data": "x", "shape": []any{int64(4), int64(6), int64(3)}}},
		{"short", "images.cam[0].data", map[string]any{"data": pix[:10], "shape": []any{int64(4), int64(6), int64(3)}}},
		{"rank", "images.cam[0].shape", map[string]any{"data": pix, "shape": []any{int64(24), int64(3)}}},
		{"channels", "images.cam[0].shape", map[string]any{"data": pix, "shape": []any{int64(6), int64(6), int64(2)}}},
		{"negative", "images.cam[0].shape", map[string]any{"data": pix, "shape": []any{int64(-4), int64(6), int64(3)}}},
		{"dtype", "images.cam[0].dtype", map[string]any{"data": pix, "shape": []any{int64(4), int64(6), int64(3)}, "dtype": "float32"}},
		{"unknown", "images.cam[0].x", map[string]any{"data": pix, "shape": []any{int64(4), int64(6), int64(3)}, "x": 1}},
	} {
		_, err := parseRawFrame(tc.m, "images.cam[0]")
		he := classify(err, "decode")
		assert.Contains(t, []int{400, 422}, he.Status, tc.name)
		assert.Equal(t, tc.field, he.Field, tc.name)
	}
}
