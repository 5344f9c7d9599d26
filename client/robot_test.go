package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/wire"
	"github.com/gr00tgw/gr00tgw/wire/zmtp"
)

// TestRows: (1, H, D) and (H, D) float arrays become H rows; other shapes
// and arrays whose data does not fill the shape are errors naming them.
func TestRows(t *testing.T) {
	for _, c := range []struct {
		name string
		a    *wire.Array
		want [][]float64
		err  string
	}{
		{"batch of one", wire.Float32Array([]int{1, 2, 2}, []float32{1, 2, 3, 4}), [][]float64{{1, 2}, {3, 4}}, ""},
		{"plain", wire.Float32Array([]int{3, 1}, []float32{1, 2, 3}), [][]float64{{1}, {2}, {3}}, ""},
		{"batch of two", wire.Float32Array([]int{2, 1, 1}, []float32{1, 2}), nil, "action of shape (2, 1, 1), want (horizon, dim)"},
		{"vector", wire.Float32Array([]int{2}, []float32{1, 2}), nil, "action of shape (2,), want (horizon, dim)"},
		{"data short of the shape", &wire.Array{DType: "<f4", Shape: []int{2, 2}, Data: make([]byte, 12)}, nil, "action array float32 (2, 2) is not a float array"},
	} {
		got, err := rows(c.a)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}

// TestWithSeedKeepsTheRest: the robot protocols' demo request is the
// demo's with seed in place of noise.
func TestWithSeedKeepsTheRest(t *testing.T) {
	got, err := WithSeed(json.RawMessage(`{"images":{"c":["x"]},"noise":[[1]],"embodiment":"e"}`), RobotDemoSeed)
	require.NoError(t, err)
	assert.JSONEq(t, `{"images":{"c":["x"]},"seed":42,"embodiment":"e"}`, string(got))
}

// pngRequest is a /predict body with one 64×64 PNG frame, a state group,
// an instruction and seed.
func pngRequest(t *testing.T, seed int) json.RawMessage {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return json.RawMessage(fmt.Sprintf(`{"images":{"cam":["%s"]},"state":{"arm":[1,2]},"instruction":"x","seed":%d}`,
		base64.StdEncoding.EncodeToString(b.Bytes()), seed))
}

// actionsOf is the fake robot servers' answer to seed: arm (1, 2, 1) =
// [[seed], [-seed]].
func actionsOf(seed int64) *wire.Array {
	return wire.Float32Array([]int{1, 2, 1}, []float32{float32(seed), -float32(seed)})
}

// fakeZMQ serves get_modality_config and get_action over ZMTP as
// gr00tgw's ZeroMQ endpoint does, one goroutine per connection.
func fakeZMQ(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				zc, err := zmtp.Handshake(nc, zmtp.Options{SocketType: "ROUTER", MaxMessage: 1 << 20})
				if err != nil {
					return
				}
				for {
					frames, err := zc.ReadMessage()
					if err != nil {
						return
					}
					v, err := wire.Decode(frames[len(frames)-1], wire.Limits{})
					if err != nil {
						return
					}
					v, _, _ = wire.Resolve(v, "request")
					req := v.(*wire.Map)
					ep, _ := req.Get("endpoint")
					var reply any
					switch ep {
					case "get_modality_config":
						reply = wire.NewMap(1).Set("language", wire.NewMap(1).Set("as_json", wire.NewMap(1).Set("modality_keys", []any{"lang"})))
					case "get_action":
						data, _ := req.Get("data")
						opts, _ := data.(*wire.Map).Get("options")
						seed, _ := opts.(*wire.Map).Get("seed")
						reply = []any{wire.NewMap(1).Set("arm", actionsOf(seed.(int64))), wire.NewMap(0)}
					}
					b, err := wire.Marshal(reply, wire.EncodingNPY)
					if err != nil || zc.WriteMessage(nil, b) != nil {
						return
					}
				}
			}()
		}
	}()
	return "tcp://" + ln.Addr().String()
}

// fakeOpenPI serves openpi's websocket protocol: the metadata frame, then
// one reply per observation.
func fakeOpenPI(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow() //nolint:errcheck
		ws.SetReadLimit(1 << 20)
		meta, _ := wire.Marshal(wire.NewMap(0), wire.EncodingOpenPI)
		if ws.Write(r.Context(), websocket.MessageBinary, meta) != nil {
			return
		}
		for {
			_, b, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			v, err := wire.Decode(b, wire.Limits{})
			if err != nil {
				return
			}
			v, _, _ = wire.Resolve(v, "observation")
			seed, _ := v.(*wire.Map).Get("seed")
			a := actionsOf(seed.(int64))
			out, _ := wire.Marshal(wire.NewMap(3).Set("actions", a).Set("action_groups", wire.NewMap(1).Set("arm", a)).
				Set("server_timing", wire.NewMap(1).Set("infer_ms", 1.5)), wire.EncodingOpenPI)
			if ws.Write(r.Context(), websocket.MessageBinary, out) != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws://" + strings.TrimPrefix(srv.URL, "http://")
}

// TestRobotProtocolsConcurrentPredict: zmq and openpi answer concurrent
// Predicts each with its own request's actions (run with -race: the
// language-key cache and the openpi connection are shared).
func TestRobotProtocolsConcurrentPredict(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct{ name, url string }{{"zmq", fakeZMQ(t)}, {"openpi", fakeOpenPI(t)}} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Dial(ctx, c.name, c.url, Options{Timeout: 30 * time.Second})
			require.NoError(t, err)
			defer p.Close()
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					pr, err := p.Predict(ctx, pngRequest(t, i+1))
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, map[string][][]float64{"arm": {{float64(i + 1)}, {-float64(i + 1)}}}, pr.Actions, "request %d", i)
				}()
			}
			wg.Wait()
		})
	}
}
