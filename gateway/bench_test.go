package gateway

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkPredictOverhead measures the gateway's own cost per /predict on
// the DROID-sized request (4 × 320×180 PNG, base64, ≈ 140 KB; seeded noise):
// routing, request id, server span, strict JSON parse, validation, base64,
// the stage spans and metrics, the device lock, response encoding. The
// fakes cost microseconds (the encoder reads PNG headers only, the backend
// returns at once), so this is everything but the model pipeline. It
// drives the fasthttp handler directly: no sockets, no client.
//
//	go test -run '^$' -bench PredictOverhead -benchtime 200x ./gateway/
func BenchmarkPredictOverhead(b *testing.B) {
	f := newFixture(b, true)
	m := demoRequest(b)
	delete(m, "noise")
	body, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	h := f.srv.App().Handler()
	var ctx fasthttp.RequestCtx
	durs := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/predict")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.SetBody(body)
		t0 := time.Now()
		h(&ctx)
		durs = append(durs, time.Since(t0))
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	b.StopTimer()
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(durs[len(durs)*9/10].Microseconds())/1e3, "p90-ms")
}
