package adapt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/core/text"
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

// droidEncoder is the DROID processor of the tiny checkpoint behind an
// Encoder with the given limits.
func droidEncoder(t *testing.T, l Limits) *Encoder {
	t.Helper()
	root := repoRoot(t)
	tok, err := text.LoadFile(filepath.Join(root, "testdata", "tokenizer", "qwen3", "tokenizer.json"))
	require.NoError(t, err)
	pc, err := processor.LoadConfig(filepath.Join(root, "testdata", "n17-tiny", "processor_config.json"), processor.DROIDTag)
	require.NoError(t, err)
	p, err := processor.New(pc, tok)
	require.NoError(t, err)
	e, err := NewEncoder(p, l)
	require.NoError(t, err)
	return e
}

// caseAFrames are case A's four PNG frames in camera order.
func caseAFrames(t *testing.T) []gateway.CameraFrames {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "testdata", "n17-tiny", "caseA")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return b
	}
	return []gateway.CameraFrames{
		{Key: "exterior_image_1_left", Frames: [][]byte{read("frame_0_exterior_image_1_left_t-15.png"), read("frame_2_exterior_image_1_left_t0.png")}},
		{Key: "wrist_image_left", Frames: [][]byte{read("frame_1_wrist_image_left_t-15.png"), read("frame_3_wrist_image_left_t0.png")}},
	}
}

// An image set over the backend's limits is the client's error naming
// images, answered by the encoder (before the device lock); within them
// the same request encodes.
func TestEncoderLimits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"within", Limits{MaxImages: 4, MaxPatches: 1792}, true},
		{"unbounded", Limits{}, true},
		{"images", Limits{MaxImages: 3}, false},
		{"patches", Limits{MaxPatches: 1000}, false},
	} {
		e := droidEncoder(t, tc.l)
		d, err := e.Decode(ctx, caseAFrames(t))
		require.NoError(t, err, tc.name)
		enc, err := e.Encode(ctx, d, "Put the blue block in the green bowl")
		if tc.ok {
			require.NoError(t, err, tc.name)
			assert.Equal(t, 1792, enc.Inputs.PixelRows, tc.name)
			enc.Release()
			continue
		}
		var fe gateway.FieldError
		require.ErrorAs(t, err, &fe, tc.name)
		assert.Equal(t, "images", fe.Field(), tc.name)
	}
	// A cancelled request does no work.
	e := droidEncoder(t, Limits{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := e.Decode(cctx, caseAFrames(t))
	require.ErrorIs(t, err, context.Canceled)
}

// The free lists keep buffers of ordinary sizes only: a request with huge
// frames is served, and its buffers are dropped.
func TestEncoderDropsOversizedBuffers(t *testing.T) {
	ctx := context.Background()
	e := droidEncoder(t, Limits{})
	d, err := e.Decode(ctx, caseAFrames(t))
	require.NoError(t, err)
	enc, err := e.Encode(ctx, d, "x")
	require.NoError(t, err)
	enc.Release()
	assert.Equal(t, 4, e.rgb.Len(), "320x180 frames are kept")
	assert.Equal(t, 1, e.pix.Len())
	e.keepRGB, e.keepPix = 100, 100
	d, err = e.Decode(ctx, caseAFrames(t))
	require.NoError(t, err)
	enc, err = e.Encode(ctx, d, "x")
	require.NoError(t, err)
	enc.Release()
	assert.Equal(t, 0, e.rgb.Len(), "frames over keepRGB are dropped")
	assert.Equal(t, 0, e.pix.Len(), "pixel_values over keepPix are dropped")
}
