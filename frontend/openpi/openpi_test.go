package openpi

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/openpiclient"
	"github.com/gr00tgw/gr00tgw/frontend"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/service/servicetest"
	"github.com/gr00tgw/gr00tgw/wire"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startServer(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	s, err := New(o)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		assert.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return s, ln.Addr().String()
}

func dial(t *testing.T, addr string, o openpiclient.Options) *openpiclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := openpiclient.Dial(ctx, addr, o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// droidObs is one DROID observation: camera i's frames filled with i+1
// (t=0) and i+11 (t=1), state groups of 0.5.
func droidObs() *wire.Map {
	m := wire.NewMap(6)
	for i, cam := range []string{"exterior_image_1_left", "wrist_image_left"} {
		pix := make([]byte, 2*180*320*3)
		for j := range pix {
			pix[j] = byte(i + 1 + 10*(j/(180*320*3)))
		}
		m.Set("observation/"+cam, wire.Uint8Array([]int{2, 180, 320, 3}, pix))
	}
	for _, g := range []struct {
		k string
		d int
	}{{"eef_9d", 9}, {"gripper_position", 1}, {"joint_position", 7}} {
		v := make([]float32, g.d)
		for i := range v {
			v[i] = 0.5
		}
		m.Set("observation/"+g.k, wire.Float32Array([]int{g.d}, v))
	}
	return m.Set("prompt", "pick up the cup")
}

func set(m *wire.Map, k string, v any) *wire.Map {
	for i, x := range m.Keys {
		if x.Name == k {
			m.Values[i] = v
			return m
		}
	}
	return m.Set(k, v)
}

func del(m *wire.Map, k string) *wire.Map {
	for i, x := range m.Keys {
		if x.Name == k {
			m.Keys = append(m.Keys[:i], m.Keys[i+1:]...)
			m.Values = append(m.Values[:i], m.Values[i+1:]...)
			break
		}
	}
	return m
}

func TestHealthz(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	st, body := get("/healthz")
	assert.Equal(t, 200, st)
	assert.Equal(t, "OK\n", body)
	fg.NotReady.Store(true)
	st, _ = get("/healthz")
	assert.Equal(t, 503, st)
	fg.NotReady.Store(false)
	st, _ = get("/")
	assert.Equal(t, http.StatusUpgradeRequired, st)
}

func TestInfer(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg, Version: "test"})
	c := dial(t, addr, openpiclient.Options{})
	def, _ := c.Metadata.Get("default_embodiment")
	assert.Equal(t, servicetest.DROIDTag, def)
	embs, _ := c.Metadata.Get("embodiments")
	droid, ok := embs.(*wire.Map).Get(servicetest.DROIDTag)
	require.True(t, ok)
	keys, _ := droid.(*wire.Map).Get("image_keys")
	assert.Equal(t, []any{"observation/exterior_image_1_left", "observation/wrist_image_left"}, keys)
	dim, _ := droid.(*wire.Map).Get("action_dim")
	assert.Equal(t, int64(17), dim)
	shape, _ := droid.(*wire.Map).Get("image_shape")
	assert.Equal(t, "(2, H, W, 3)", shape)

	for i := range 2 {
		m, err := c.Infer(context.Background(), droidObs())
		require.NoError(t, err)
		r, err := openpiclient.ParseResult(m)
		require.NoError(t, err)
		assert.Equal(t, "float32 (40, 17)", r.Actions.String())
		assert.Equal(t, "float32 (40, 9)", r.Groups["eef_9d"].String())
		assert.Equal(t, "float32 (40, 7)", r.Groups["joint_position"].String())
		a, _ := r.Actions.Float32s()
		// Row 3: eef_9d (d=0..8), gripper (d=0), joints (d=0..6).
		assert.Equal(t, float32(0.5+11.0/256+3+0.02), a[3*17+2])
		assert.Equal(t, float32(0.5+11.0/256+3), a[3*17+9], "gripper after eef_9d")
		assert.Equal(t, float32(0.5+11.0/256+3+0.01), a[3*17+11], "joints after the gripper")
		assert.NotEmpty(t, r.RequestID)
		assert.GreaterOrEqual(t, r.InferMS, 0.0)
		if i == 0 {
			assert.Equal(t, -1.0, r.PrevTotalMS, "no prev_total_ms on the first reply")
		} else {
			assert.GreaterOrEqual(t, r.PrevTotalMS, 0.0)
		}
	}
	req := fg.Requests()[0]
	assert.Equal(t, "pick up the cup", req.Instruction)
	assert.Equal(t, "prompt", req.InstructionField)
	assert.Equal(t, byte(12), req.Images["wrist_image_left"][1].Raw.Pix[0])

	// One frame per camera: (H, W, 3) accepted; embodiment and seed.
	one := wire.NewMap(5).Set("observation/front", wire.Uint8Array([]int{4, 4, 3}, make([]byte, 48))).
		Set("observation/joints", wire.Float32Array([]int{2}, []float32{1, 2})).Set("prompt", "go").Set("embodiment", "one_cam").Set("seed", int64(3))
	m, err := c.Infer(context.Background(), one)
	require.NoError(t, err)
	r, err := openpiclient.ParseResult(m)
	require.NoError(t, err)
	assert.Equal(t, "float32 (4, 2)", r.Actions.String())
	last := fg.Requests()[len(fg.Requests())-1]
	require.NotNil(t, last.Seed)
	assert.Equal(t, uint64(3), *last.Seed)

	// A seed of 2⁶³ or more arrives as a msgpack uint64.
	big := wire.NewMap(5).Set("observation/front", wire.Uint8Array([]int{4, 4, 3}, make([]byte, 48))).
		Set("observation/joints", wire.Float32Array([]int{2}, []float32{1, 2})).Set("prompt", "go").Set("embodiment", "one_cam").Set("seed", uint64(1<<63))
	_, err = c.Infer(context.Background(), big)
	require.NoError(t, err)
	last = fg.Requests()[len(fg.Requests())-1]
	require.NotNil(t, last.Seed)
	assert.Equal(t, uint64(1<<63), *last.Seed)
}

// TestErrors: each bad observation gets one text frame naming the field,
// then close 1011; the server goes on serving new connections.
func TestErrors(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg, Limits: frontend.Limits{MaxMessageBytes: 2 << 20}})
	obs := func(mut func(m *wire.Map) *wire.Map) []byte {
		b, err := wire.Marshal(mut(droidObs()), wire.EncodingOpenPI)
		require.NoError(t, err)
		return b
	}
	nan := make([]float32, 7)
	nan[2] = float32(math.NaN())
	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"float32 video", obs(func(m *wire.Map) *wire.Map {
			return set(m, "observation/wrist_image_left", wire.Float32Array([]int{1, 180, 320, 3}, make([]float32, 180*320*3)))
		}), "observation/wrist_image_left: expected uint8 (2, H, W, 3), got float32 (1, 180, 320, 3)\ncode: invalid\nfield: observation/wrist_image_left"},
		{"single frame for T=2", obs(func(m *wire.Map) *wire.Map {
			return set(m, "observation/exterior_image_1_left", wire.Uint8Array([]int{180, 320, 3}, make([]byte, 180*320*3)))
		}), "observation/exterior_image_1_left: expected uint8 (2, H, W, 3), got uint8 (180, 320, 3)"},
		{"missing camera", obs(func(m *wire.Map) *wire.Map { return del(m, "observation/wrist_image_left") }),
			"observation/wrist_image_left: missing camera (want uint8 (2, H, W, 3))"},
		{"missing group", obs(func(m *wire.Map) *wire.Map { return del(m, "observation/eef_9d") }),
			"observation/eef_9d: missing state group (want float (9,))"},
		{"wrong width", obs(func(m *wire.Map) *wire.Map {
			return set(m, "observation/joint_position", wire.Float32Array([]int{8}, make([]float32, 8)))
		}), "observation/joint_position: expected float32 or float64 (7,), got float32 (8,)"},
		{"NaN state", obs(func(m *wire.Map) *wire.Map {
			return set(m, "observation/joint_position", wire.Float32Array([]int{7}, nan))
		}),
			"observation/joint_position[2]: NaN is not finite"},
		{"unknown key", obs(func(m *wire.Map) *wire.Map {
			return m.Set("observation/cartesian_position", wire.Float32Array([]int{6}, make([]float32, 6)))
		}),
			"observation/cartesian_position: unknown key (want observation/<camera> for exterior_image_1_left, wrist_image_left; observation/<group> for eef_9d, gripper_position, joint_position; prompt; embodiment; seed; options; session_id)"},
		{"missing prompt", obs(func(m *wire.Map) *wire.Map { return del(m, "prompt") }), "prompt: missing (the instruction, a str)"},
		{"negative seed", obs(func(m *wire.Map) *wire.Map { return m.Set("seed", int64(-1)) }), "seed: -1 is negative\ncode: invalid\nfield: seed"},
		{"str seed", obs(func(m *wire.Map) *wire.Map { return m.Set("seed", "7") }), "seed: expected a non-negative int, got str\ncode: "},
		{"unknown embodiment", obs(func(m *wire.Map) *wire.Map { return m.Set("embodiment", "r2d2") }), `embodiment: "r2d2" is not served`},
		{"garbage", []byte("\xc1 not msgpack"), "observation: not valid msgpack: msgpack: offset 0: unsupported msgpack type 0xc1"},
		{"truncated", obs(func(m *wire.Map) *wire.Map { return m })[:1000], "observation: not valid msgpack: msgpack: offset"},
		{"bad ndarray", obs(func(m *wire.Map) *wire.Map {
			return set(m, "observation/eef_9d", wire.NewMap(3).SetBin("__ndarray__", true).SetBin("data", []byte{1}).SetBin("dtype", "<f4"))
		}), "observation.observation/eef_9d: ndarray: missing shape"},
		{"oversized", make([]byte, 3<<20), "observation: message over the maximum message size of 2097152 bytes (openpi.max_message_bytes)\ncode: too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr, openpiclient.Options{})
			_, err := c.InferRaw(context.Background(), tc.frame)
			var se *openpiclient.ServerError
			require.ErrorAs(t, err, &se)
			assert.True(t, strings.HasPrefix(se.Text, tc.want), "%q", se.Text)
			assert.Contains(t, se.Text, "request_id: ")
			assert.Equal(t, websocket.StatusInternalError, se.CloseCode)
		})
	}
	// A text frame instead of a binary one.
	c := dial(t, addr, openpiclient.Options{})
	ws := c.Conn()
	require.NoError(t, ws.Write(context.Background(), websocket.MessageText, []byte("{}")))
	typ, b, err := ws.Read(context.Background())
	require.NoError(t, err)
	assert.Equal(t, websocket.MessageText, typ)
	assert.True(t, strings.HasPrefix(string(b), "observation: expected a binary msgpack frame, got a text frame"), string(b))
	_, _, err = ws.Read(context.Background())
	assert.Equal(t, websocket.StatusInternalError, websocket.CloseStatus(err))

	// The server still serves.
	c2 := dial(t, addr, openpiclient.Options{})
	_, err = c2.Infer(context.Background(), droidObs())
	require.NoError(t, err)
}

func TestAPIKey(t *testing.T) {
	_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}, APIKey: "k3y"})
	for _, key := range []string{"", "wrong", "k3"} {
		_, err := openpiclient.Dial(context.Background(), addr, openpiclient.Options{APIKey: key})
		require.Error(t, err, key)
		assert.Contains(t, err.Error(), "HTTP 401")
	}
	c := dial(t, addr, openpiclient.Options{APIKey: "k3y"})
	_, err := c.Infer(context.Background(), droidObs())
	require.NoError(t, err)
}

func TestTimeoutsDisconnectAndShutdown(t *testing.T) {
	fg := &servicetest.Gateway{Delay: 5 * time.Second}
	s, addr := startServer(t, Options{Gateway: fg, Limits: frontend.Limits{IdleTimeout: 150 * time.Millisecond}})
	// A client that goes away cancels its prediction.
	c := dial(t, addr, openpiclient.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := c.Infer(ctx, droidObs())
	cancel()
	require.Error(t, err)
	assert.Eventually(t, func() bool { return fg.Canceled.Load() == 1 }, 5*time.Second, 5*time.Millisecond)

	// An idle connection is closed.
	fg.Delay = 0
	c2 := dial(t, addr, openpiclient.Options{})
	time.Sleep(400 * time.Millisecond)
	_, err = c2.Infer(context.Background(), droidObs())
	require.Error(t, err, "closed for idleness")

	// Shutdown answers the observation in flight, then closes.
	fg.Delay = 300 * time.Millisecond
	c3 := dial(t, addr, openpiclient.Options{})
	res := make(chan error, 1)
	go func() {
		_, err := c3.Infer(context.Background(), droidObs())
		res <- err
	}()
	require.Eventually(t, func() bool { return fg.Inflight.Load() == 1 }, 5*time.Second, time.Millisecond)
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	require.NoError(t, s.Shutdown(sctx))
	require.NoError(t, <-res)
}

// FuzzObservation feeds arbitrary frames to the observation mapper (the
// msgpack decoder and openpi's array codec behind it): no panic, and a
// mapped request always holds every camera and state group.
func FuzzObservation(f *testing.F) {
	g := &servicetest.Gateway{}
	one := wire.NewMap(4).Set("observation/front", wire.Uint8Array([]int{2, 2, 3}, make([]byte, 12))).
		Set("observation/joints", wire.Float32Array([]int{2}, []float32{1, 2})).Set("prompt", "go").Set("embodiment", "one_cam")
	b, _ := wire.Marshal(one, wire.EncodingOpenPI)
	f.Add(b)
	f.Add([]byte{0x81, 0xa6, 'p', 'r', 'o', 'm', 'p', 't', 0xa1, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, c, err := mapObservation(data, g, wire.Limits{MaxElements: 1 << 12})
		if err != nil {
			var he *service.HandlerError
			if !assert.ErrorAs(t, err, &he) || he.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		for _, cam := range c.Info.Cameras {
			if len(r.Images[cam]) != len(c.Info.VideoDeltaIndices) {
				t.Fatalf("camera %s: %d frames", cam, len(r.Images[cam]))
			}
		}
		for _, gr := range c.Info.StateGroups {
			if len(r.State[gr.Key]) != gr.Dim {
				t.Fatalf("group %s: %d values", gr.Key, len(r.State[gr.Key]))
			}
		}
	})
}

// TestKeyring: with auth.api_keys_file's keyring the upgrade needs one of
// its keys as Bearer, X-API-Key or openpi's Api-Key (or openpi.api_key);
// anything else is refused with 401 before the upgrade.
func TestKeyring(t *testing.T) {
	keys := secure.NewKeyring(mustKeys(t, "key-1"))
	_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}, APIKey: "k3y", Keys: keys})
	for name, h := range map[string]http.Header{
		"none":             {},
		"wrong bearer":     {"Authorization": {"Bearer key-2"}},
		"wrong x-api-key":  {"X-Api-Key": {"nope"}},
		"hash as key":      {"Authorization": {"Bearer " + secure.Hash("key-1")}},
		"key as basic":     {"Authorization": {"Basic key-1"}},
		"legacy as bearer": {"Authorization": {"Bearer k3y"}},
	} {
		_, err := openpiclient.Dial(context.Background(), addr, openpiclient.Options{Header: h})
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "HTTP 401", name)
	}
	for name, o := range map[string]openpiclient.Options{
		"bearer":    {Header: http.Header{"Authorization": {"Bearer key-1"}}},
		"x-api-key": {Header: http.Header{"X-Api-Key": {"key-1"}}},
		"api-key":   {APIKey: "key-1"},
		"legacy":    {APIKey: "k3y"},
	} {
		c := dial(t, addr, o)
		_, err := c.Infer(context.Background(), droidObs())
		require.NoError(t, err, name)
	}
}

func mustKeys(t *testing.T, keys ...string) []secure.Key {
	t.Helper()
	var lines []string
	for _, k := range keys {
		lines = append(lines, secure.Hash(k))
	}
	ks, err := secure.ParseKeys(strings.NewReader(strings.Join(lines, "\n")))
	require.NoError(t, err)
	return ks
}

// TestWhileStarting: while the gateway warms up, a client that connects and
// leaves frees its connection slot (it used to hold it until ready), a
// client's ping is answered, and an observation sent before the metadata
// is served once the gateway is ready.
func TestWhileStarting(t *testing.T) {
	fg := &servicetest.Gateway{}
	fg.NotReady.Store(true)
	s, addr := startServer(t, Options{Gateway: fg, Limits: frontend.Limits{MaxConnections: 2}})
	dialRaw := func() *websocket.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/", nil)
		require.NoError(t, err)
		return ws
	}
	for range 2 {
		dialRaw().CloseNow() //nolint:errcheck
	}
	noConns := func() bool {
		return s.conns.Len() == 0
	}
	require.Eventually(t, noConns, 5*time.Second, 10*time.Millisecond, "the slots of clients gone while starting are freed")

	ws := dialRaw()
	defer ws.CloseNow() //nolint:errcheck
	replies := make(chan []byte, 2)
	go func() {
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			replies <- b
		}
	}()
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, ws.Ping(pctx), "ping while starting")
	b, err := wire.Marshal(droidObs(), wire.EncodingOpenPI)
	require.NoError(t, err)
	require.NoError(t, ws.Write(pctx, websocket.MessageBinary, b))
	fg.NotReady.Store(false)
	for i, want := range []string{"metadata", "actions"} {
		select {
		case r := <-replies:
			v, err := wire.Decode(r, wire.Limits{})
			require.NoError(t, err, want)
			_, isMap := v.(*wire.Map)
			assert.True(t, isMap, "reply %d (%s)", i, want)
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s reply", want)
		}
	}
	assert.Len(t, fg.Requests(), 1)
	ws.CloseNow() //nolint:errcheck
	require.Eventually(t, noConns, 5*time.Second, 10*time.Millisecond, "the slot of a client gone after a request is freed")

	// Idle clients that leave free their slots, every time (the reader's
	// hand-off of the peer's error used to be lost half the time).
	for range 8 {
		dial(t, addr, openpiclient.Options{}).Close()
		require.Eventually(t, noConns, 5*time.Second, 10*time.Millisecond, "the slot of an idle client gone is freed")
	}
}

// TestVideoShape: the metadata's image_shape and the errors say the same,
// and a one-frame embodiment takes (H, W, 3) or (1, H, W, 3) (README).
func TestVideoShape(t *testing.T) {
	assert.Equal(t, "uint8 (H, W, 3) or (1, H, W, 3)", videoShape(1))
	assert.Equal(t, "uint8 (2, H, W, 3)", videoShape(2))
}

// TestInferRTCOptions: an observation's options carry real-time chunking
// (upstream's names, the previous chunk as an array) into the gateway's
// request; a wrong type names the option.
func TestInferRTCOptions(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg, Version: "test"})
	c := dial(t, addr, openpiclient.Options{})
	prev := make([]float32, 40*132)
	obs := droidObs()
	obs.Set("options", wire.NewMap(5).Set("action_horizon", int64(40)).Set("rtc_overlap_steps", int64(8)).
		Set("rtc_frozen_steps", int64(2)).Set("rtc_ramp_rate", 6.0).Set("rtc_prev_action", wire.Float32Array([]int{1, 40, 132}, prev)))
	_, err := c.Infer(context.Background(), obs)
	require.NoError(t, err)
	reqs := fg.Requests()
	r := reqs[len(reqs)-1]
	require.NotNil(t, r.Options)
	assert.Equal(t, []int{40, 8, 2}, []int{*r.Options.Horizon, *r.Options.Overlap, *r.Options.Frozen})
	assert.Equal(t, 40, r.RTCPrevRows)

	bad := droidObs()
	bad.Set("options", wire.NewMap(1).Set("rtc_frozen_steps", 2.5))
	_, err = c.Infer(context.Background(), bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "options.rtc_frozen_steps")
	// A misspelt option is refused, never ignored.
	typo := droidObs()
	typo.Set("options", wire.NewMap(1).Set("rtc_frozen_step", int64(2)))
	_, err = dial(t, addr, openpiclient.Options{}).Infer(context.Background(), typo) // the error closed c
	require.Error(t, err)
	assert.Contains(t, err.Error(), `options: unknown key "rtc_frozen_step"`)
	assert.Equal(t, "options.rtc_prev_action", protoError(service.Invalid("rtc_prev_action", "rtc_prev_action: x")).(*service.HandlerError).Field)
}
