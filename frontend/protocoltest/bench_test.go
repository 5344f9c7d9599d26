package protocoltest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/gr00tgw/gr00tgw/client/oipclient"
	"github.com/gr00tgw/gr00tgw/client/openpiclient"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/client/zmqclient"
	"github.com/gr00tgw/gr00tgw/frontend/oip"
	"github.com/gr00tgw/gr00tgw/wire"
)

// BenchmarkDROIDRequest serves the DROID demo over each protocol and
// reports, besides the client's wall time: host-ms/op, the server span of
// each request (from the request in memory to the reply ready) minus its
// queue and device spans — everything the host does for one request
// (parse, frame decode or raw copy, plugin pre/post, encode, reply),
// measured the same way for every protocol; decode-ms/op, the gateway's
// decode stage alone (validation and PNG decoding, or the raw frames'
// copy-free hand-over).
//
//	go test -run '^$' -bench BenchmarkDROIDRequest -benchtime 30x ./frontend/protocoltest
func BenchmarkDROIDRequest(b *testing.B) {
	e := setup(b)
	var m map[string]any
	if err := json.Unmarshal(e.droid, &m); err != nil {
		b.Fatal(err)
	}
	m["seed"] = 7
	httpBody, _ := json.Marshal(m)
	o, err := rawobs.FromPredictJSON(e.droid)
	if err != nil {
		b.Fatal(err)
	}
	zobs, err := zmqclient.FromRaw(o, "")
	if err != nil {
		b.Fatal(err)
	}
	pobs, err := openpiclient.FromRaw(o, true)
	if err != nil {
		b.Fatal(err)
	}
	pobs.Set("seed", int64(7))
	seed7 := uint64(7)
	ctx := context.Background()

	b.Run("http-png", func(b *testing.B) {
		run(b, e, "POST /predict", func() error {
			req, _ := http.NewRequest("POST", "/predict", bytes.NewReader(httpBody))
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.srv.App().Test(req, -1)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			return err
		})
	})
	for _, bin := range []bool{false, true} {
		name := "oip-raw-json"
		if bin {
			name = "oip-raw-binary"
		}
		body, hl, err := oipclient.Request(o, oipclient.Options{Seed: &seed7, Binary: bin})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			run(b, e, "POST /v2/models/:model/infer", func() error {
				req, _ := http.NewRequest("POST", "/v2/models/"+droidTag+"/infer", bytes.NewReader(body))
				if hl >= 0 {
					req.Header.Set(oip.HeaderContentLength, strconv.Itoa(hl))
				}
				resp, err := e.srv.App().Test(req, -1)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				return err
			})
		})
	}
	for _, enc := range []wire.Encoding{wire.EncodingNPY, wire.EncodingMsgpackNumpy} {
		b.Run("zmq-raw-"+enc.String(), func(b *testing.B) {
			c, err := zmqclient.Dial(ctx, e.zmqAddr, zmqclient.Options{Token: zmqToken, Encoding: enc, Timeout: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			run(b, e, "zmq get_action", func() error {
				_, err := c.GetAction(ctx, zobs, zmqclient.Nested, map[string]any{"seed": int64(7)})
				return err
			})
		})
	}
	b.Run("openpi-raw", func(b *testing.B) {
		c, err := openpiclient.Dial(ctx, e.openpiAddr, openpiclient.Options{APIKey: openpiKey})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		run(b, e, "openpi infer", func() error {
			_, err := c.Infer(ctx, pobs)
			return err
		})
	})
}

// run times fn b.N times and reports host-ms/op from the spans named root.
func run(b *testing.B, e *env, root string, fn func() error) {
	if err := fn(); err != nil { // warm
		b.Fatal(err)
	}
	since := time.Now()
	b.ResetTimer()
	for range b.N {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	byTrace := map[trace.TraceID][]sdktrace.ReadOnlySpan{}
	for _, s := range e.rec.Ended() {
		if s.StartTime().After(since) {
			byTrace[s.SpanContext().TraceID()] = append(byTrace[s.SpanContext().TraceID()], s)
		}
	}
	var host, decode time.Duration
	n := 0
	for _, spans := range byTrace {
		var total, wait, dec time.Duration
		found := false
		for _, s := range spans {
			d := s.EndTime().Sub(s.StartTime())
			switch s.Name() {
			case root:
				total, found = d, true
			case "queue", "device":
				wait += d
			case "decode":
				dec += d
			}
		}
		if found {
			host += total - wait
			decode += dec
			n++
		}
	}
	if n > 0 {
		b.ReportMetric(float64(host.Microseconds())/1e3/float64(n), "host-ms/op")
		b.ReportMetric(float64(decode.Microseconds())/1e3/float64(n), "decode-ms/op")
	}
}
