package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// BenchmarkDROIDPrePost measures one request's pre+post:
//
//	wasm/<mode>/{pre,post,prepost}: through the production host (pool,
//	             per-call deadline, envelope both ways) on droid.wasm, with
//	             deadlines enforced by the stop flag (default) or by wazero's
//	             close-on-context-done
//	wasm/<mode>/prepost-into: prepost with PreInto/PostInto (the caller
//	             reuses its output structs)
//	wasm/<mode>/prepost-into-varying: the same with three instructions of
//	             different lengths in turn
//	native-abi:  the same bytes through pdk.Runner natively (envelope
//	             encode + guest decode/logic/encode + result decode)
//	native-logic: the plugin methods alone
//
// cpu-ns/op is process CPU time per op (the machine is shared; wall time is
// inflated by waiting for a core).
//
// go test ./embodiments/droid -run '^$' -bench DROIDPrePost -benchtime 2000x
func BenchmarkDROIDPrePost(b *testing.B) {
	c := loadCaseA(b)
	for _, mode := range []plugins.DeadlineMode{plugins.DeadlineStopFlag, plugins.DeadlineCloseOnContextDone} {
		p := openWasm(b, plugins.WithDeadlineMode(mode))
		if p.DeadlineMode() != mode {
			b.Fatalf("deadline mode %v, want %v", p.DeadlineMode(), mode)
		}
		pre, post := c.preInput(), c.postWasmInput()
		ctx := context.Background()
		b.Run("wasm/"+mode.String()+"/prepost-into", func(b *testing.B) {
			// PreInto/PostInto: the caller keeps its outputs (no per-request
			// allocation on the host side).
			var po plugins.PreOutput
			var qo plugins.PostOutput
			b.ReportAllocs()
			b.ResetTimer()
			c0 := benchcpu.Now()
			defer benchcpu.Report(b, c0)
			for range b.N {
				if err := p.PreInto(ctx, pre, &po); err != nil {
					b.Fatal(err)
				}
				if err := p.PostInto(ctx, post, &qo); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("wasm/"+mode.String()+"/prepost-into-varying", func(b *testing.B) {
			// prepost-into with instructions of different lengths in
			// turn, as real traffic sends (the host pads the attribute
			// section, so the guest still reuses the decoded layout).
			instrs := []string{pre.Instruction, "Pick up the red cup and place it on the plate", "Open the drawer"}
			var po plugins.PreOutput
			var qo plugins.PostOutput
			in := *pre
			b.ReportAllocs()
			b.ResetTimer()
			c0 := benchcpu.Now()
			defer benchcpu.Report(b, c0)
			for i := range b.N {
				in.Instruction = instrs[i%len(instrs)]
				if err := p.PreInto(ctx, &in, &po); err != nil {
					b.Fatal(err)
				}
				if err := p.PostInto(ctx, post, &qo); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, stage := range []string{"pre", "post", "prepost"} {
			b.Run("wasm/"+mode.String()+"/"+stage, func(b *testing.B) {
				b.ReportAllocs()
				b.ResetTimer()
				c0 := benchcpu.Now()
				defer benchcpu.Report(b, c0)
				for range b.N {
					if stage != "post" {
						if _, err := p.Pre(ctx, pre); err != nil {
							b.Fatal(err)
						}
					}
					if stage != "pre" {
						if _, err := p.Post(ctx, post); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
	b.Run("native-abi", func(b *testing.B) {
		step := nativeABI(b, c, false)
		b.ReportAllocs()
		b.ResetTimer()
		c0 := benchcpu.Now()
		defer benchcpu.Report(b, c0)
		for range b.N {
			step()
		}
	})
	b.Run("native-logic", func(b *testing.B) {
		d := newInitialised(b, c)
		obs, in := c.observation(), c.postInput()
		b.ReportAllocs()
		b.ResetTimer()
		c0 := benchcpu.Now()
		defer benchcpu.Report(b, c0)
		for range b.N {
			if _, err := d.Pre(obs); err != nil {
				b.Fatal(err)
			}
			if _, err := d.Post(in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// nativeABI returns one native-abi request (see BenchmarkDROIDPrePost):
// the same envelopes through pdk.Runner natively, results decoded. With
// reuse it keeps its buffers between requests as the wasm path does
// (PreInto/PostInto, the host's builders): no allocation per request.
func nativeABI(b *testing.B, c *caseA, reuse bool) func() {
	r := pdk.NewRunner(newInitialised(b, c))
	var eb envelope.Builder
	var dec envelope.Envelope
	var buf []byte
	var st32, out []float32
	cams := []int64{2, 180, 320, 3}
	bytes := func() []byte {
		if !reuse {
			msg, _ := eb.Bytes()
			return msg
		}
		buf, _ = eb.AppendTo(buf[:0])
		return buf
	}
	eb.PadAttrs(abi.AttrsPad) // as the host encodes
	return func() {
		eb.Reset()
		eb.Attr(abi.AttrEmbodiment, Tag).Attr(abi.AttrInstruction, "Put the blue block in the green bowl")
		for _, k := range cameras {
			eb.Descriptor(abi.VideoPrefix+k, envelope.Uint8, cams)
		}
		for _, g := range groups {
			eb.Float64(abi.StatePrefix+g.key, []int64{int64(g.dim)}, c.state[g.key])
		}
		res := r.Pre(bytes())
		if err := dec.Decode(res[abi.ResultHeaderSize:]); err != nil {
			b.Fatal(err)
		}
		st, _ := dec.Tensor(abi.TensorState).Float32s()
		if reuse {
			st32 = append(st32[:0], st...)
		} else {
			_ = append([]float32(nil), st...)
		}

		eb.Reset()
		eb.Attr(abi.AttrEmbodiment, Tag)
		eb.Float32(abi.TensorActionPred, []int64{40, 132}, c.actionPred)
		for _, g := range groups {
			eb.Float64(abi.StatePrefix+g.key, []int64{1, int64(g.dim)}, c.state[g.key])
		}
		res = r.Post(bytes())
		if err := dec.Decode(res[abi.ResultHeaderSize:]); err != nil || len(dec.Tensors) != 3 {
			b.Fatal(err)
		}
		if reuse {
			out = out[:0]
			for i := range dec.Tensors {
				v, _ := dec.Tensors[i].Float32s()
				out = append(out, v...)
			}
			return
		}
		fresh := make([]float32, 0, 17*40) // as BenchmarkDROIDPrePost's native-abi always did
		for i := range dec.Tensors {
			v, _ := dec.Tensors[i].Float32s()
			fresh = append(fresh, v...)
		}
		benchSink = len(fresh)
	}
}

// BenchmarkDROIDPrePostRatio runs wasm prepost-into (stop flag, as served),
// native-abi and native-abi with reused buffers alternately in rounds of
// 200 requests each, so that all see the same machine state, and reports
// the median per-request time of each over the rounds and the ratios
// (the "≤ 2× native"; ratio-reuse against the allocation-free
// native caller). b.N is the number of request triples.
//
//	go test ./embodiments/droid -run '^$' -bench DROIDPrePostRatio -benchtime 20000x
func BenchmarkDROIDPrePostRatio(b *testing.B) {
	c := loadCaseA(b)
	p := openWasm(b)
	pre, post := c.preInput(), c.postWasmInput()
	ctx := context.Background()
	var po plugins.PreOutput
	var qo plugins.PostOutput
	wasm := func() {
		if err := p.PreInto(ctx, pre, &po); err != nil {
			b.Fatal(err)
		}
		if err := p.PostInto(ctx, post, &qo); err != nil {
			b.Fatal(err)
		}
	}
	native, nativeReuse := nativeABI(b, c, false), nativeABI(b, c, true)
	wasm() // the first calls fill caches on both sides
	native()
	nativeReuse()
	const round = 200
	var tw, tn, tr []float64
	timeRound := func(f func(), n int) float64 {
		t0 := time.Now()
		for range n {
			f()
		}
		return float64(time.Since(t0).Nanoseconds()) / float64(n)
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		tw = append(tw, timeRound(wasm, n))
		tn = append(tn, timeRound(native, n))
		tr = append(tr, timeRound(nativeReuse, n))
	}
	b.StopTimer()
	mw, mn, mr := median(tw), median(tn), median(tr)
	b.ReportMetric(mw, "wasm-ns/req")
	b.ReportMetric(mn, "native-ns/req")
	b.ReportMetric(mr, "native-reuse-ns/req")
	b.ReportMetric(mw/mn, "ratio")
	b.ReportMetric(mw/mr, "ratio-reuse")
	b.ReportMetric(0, "ns/op") // the triple's wall time says nothing on its own
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchSink keeps the benchmarks' results alive.
var benchSink int
