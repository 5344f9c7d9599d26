package protocoltest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gr00tgw/gr00tgw/service"
)

// BenchmarkSessionRTC measures what sessions and real-time chunking add to
// a tiny-checkpoint DROID predict on the CPU backend, side by side in one
// run: each iteration serves the demo once plain (seed 7, no session) and
// once in a session with RTC (the session's previous chunk, O = 12, F =
// 4; lookup, inpainting, the chunk stored), both through Core.Predict, and
// reports each one's mean (plain-ms/op, rtc-ms/op) and the difference
// (rtc-overhead-%).
//
//	go test -run '^$' -bench BenchmarkSessionRTC -benchtime 40x ./frontend/protocoltest
func BenchmarkSessionRTC(b *testing.B) {
	e := setup(b)
	decode := func(mut func(m map[string]any)) *service.Request {
		var m map[string]any
		if err := json.Unmarshal(e.droid, &m); err != nil {
			b.Fatal(err)
		}
		m["seed"] = 7
		mut(m)
		body, _ := json.Marshal(m)
		r, err := service.DecodeJSON(body)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	ctx := context.Background()
	o := service.PredictOptions{Protocol: "bench"}
	warm := false // the session has a chunk
	predict := func(r *service.Request) time.Duration {
		rr := *r // Predict keeps no reference, but the request is not shared between calls
		t0 := time.Now()
		resp, err := e.core.Predict(ctx, &rr, o)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		if rr.Session != "" && warm && (resp.RTC == nil || resp.RTC.Skipped != "") {
			b.Fatalf("rtc not applied: %+v", resp.RTC)
		}
		return d
	}
	plain := decode(func(map[string]any) {})
	rtc := decode(func(m map[string]any) {
		m["session"] = "bench-rtc"
		m["options"] = map[string]any{"rtc_overlap_steps": 12, "rtc_frozen_steps": 4, "rtc_ramp_rate": 6.0}
	})
	predict(plain)
	predict(rtc) // stores the first chunk
	warm = true
	predict(rtc)
	var tp, tr time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 { // alternate the order so neither always runs second
			tp += predict(plain)
			tr += predict(rtc)
		} else {
			tr += predict(rtc)
			tp += predict(plain)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(tp.Microseconds())/1e3/n, "plain-ms/op")
	b.ReportMetric(float64(tr.Microseconds())/1e3/n, "rtc-ms/op")
	b.ReportMetric(100*(float64(tr)-float64(tp))/float64(tp), "rtc-overhead-%")
}
