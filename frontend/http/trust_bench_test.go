package httpfront

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gr00tgw/gr00tgw/config"
)

// BenchmarkPredictTrust is BenchmarkPredictOverhead (the gateway's own
// cost per DROID-sized /predict over the fakes) with the flight recorder
// and the safety gate off and on: the difference of the p50s is what
// recording (the copy and the enqueue; the write is off the request path)
// and the gate add to a request.
//
//	go test -run '^$' -bench PredictTrust -benchtime 300x ./frontend/http/
func BenchmarkPredictTrust(b *testing.B) {
	for _, tc := range []struct {
		name           string
		record, policy string
	}{{"off", "", "off"}, {"record", "rec", "off"}, {"gate", "", "reject"}, {"record+gate", "rec", "reject"}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, true, func(c *config.Config, _ *fixtureOptions, f *fixture) {
				if tc.record != "" {
					c.Record.Dir = filepath.Join(b.TempDir(), tc.record)
				}
				c.Safety.Policy = tc.policy
				f.binding.ActionLimits = nil // finiteness only: the fakes' chunk is not a robot's
			})
			b.Cleanup(func() { _ = f.shutdown(context.Background()) }) // drains the recorder before TempDir's cleanup
			m := demoRequest(b)
			delete(m, "noise")
			body, err := json.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			h := f.srv.App().Handler()
			var ctx fasthttp.RequestCtx
			durs := make([]time.Duration, 0, b.N)
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
			st := f.core.RecorderStats()
			b.ReportMetric(float64(st.Dropped), "dropped")
		})
	}
}
