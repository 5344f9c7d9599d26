package httpfront

import (
	"encoding/json"
	"fmt"
	"github.com/gr00tgw/gr00tgw/service"
	"sort"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gr00tgw/gr00tgw/config"
)

// BenchmarkPredictOverhead measures the gateway's own cost per /predict on
// the DROID-sized request (4 × 320×180 PNG, base64, ≈ 140 KB; seeded noise):
// routing, request id, server span, strict JSON parse, validation, base64,
// the stage spans and metrics, the device lock, response encoding. The
// fakes cost microseconds (the encoder reads PNG headers only, the backend
// returns at once), so this is everything but the model pipeline. It
// drives the fasthttp handler directly: no sockets, no client.
//
//	go test -run '^$' -bench PredictOverhead -benchtime 200x ./frontend/http
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

// BenchmarkPredictOverheadEmbodiments is BenchmarkPredictOverhead with 1,
// 2 and 8 embodiments served, interleaved in rounds of 50 requests (this
// machine's speed drifts within a minute, so sequential sub-benchmarks
// would mislead). Each request names its embodiment by X-Embodiment, in
// turn across the served set. It reports each set's median per request
// and the ratios to one embodiment.
//
//	go test -run '^$' -bench PredictOverheadEmbodiments -benchtime 2000x ./frontend/http
func BenchmarkPredictOverheadEmbodiments(b *testing.B) {
	sizes := []int{1, 2, 8}
	type server struct {
		h    fasthttp.RequestHandler
		tags []string
		durs []time.Duration
	}
	m := demoRequest(b)
	delete(m, "noise")
	delete(m, "embodiment")
	body, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	var servers []*server
	for _, n := range sizes {
		var tags []string
		f := newFixture(b, true, func(c *config.Config, o *fixtureOptions, f *fixture) {
			tags = append(tags, droidInfo.Name)
			for i := 1; i < n; i++ {
				info := droidInfo
				info.Name, info.ID, info.Plugin = fmt.Sprintf("test_robot_%d", i), i, fmt.Sprintf("robot%d", i)
				demo := fakeDemo(b, 0)
				demo.Request, _ = withEmbodiment(demo.Request, info.Name)
				f.catalog.put(info.Name, &service.Binding{Embodiment: &fakeEmbodiment{info: info}, Encoder: f.enc, Demo: demo, SHA256: info.Name})
				tags = append(tags, info.Name)
			}
		})
		if got := len(f.core.Served()); got != n {
			b.Fatalf("%d embodiments served, want %d", got, n)
		}
		servers = append(servers, &server{h: f.srv.App().Handler(), tags: tags})
	}
	var ctx fasthttp.RequestCtx
	run := func(s *server, i int) {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/predict")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.Header.Set(service.EmbodimentHeader, s.tags[i%len(s.tags)])
		ctx.Request.SetBody(body)
		t0 := time.Now()
		s.h(&ctx)
		s.durs = append(s.durs, time.Since(t0))
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	const round = 50
	for i := 0; i < b.N; i += round {
		for _, s := range servers {
			for k := 0; k < round && i+k < b.N; k++ {
				run(s, i+k)
			}
		}
	}
	b.StopTimer()
	med := make([]float64, len(servers))
	for i, s := range servers {
		sort.Slice(s.durs, func(a, c int) bool { return s.durs[a] < s.durs[c] })
		med[i] = float64(s.durs[len(s.durs)/2].Nanoseconds()) / 1e6
		b.ReportMetric(med[i], fmt.Sprintf("p50-ms-%d", sizes[i]))
	}
	for i := 1; i < len(servers); i++ {
		b.ReportMetric(med[i]/med[0], fmt.Sprintf("ratio-%d/1", sizes[i]))
	}
}
