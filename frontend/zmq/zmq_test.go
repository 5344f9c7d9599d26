package zmq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/zmqclient"
	"github.com/gr00tgw/gr00tgw/frontend"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/service/servicetest"
	"github.com/gr00tgw/gr00tgw/wire"
	"github.com/gr00tgw/gr00tgw/wire/zmtp"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startServer serves o (Gateway defaulting to a fresh fake) on a loopback
// port and returns the address.
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
		assert.ErrorIs(t, <-done, ErrServerClosed)
	})
	return s, ln.Addr().String()
}

func dial(t *testing.T, addr string, o zmqclient.Options) *zmqclient.Client {
	t.Helper()
	c, err := zmqclient.Dial(context.Background(), addr, o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// droidObs is a B = 1 DROID observation: camera i's frames filled with
// i+1 (t=0) and i+11 (t=1), state groups of 0.5.
func droidObs(t *testing.T) *zmqclient.Observation {
	t.Helper()
	o := &zmqclient.Observation{Video: map[string]*wire.Array{}, State: map[string]*wire.Array{},
		LanguageKey: service.DefaultLanguageKey, Language: []string{"pick up the cup"}}
	for i, cam := range []string{"exterior_image_1_left", "wrist_image_left"} {
		pix := make([]byte, 2*180*320*3)
		for j := range pix {
			pix[j] = byte(i + 1 + 10*(j/(180*320*3))) // frame t=0: i+1, t=1: i+11
		}
		o.Video[cam] = wire.Uint8Array([]int{1, 2, 180, 320, 3}, pix)
	}
	for g, d := range map[string]int{"eef_9d": 9, "gripper_position": 1, "joint_position": 7} {
		v := make([]float32, d)
		for i := range v {
			v[i] = 0.5
		}
		o.State[g] = wire.Float32Array([]int{1, 1, d}, v)
	}
	return o
}

func TestPingResetKill(t *testing.T) {
	fg := &servicetest.Gateway{}
	var killed atomic.Int32
	_, addr := startServer(t, Options{Gateway: fg})
	c := dial(t, addr, zmqclient.Options{})
	st, err := c.Ping(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "ok", st)
	fg.NotReady.Store(true)
	st, err = c.Ping(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "starting", st)
	fg.NotReady.Store(false)
	require.NoError(t, c.Reset(context.Background()))
	v, err := c.Call(context.Background(), "reset", nil)
	require.NoError(t, err)
	assert.Equal(t, wire.NewMap(0), v)

	_, err = c.Call(context.Background(), "kill", nil)
	var se *zmqclient.ServerError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Message, "kill: refused")
	_, err = c.Call(context.Background(), "shutdown_now", nil)
	require.ErrorAs(t, err, &se)
	assert.True(t, strings.HasPrefix(se.Message, "Unknown endpoint: shutdown_now"), se.Message)

	_, addr2 := startServer(t, Options{Gateway: fg, AllowKill: true, OnKill: func() { killed.Add(1) }})
	c2 := dial(t, addr2, zmqclient.Options{})
	v, err = c2.Call(context.Background(), "kill", nil)
	require.NoError(t, err)
	assert.Nil(t, v)
	assert.Eventually(t, func() bool { return killed.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
}

func TestGetModalityConfig(t *testing.T) {
	_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}})
	c := dial(t, addr, zmqclient.Options{})
	mc, err := c.GetModalityConfig(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, mc, 4)
	five := []string{"delta_indices", "modality_keys", "sin_cos_embedding_keys", "mean_std_embedding_keys", "action_configs"}
	for name, m := range mc {
		assert.Equal(t, five, m.Fields, name)
		assert.Equal(t, []string{"__ModalityConfig_class__", "__ModalityConfig__"}, m.Markers, name)
	}
	assert.Equal(t, []int{-15, 0}, mc["video"].DeltaIndices)
	assert.Equal(t, []zmqclient.ActionConfig{
		{Rep: "RELATIVE", Type: "EEF", Format: "XYZ_ROT6D", StateKey: "eef_9d"},
		{Rep: "ABSOLUTE", Type: "NON_EEF", Format: "DEFAULT", StateKey: "gripper_position"},
		{Rep: "RELATIVE", Type: "NON_EEF", Format: "DEFAULT", StateKey: "joint_position"}}, mc["action"].ActionConfigs)
	assert.Nil(t, mc["state"].SinCosEmbeddingKeys)

	one, err := c.GetModalityConfig(context.Background(), "one_cam")
	require.NoError(t, err)
	assert.Equal(t, []string{"front"}, one["video"].ModalityKeys)

	_, err = c.GetModalityConfig(context.Background(), "nope")
	var se *zmqclient.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "options.embodiment", se.Field)
	assert.Contains(t, se.Message, `options.embodiment: "nope" is not served`)
}

func TestGetActionFormsAndEncodings(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg})
	for _, enc := range []wire.Encoding{wire.EncodingNPY, wire.EncodingMsgpackNumpy} {
		c := dial(t, addr, zmqclient.Options{Encoding: enc})
		for _, form := range []zmqclient.Form{zmqclient.Nested, zmqclient.Flat, zmqclient.Legacy} {
			t.Run(enc.String()+"/"+string(form), func(t *testing.T) {
				obs := droidObs(t)
				// The reply comes back in the request's array encoding.
				data := wire.NewMap(2).Set("observation", obs.Value(form)).Set("options", wire.NewMap(1).Set("seed", int64(7)))
				if form == zmqclient.Legacy {
					data = obs.Value(zmqclient.Flat).(*wire.Map)
				}
				b, err := wire.Marshal(wire.NewMap(2).Set("endpoint", "get_action").Set("data", data), enc)
				require.NoError(t, err)
				raw, err := c.CallRaw(context.Background(), b)
				require.NoError(t, err)
				v, err := wire.Decode(raw, wire.Limits{})
				require.NoError(t, err)
				_, got, err := wire.Resolve(v, "reply")
				require.NoError(t, err)
				assert.Equal(t, enc, got, "reply encoding")

				acts, err := c.GetAction(context.Background(), obs, form, nil)
				require.NoError(t, err)
				prefix := ""
				if form != zmqclient.Nested {
					prefix = "action."
				}
				require.Len(t, acts, 3)
				a := acts[prefix+"eef_9d"]
				require.NotNil(t, a, "%v", acts)
				want := "float32 (1, 40, 9)"
				if form == zmqclient.Legacy {
					want = "float32 (1, 40, 9)" // a batched (B, T, ...) N1.5 observation stays batched
				}
				assert.Equal(t, want, a.String())
				f, _ := a.Float32s()
				assert.Equal(t, float32(0.5+11.0/256+3+0.02), f[3*9+2]) // h=3, d=2
				assert.Equal(t, "float32 (1, 40, 1)", acts[prefix+"gripper_position"].String())
			})
		}
	}
	r := fg.Requests()[0]
	assert.Equal(t, servicetest.DROIDTag, r.Embodiment)
	assert.Equal(t, "pick up the cup", r.Instruction)
	assert.Equal(t, "language."+service.DefaultLanguageKey+"[0]", r.InstructionField)
	require.Len(t, r.Images["wrist_image_left"], 2)
	assert.Equal(t, 180, r.Images["wrist_image_left"][1].Raw.Height)
	assert.Equal(t, byte(12), r.Images["wrist_image_left"][1].Raw.Pix[0], "frame t=1 is the second frame")
	assert.Equal(t, byte(2), r.Images["wrist_image_left"][0].Raw.Pix[0])
	require.NotNil(t, r.Seed)
	assert.Equal(t, uint64(7), *r.Seed)
	assert.Equal(t, []float64{0.5}, r.State["gripper_position"])
}

func TestLegacyUnbatched(t *testing.T) {
	_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}})
	c := dial(t, addr, zmqclient.Options{})
	obs := droidObs(t)
	m := wire.NewMap(6)
	for _, cam := range []string{"exterior_image_1_left", "wrist_image_left"} {
		a := obs.Video[cam]
		m.Set("video."+cam, &wire.Array{DType: a.DType, Shape: a.Shape[1:], Data: a.Data})
	}
	for g, a := range obs.State {
		f, _ := a.Float32s()
		d := make([]float64, len(f))
		for i := range f {
			d[i] = float64(f[i])
		}
		b := make([]byte, 8*len(d))
		for i, x := range d {
			u := math.Float64bits(x)
			for k := range 8 {
				b[8*i+k] = byte(u >> (8 * k))
			}
		}
		m.Set("state."+g, &wire.Array{DType: "<f8", Shape: []int{1, len(d)}, Data: b})
	}
	m.Set("annotation.human.task_description", []any{"pick"})
	v, err := c.Call(context.Background(), "get_action", m)
	require.NoError(t, err)
	am, ok := v.(*wire.Map)
	require.True(t, ok, "N1.5 form: a flat dict reply, got %s", wire.TypeName(v))
	a, _ := am.Get("action.joint_position")
	assert.Equal(t, "float32 (40, 7)", a.(*wire.Array).String())
}

func TestBatch(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg, MaxBatch: 4})
	c := dial(t, addr, zmqclient.Options{Encoding: wire.EncodingMsgpackNumpy})
	obs := droidObs(t).Batch(2)
	// Make sample 1 differ: state 1.5.
	st := obs.State["joint_position"]
	f, _ := st.Float32s()
	for i := 7; i < 14; i++ {
		f[i] = 1.5
	}
	obs.State["joint_position"] = wire.Float32Array(st.Shape, f)
	acts, err := c.GetAction(context.Background(), obs, zmqclient.Nested, nil)
	require.NoError(t, err)
	a := acts["joint_position"]
	assert.Equal(t, "float32 (2, 40, 7)", a.String())
	v, _ := a.Float32s()
	assert.Equal(t, float32(0.5+11.0/256), v[0])
	assert.Equal(t, float32(1.5+11.0/256), v[40*7], "sample 1 is its own prediction")
	assert.Equal(t, "float32 (2, 40, 9)", acts["eef_9d"].String())

	_, err = c.GetAction(context.Background(), droidObs(t).Batch(5), zmqclient.Nested, nil)
	var se *zmqclient.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "video.exterior_image_1_left: batch of 5 observations, at most 4 (zmq.max_batch)", se.Message)
}

// TestErrors sends bad requests on one connection: each gets a precise
// {"error"} naming the field, and the connection goes on serving.
func TestErrors(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg})
	c := dial(t, addr, zmqclient.Options{})
	ctx := context.Background()
	obsWith := func(mut func(o *zmqclient.Observation)) any {
		o := droidObs(t)
		mut(o)
		return wire.NewMap(2).Set("observation", o.Value(zmqclient.Nested)).Set("options", nil)
	}
	nestedWith := func(mut func(m *wire.Map)) any {
		m := droidObs(t).Value(zmqclient.Nested).(*wire.Map)
		mut(m)
		return wire.NewMap(1).Set("observation", m)
	}
	sub := func(m *wire.Map, k string) *wire.Map { v, _ := m.Get(k); return v.(*wire.Map) }
	del := func(m *wire.Map, k string) {
		for i, x := range m.Keys {
			if x.Name == k {
				m.Keys = append(m.Keys[:i], m.Keys[i+1:]...)
				m.Values = append(m.Values[:i], m.Values[i+1:]...)
				return
			}
		}
	}
	for _, tc := range []struct {
		name       string
		data       any
		want       string
		field      string
		code       string
		wantPrefix bool
	}{
		{name: "float32 video", data: obsWith(func(o *zmqclient.Observation) {
			o.Video["wrist_image_left"] = wire.Float32Array([]int{1, 1, 180, 320, 3}, make([]float32, 180*320*3))
		}), want: "video.wrist_image_left: expected uint8 (B, 2, H, W, 3), got float32 (1, 1, 180, 320, 3)", field: "video.wrist_image_left"},
		{name: "rank 4 video", data: obsWith(func(o *zmqclient.Observation) {
			o.Video["wrist_image_left"] = wire.Uint8Array([]int{2, 180, 320, 3}, make([]byte, 2*180*320*3))
		}), want: "video.wrist_image_left: expected uint8 (B, 2, H, W, 3), got uint8 (2, 180, 320, 3)"},
		{name: "T=1", data: obsWith(func(o *zmqclient.Observation) {
			o.Video["exterior_image_1_left"] = wire.Uint8Array([]int{1, 1, 180, 320, 3}, make([]byte, 180*320*3))
		}), want: "video.exterior_image_1_left: expected uint8 (B, 2, H, W, 3), got uint8 (1, 1, 180, 320, 3)"},
		{name: "missing camera", data: obsWith(func(o *zmqclient.Observation) { delete(o.Video, "wrist_image_left") }),
			want: "video.wrist_image_left: missing camera (want exterior_image_1_left, wrist_image_left)", field: "video.wrist_image_left"},
		{name: "unknown camera", data: obsWith(func(o *zmqclient.Observation) { o.Video["top"] = o.Video["wrist_image_left"] }),
			want: "video.top: unknown camera (want exterior_image_1_left, wrist_image_left)"},
		{name: "missing group", data: obsWith(func(o *zmqclient.Observation) { delete(o.State, "joint_position") }),
			want: "state.joint_position: missing state group (want eef_9d, gripper_position, joint_position)"},
		{name: "float64 state", data: obsWith(func(o *zmqclient.Observation) {
			o.State["eef_9d"] = &wire.Array{DType: "<f8", Shape: []int{1, 1, 9}, Data: make([]byte, 72)}
		}), want: "state.eef_9d: expected float32 (B, 1, 9), got float64 (1, 1, 9)"},
		{name: "wrong width", data: obsWith(func(o *zmqclient.Observation) {
			o.State["eef_9d"] = wire.Float32Array([]int{1, 1, 8}, make([]float32, 8))
		}), want: "state.eef_9d: expected float32 (B, 1, 9), got float32 (1, 1, 8)"},
		{name: "NaN state", data: obsWith(func(o *zmqclient.Observation) {
			v := make([]float32, 7)
			v[3] = float32(math.NaN())
			o.State["joint_position"] = wire.Float32Array([]int{1, 1, 7}, v)
		}), want: "state.joint_position[0, 0, 3]: NaN is not finite", field: "state.joint_position"},
		{name: "batch mismatch", data: obsWith(func(o *zmqclient.Observation) {
			o.State["eef_9d"] = wire.Float32Array([]int{2, 1, 9}, make([]float32, 18))
		}), want: "state.eef_9d: batch size 2, but video.exterior_image_1_left has 1"},
		{name: "missing language", data: nestedWith(func(m *wire.Map) { del(m, "language") }),
			want: "language.annotation.language.language_instruction: missing (want [[str]] of shape (B, 1))"},
		{name: "language not nested", data: nestedWith(func(m *wire.Map) {
			sub(m, "language").Values[0] = []any{"pick"}
		}), want: "language.annotation.language.language_instruction[0]: expected [str] (one instruction per observation), got str"},
		{name: "unknown observation key", data: nestedWith(func(m *wire.Map) { m.Set("depth", nil) }),
			want: "observation.depth: unknown key (want video, state, language)"},
		{name: "video not an array", data: nestedWith(func(m *wire.Map) { sub(m, "video").Values[0] = []any{int64(1)} }),
			want: "video.exterior_image_1_left: expected uint8 (B, 2, H, W, 3) ndarray, got array", code: service.CodeSchema},
		{name: "bad npy header", data: nestedWith(func(m *wire.Map) {
			sub(m, "video").Values[0] = wire.NewMap(2).Set("__ndarray_class__", true).Set("as_npy", []byte("\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}"))
		}), want: `data.observation.video.exterior_image_1_left: ndarray: .npy: header: missing key "fortran_order"`},
		{name: "object array", data: nestedWith(func(m *wire.Map) {
			sub(m, "video").Values[0] = wire.NewMap(5).SetBin("nd", true).SetBin("type", "|O").SetBin("kind", []byte("O")).SetBin("shape", []any{int64(1)}).SetBin("data", []byte("x"))
		}), want: `data.observation.video.exterior_image_1_left: ndarray: dtype "|O" is not accepted (want a numeric or bool dtype such as <f4, |u1)`},
		{name: "unknown embodiment", data: wire.NewMap(2).Set("observation", droidObs(t).Value(zmqclient.Nested)).Set("options", wire.NewMap(1).Set("embodiment", "r2d2")),
			want: `options.embodiment: "r2d2" is not served`, field: "options.embodiment", wantPrefix: true},
		{name: "data not a map", data: "hello", want: "data: expected a map {observation, options}, got str"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Call(ctx, "get_action", tc.data)
			var se *zmqclient.ServerError
			require.ErrorAs(t, err, &se)
			if tc.wantPrefix {
				assert.True(t, strings.HasPrefix(se.Message, tc.want), se.Message)
			} else {
				assert.Equal(t, tc.want, se.Message)
			}
			if tc.field != "" {
				assert.Equal(t, tc.field, se.Field)
			}
			if tc.code != "" {
				assert.Equal(t, tc.code, se.Code)
			}
			assert.NotEmpty(t, se.RequestID)
			st, err := c.Ping(ctx)
			require.NoError(t, err, "the connection goes on after the error")
			assert.Equal(t, "ok", st)
		})
	}

	// Bytes that are not a request.
	for name, payload := range map[string][]byte{
		"garbage":        []byte("\xc1\xc1 not msgpack"),
		"truncated":      {0x82, 0xa8, 'e', 'n', 'd', 'p', 'o', 'i', 'n', 't', 0xa4, 'p'},
		"not a map":      {0x93, 1, 2, 3},
		"huge array":     {0xdd, 0xff, 0xff, 0xff, 0xff},
		"endpoint int":   {0x81, 0xa8, 'e', 'n', 'd', 'p', 'o', 'i', 'n', 't', 0x05},
		"empty":          {},
		"extension type": {0xd4, 0x01, 0x00},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := c.CallRaw(ctx, payload)
			require.NoError(t, err)
			_, err = zmqclient.DecodeReply(out)
			var se *zmqclient.ServerError
			require.ErrorAs(t, err, &se)
			assert.True(t, strings.HasPrefix(se.Message, "request: not a valid Isaac-GR00T policy request: "), se.Message)
			assert.Equal(t, service.CodeSchema, se.Code)
			_, err = c.Ping(ctx)
			require.NoError(t, err)
		})
	}
}

func TestGatewayErrorsInProtocolTerms(t *testing.T) {
	for _, tc := range []struct {
		field, msg string
		b          int
		wantField  string
		wantMsg    string
	}{
		{"images.wrist_image_left[1]", "images.wrist_image_left[1]: frame 100x100: aspect ratio not accepted", 0,
			"video.wrist_image_left[0, 1]", "video.wrist_image_left[0, 1]: frame 100x100: aspect ratio not accepted"},
		{"state.eef_9d[2]", "state.eef_9d[2]: out of bounds", 1, "state.eef_9d[1, 0, 2]", "state.eef_9d[1, 0, 2]: out of bounds"},
		{"embodiment", `embodiment: "x" is not served`, 0, "options.embodiment", `options.embodiment: "x" is not served`},
		{"language.k[1]", "language.k[1]: 80 tokens, over L_max 51", 1, "language.k[1]", "language.k[1]: 80 tokens, over L_max 51"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			err := protoError(&service.HandlerError{Status: 400, Code: service.CodeInvalid, Field: tc.field, Err: errors.New(tc.msg)}, tc.b, true)
			var he *service.HandlerError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, tc.wantField, he.Field)
			assert.Equal(t, tc.wantMsg, he.Err.Error())
		})
	}

	fg := &servicetest.Gateway{Fail: &service.HandlerError{Status: 400, Code: service.CodeInvalid, Field: "images.wrist_image_left[1]",
		Err: errors.New("images.wrist_image_left[1]: 100x100 frames do not land on the 16x28 patch grid")}}
	_, addr := startServer(t, Options{Gateway: fg})
	c := dial(t, addr, zmqclient.Options{})
	_, err := c.GetAction(context.Background(), droidObs(t), zmqclient.Nested, nil)
	var se *zmqclient.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "video.wrist_image_left[0, 1]", se.Field)
	assert.Equal(t, "video.wrist_image_left[0, 1]: 100x100 frames do not land on the 16x28 patch grid", se.Message)
}

func TestToken(t *testing.T) {
	_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}, Token: "s3cret"})
	for _, tok := range []string{"", "wrong", "s3cre"} {
		c := dial(t, addr, zmqclient.Options{Token: tok})
		_, err := c.Ping(context.Background())
		var se *zmqclient.ServerError
		require.ErrorAs(t, err, &se, tok)
		assert.Equal(t, Unauthorized, se.Message)
		assert.Equal(t, service.CodeUnauthorized, se.Code)
	}
	c := dial(t, addr, zmqclient.Options{Token: "s3cret"})
	st, err := c.Ping(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "ok", st)
}

func TestOversizedMessage(t *testing.T) {
	_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}, Limits: frontend.Limits{MaxMessageBytes: 100 << 10}})
	c := dial(t, addr, zmqclient.Options{})
	_, err := c.GetAction(context.Background(), droidObs(t), zmqclient.Nested, nil) // ~700 KB
	var se *zmqclient.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodeTooLarge, se.Code)
	assert.Contains(t, se.Message, "exceeds the maximum message size of 102400 bytes (zmq.max_message_bytes)")
	st, err := c.Ping(context.Background())
	require.NoError(t, err, "the connection goes on after an oversized message")
	assert.Equal(t, "ok", st)
}

// TestConcurrentClients: many connections are served at once (the
// predictions overlap), each gets its own answer.
func TestConcurrentClients(t *testing.T) {
	fg := &servicetest.Gateway{Delay: 100 * time.Millisecond}
	_, addr := startServer(t, Options{Gateway: fg})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := zmqclient.Dial(context.Background(), addr, zmqclient.Options{})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			obs := droidObs(t)
			v := make([]float32, 7)
			for k := range v {
				v[k] = float32(i)
			}
			obs.State["joint_position"] = wire.Float32Array([]int{1, 1, 7}, v)
			acts, err := c.GetAction(context.Background(), obs, zmqclient.Nested, nil)
			if err != nil {
				errs <- err
				return
			}
			f, _ := acts["joint_position"].Float32s()
			if want := float32(float64(i) + 11.0/256); f[0] != want {
				errs <- fmt.Errorf("client %d got %v, want %v", i, f[0], want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Greater(t, fg.Peak.Load(), int32(1), "predictions overlapped")
}

func TestIdleTimeoutAndDisconnect(t *testing.T) {
	fg := &servicetest.Gateway{Delay: 5 * time.Second}
	_, addr := startServer(t, Options{Gateway: fg, Limits: frontend.Limits{IdleTimeout: 100 * time.Millisecond}})
	// A client that gives up mid-request cancels its prediction.
	c := dial(t, addr, zmqclient.Options{Timeout: 200 * time.Millisecond})
	_, err := c.GetAction(context.Background(), droidObs(t), zmqclient.Nested, nil)
	require.Error(t, err)
	assert.Eventually(t, func() bool { return fg.Canceled.Load() == 1 }, 5*time.Second, 5*time.Millisecond, "prediction cancelled")

	// An idle connection is closed; the client reconnects on its next call.
	fg.Delay = 0
	c2 := dial(t, addr, zmqclient.Options{})
	_, err = c2.Ping(context.Background())
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	_, err = c2.Ping(context.Background())
	require.Error(t, err, "the idle connection was closed")
	st, err := c2.Ping(context.Background())
	require.NoError(t, err, "reconnected")
	assert.Equal(t, "ok", st)
}

// TestHeartbeats: ZMTP PING heartbeats (libzmq's ZMQ_HEARTBEAT_IVL)
// between requests are answered and held to idle_timeout, not
// read_timeout (they used to end the idle wait and let read_timeout close
// the connection), and do not keep it open past idle_timeout; during a
// request they are answered too.
func TestHeartbeats(t *testing.T) {
	ping := []byte{0x04, 7, 4, 'P', 'I', 'N', 'G', 0, 10} // command PING, TTL 1 s, no context
	heartbeat := func(t *testing.T, addr string, d time.Duration) (*zmtp.Conn, error) {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		zc, err := zmtp.Handshake(nc, zmtp.Options{SocketType: "REQ", MaxMessage: 1 << 20})
		require.NoError(t, err)
		pong := make([]byte, 7)
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			nc.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
			if _, err := nc.Write(ping); err != nil {
				return nil, err
			}
			if _, err := io.ReadFull(nc, pong); err != nil {
				return nil, err
			}
			require.Equal(t, []byte{0x04, 5, 4, 'P', 'O', 'N', 'G'}, pong)
		}
		return zc, nil
	}
	t.Run("held to idle_timeout", func(t *testing.T) {
		_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}, Limits: frontend.Limits{ReadTimeout: 150 * time.Millisecond, IdleTimeout: time.Minute}})
		zc, err := heartbeat(t, addr, 600*time.Millisecond)
		require.NoError(t, err, "an idle, heartbeating connection was closed before idle_timeout")
		req, err := wire.Marshal(wire.NewMap(1).Set("endpoint", "ping"), wire.EncodingNPY)
		require.NoError(t, err)
		require.NoError(t, zc.WriteMessage(nil, req))
		_, err = zc.ReadMessage()
		require.NoError(t, err)
	})
	t.Run("during a request", func(t *testing.T) {
		// PINGs while the request runs are answered and the disconnect
		// watch goes on: a peer that leaves afterwards still cancels its
		// prediction (the watch used to end at the first byte).
		fg := &servicetest.Gateway{Delay: 10 * time.Second}
		_, addr := startServer(t, Options{Gateway: fg})
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer nc.Close()
		zc, err := zmtp.Handshake(nc, zmtp.Options{SocketType: "REQ", MaxMessage: 1 << 20})
		require.NoError(t, err)
		data := wire.NewMap(2).Set("observation", droidObs(t).Value(zmqclient.Nested)).Set("options", nil)
		req, err := wire.Marshal(wire.NewMap(2).Set("endpoint", "get_action").Set("data", data), wire.EncodingNPY)
		require.NoError(t, err)
		require.NoError(t, zc.WriteMessage(nil, req))
		pong := make([]byte, 7)
		for range 3 {
			time.Sleep(50 * time.Millisecond)
			nc.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
			_, err := nc.Write(ping)
			require.NoError(t, err)
			_, err = io.ReadFull(nc, pong)
			require.NoError(t, err, "PONG during the request")
		}
		require.Zero(t, fg.Canceled.Load())
		require.NoError(t, nc.Close())
		assert.Eventually(t, func() bool { return fg.Canceled.Load() == 1 }, 5*time.Second, 5*time.Millisecond, "prediction cancelled")
	})
	t.Run("closed at idle_timeout", func(t *testing.T) {
		_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}, Limits: frontend.Limits{IdleTimeout: 200 * time.Millisecond}})
		_, err := heartbeat(t, addr, 5*time.Second)
		require.Error(t, err, "heartbeats kept an idle connection open past idle_timeout")
	})
}

// TestShutdownDrains: Shutdown lets the request in flight answer, closes
// idle connections, and refuses new ones.
func TestShutdownDrains(t *testing.T) {
	fg := &servicetest.Gateway{Delay: 300 * time.Millisecond}
	s, err := New(Options{Gateway: fg, Logger: quiet})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go s.Serve(ln)
	busy := dial(t, ln.Addr().String(), zmqclient.Options{})
	idle := dial(t, ln.Addr().String(), zmqclient.Options{})
	_, err = idle.Ping(context.Background())
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() {
		_, err := busy.GetAction(context.Background(), droidObs(t), zmqclient.Nested, nil)
		res <- err
	}()
	require.Eventually(t, func() bool { return fg.Inflight.Load() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, <-res, "the in-flight request was answered")
	_, err = idle.Ping(context.Background())
	assert.Error(t, err, "idle connection closed")
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	assert.Error(t, err, "listener closed")
}

// FuzzHandle feeds arbitrary request payloads to the request handler (the
// msgpack decoder, the array codecs and the observation mapper behind
// it): it never panics and always answers with decodable msgpack.
func FuzzHandle(f *testing.F) {
	s, err := New(Options{Gateway: &servicetest.Gateway{}, Logger: quiet, MaxBatch: 2})
	if err != nil {
		f.Fatal(err)
	}
	small := func() *zmqclient.Observation {
		o := &zmqclient.Observation{Video: map[string]*wire.Array{}, State: map[string]*wire.Array{}, LanguageKey: "task", Language: []string{"go"}}
		o.Video["front"] = wire.Uint8Array([]int{1, 1, 2, 2, 3}, make([]byte, 12))
		o.State["joints"] = wire.Float32Array([]int{1, 1, 2}, []float32{1, 2})
		return o
	}
	for _, enc := range []wire.Encoding{wire.EncodingNPY, wire.EncodingMsgpackNumpy} {
		for _, form := range []zmqclient.Form{zmqclient.Nested, zmqclient.Flat} {
			data := wire.NewMap(2).Set("observation", small().Value(form)).Set("options", wire.NewMap(1).Set("embodiment", "one_cam"))
			b, _ := wire.Marshal(wire.NewMap(2).Set("endpoint", "get_action").Set("data", data), enc)
			f.Add(b)
		}
	}
	b, _ := wire.Marshal(wire.NewMap(1).Set("endpoint", "get_modality_config"), wire.EncodingNPY)
	f.Add(b)
	f.Fuzz(func(t *testing.T, payload []byte) {
		out := s.handle(context.Background(), payload, "fuzz", time.Now())
		if _, err := wire.Decode(out, wire.Limits{}); err != nil {
			t.Fatalf("reply does not decode: %v", err)
		}
	})
}

// TestKeyring: with auth.api_keys_file's keyring a request needs one of
// its keys (or zmq.api_token when both are set) as api_token; a refusal
// is upstream's {"error": "Unauthorized: Invalid API token"} and wraps
// service.ErrUnauthorized; a rotated file takes effect on Reload.
func TestKeyring(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte("# test\n"+secure.Hash("key-1")+" one\n"), 0o600))
	keys, err := secure.LoadKeyring(path)
	require.NoError(t, err)
	_, addr := startServer(t, Options{Gateway: &servicetest.Gateway{}, Token: "s3cret", Keys: keys})
	refused := func(tok string) {
		t.Helper()
		c := dial(t, addr, zmqclient.Options{Token: tok})
		_, err := c.GetAction(context.Background(), droidObs(t), zmqclient.Nested, nil)
		var se *zmqclient.ServerError
		require.ErrorAs(t, err, &se, tok)
		assert.Equal(t, Unauthorized, se.Message)
		assert.Equal(t, service.CodeUnauthorized, se.Code)
		assert.Equal(t, "api_token", se.Field)
	}
	accepted := func(tok string) {
		t.Helper()
		c := dial(t, addr, zmqclient.Options{Token: tok})
		_, err := c.GetAction(context.Background(), droidObs(t), zmqclient.Nested, nil)
		require.NoError(t, err, tok)
	}
	for _, tok := range []string{"", "wrong", "key-2", secure.Hash("key-1")} {
		refused(tok)
	}
	accepted("key-1")
	accepted("s3cret")

	require.NoError(t, os.WriteFile(path, []byte(secure.Hash("key-2")+"\n"), 0o600))
	_, err = keys.Reload()
	require.NoError(t, err)
	refused("key-1")
	accepted("key-2")
	assert.ErrorIs(t, errUnauthorized, service.ErrUnauthorized)
}

// TestGetActionRTCOptions: options carry real-time chunking as upstream's
// PolicyClient.get_action(observation, options) would: the RTC keys and the
// previous chunk (a numpy array) reach the gateway's request; a wrong type
// names the option; a batch with RTC is refused; a gateway error about the
// chunk is restated under options.
func TestGetActionRTCOptions(t *testing.T) {
	fg := &servicetest.Gateway{}
	_, addr := startServer(t, Options{Gateway: fg})
	c := dial(t, addr, zmqclient.Options{})
	prev := make([]float32, 40*132)
	for i := range prev {
		prev[i] = float32(i) / 1000
	}
	opts := func() map[string]any {
		return map[string]any{"action_horizon": int64(40), "rtc_overlap_steps": int64(12), "rtc_frozen_steps": int64(4),
			"rtc_ramp_rate": 6.0, "rtc_prev_action": wire.Float32Array([]int{40, 132}, prev)}
	}
	_, err := c.GetAction(context.Background(), droidObs(t), zmqclient.Nested, opts())
	require.NoError(t, err)
	reqs := fg.Requests()
	r := reqs[len(reqs)-1]
	require.NotNil(t, r.Options)
	assert.Equal(t, []int{40, 12, 4}, []int{*r.Options.Horizon, *r.Options.Overlap, *r.Options.Frozen})
	assert.Equal(t, 6.0, *r.Options.RampRate)
	assert.Equal(t, 40, r.RTCPrevRows)
	assert.Equal(t, prev, r.RTCPrev)

	for _, tc := range []struct {
		name, key string
		v         any
		field     string
	}{
		{"float steps", "rtc_overlap_steps", 12.5, "options.rtc_overlap_steps"},
		{"string rate", "rtc_ramp_rate", "fast", "options.rtc_ramp_rate"},
		{"prev a list", "rtc_prev_action", []any{1.0}, "options.rtc_prev_action"},
		{"prev 1-D", "rtc_prev_action", wire.Float32Array([]int{132}, prev[:132]), "options.rtc_prev_action"},
		{"prev NaN", "rtc_prev_action", wire.Float32Array([]int{1, 132}, append([]float32{float32(math.NaN())}, prev[1:132]...)), "options.rtc_prev_action"},
		{"unknown option", "rtc_overlap_step", int64(12), `options: unknown key "rtc_overlap_step"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			o[tc.key] = tc.v
			_, err := c.GetAction(context.Background(), droidObs(t), zmqclient.Nested, o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	assert.Equal(t, "options.rtc_prev_action", protoError(service.Invalid("rtc_prev_action", "rtc_prev_action: x"), 0, false).(*service.HandlerError).Field)
}
