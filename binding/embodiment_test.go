package binding

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	stdimage "image"
	_ "image/png"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/core/text"
	httpfront "github.com/gr00tgw/gr00tgw/frontend/http"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/service"
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
		var he *service.HandlerError
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
func caseAFrames(t *testing.T) []service.CameraFrames {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "testdata", "n17-tiny", "caseA")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return b
	}
	return []service.CameraFrames{
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
		var fe service.FieldError
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

// rgbOf decodes a PNG into raw RGB bytes with the standard library.
func rgbOf(t *testing.T, png []byte) ([]byte, int, int) {
	t.Helper()
	img, _, err := stdimage.Decode(bytes.NewReader(png))
	require.NoError(t, err)
	b := img.Bounds()
	out := make([]byte, 0, b.Dx()*b.Dy()*3)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			out = append(out, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	return out, b.Dy(), b.Dx()
}

// Raw RGB frames — msgpack {data, shape} on /predict, and RawFrame through
// Server.Predict (the robot protocols' path) — give actions bit-identical
// to the same pixels sent as PNG; a raw frame outside the size rules is
// refused naming it.
func TestRawFramesMatchPNG(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugins and opens the CPU backend")
	}
	root := repoRoot(t)
	cfg := config.Default()
	cfg.Threads = 2
	cfg.GoldenDir = "-"
	paths := Resolve(cfg, root)
	paths.Plugins = pluginsDir(t, root)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	core, err := service.New(service.Options{Config: cfg, Logger: log})
	require.NoError(t, err)
	srv, err := httpfront.New(core, httpfront.Options{})
	require.NoError(t, err)
	require.NoError(t, core.Start(context.Background(), func(ctx context.Context) (*service.Deps, error) {
		return Open(ctx, cfg, paths, log, nil)
	}))
	defer core.Shutdown(context.Background(), srv.Shutdown)
	raw, err := os.ReadFile(filepath.Join(root, "testdata", "n17-tiny", "caseA", "request.json"))
	require.NoError(t, err)
	post := func(body []byte, ct string) (int, service.PredictResponse, string) {
		req, _ := http.NewRequest("POST", "/predict", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Accept", "application/json")
		resp, err := srv.App().Test(req, -1)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		var pr service.PredictResponse
		_ = json.Unmarshal(b, &pr)
		return resp.StatusCode, pr, string(b)
	}
	st, png, msg := post(raw, "application/json")
	require.Equal(t, 200, st, msg)

	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	frames := map[string][]service.RawFrame{}
	for cam, list := range m["images"].(map[string]any) {
		var out []any
		for _, f := range list.([]any) {
			b, err := base64.StdEncoding.DecodeString(f.(string))
			require.NoError(t, err)
			pix, h, w := rgbOf(t, b)
			out = append(out, map[string]any{"data": pix, "shape": []int{h, w, 3}, "dtype": "uint8"})
			frames[cam] = append(frames[cam], service.RawFrame{Pix: pix, Height: h, Width: w})
		}
		m["images"].(map[string]any)[cam] = out
	}
	body, err := msgpack.Marshal(m)
	require.NoError(t, err)
	st, viaMsgpack, msg := post(body, "application/msgpack")
	require.Equal(t, 200, st, msg)
	assert.Equal(t, png.Actions, viaMsgpack.Actions, "raw frames over msgpack")

	// Server.Predict with RawFrames, as a robot-protocol front end calls it.
	req := &service.Request{Images: map[string][]service.Frame{}, State: map[string][]float64{}, StateDtype: "float32",
		Instruction: m["instruction"].(string), InstructionField: "instruction"}
	for cam, fs := range frames {
		for i := range fs {
			req.Images[cam] = append(req.Images[cam], service.Frame{Raw: &fs[i]})
		}
	}
	for g, v := range m["state"].(map[string]any) {
		for _, x := range v.([]any) {
			req.State[g] = append(req.State[g], x.(float64))
		}
	}
	for _, row := range m["noise"].([]any) {
		for _, x := range row.([]any) {
			req.Noise = append(req.Noise, float32(x.(float64)))
		}
	}
	req.NoiseShape = []int{40, 132}
	resp, err := core.Predict(context.Background(), req, service.PredictOptions{Protocol: "test"})
	require.NoError(t, err)
	assert.Equal(t, png.Actions, resp.Actions, "raw frames through Server.Predict")

	// A raw frame with a wrong-sized buffer or outside the aspect band.
	bad := frames["wrist_image_left"][0]
	bad.Pix = bad.Pix[:len(bad.Pix)-3]
	req.Images["wrist_image_left"][0] = service.Frame{Raw: &bad}
	_, err = core.Predict(context.Background(), req, service.PredictOptions{Protocol: "test"})
	var he *service.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, 400, he.Status)
	assert.Equal(t, "images.wrist_image_left[0]", he.Field)
	square := service.RawFrame{Pix: make([]byte, 256*256*3), Height: 256, Width: 256}
	req.Images["wrist_image_left"][0] = service.Frame{Raw: &square}
	_, err = core.Predict(context.Background(), req, service.PredictOptions{Protocol: "test"})
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "images.wrist_image_left[0]", he.Field)
	assert.Contains(t, he.Err.Error(), "patch grid")
}

// The plugin's frame_side narrows the accepted frame sides (never beyond
// image.DefaultLimits).
func TestEncoderFrameSides(t *testing.T) {
	assert.Equal(t, image.DefaultLimits, Limits{}.sides())
	assert.Equal(t, image.Limits{MinSide: 100, MaxSide: 1000}, Limits{FrameSide: image.Limits{MinSide: 100, MaxSide: 1000}}.sides())
	assert.Equal(t, image.Limits{MinSide: 64, MaxSide: 4096}, Limits{FrameSide: image.Limits{MinSide: 1, MaxSide: 1 << 20}}.sides())
	e := droidEncoder(t, Limits{FrameSide: image.Limits{MinSide: 200, MaxSide: 4096}})
	_, err := e.Decode(context.Background(), caseAFrames(t))
	var fe service.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "images.exterior_image_1_left[0]", fe.Field())
	assert.Contains(t, err.Error(), "[200, 4096]")
}
