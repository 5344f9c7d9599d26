package main

import (
	"context"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// rawGuest is droid.wasm (built with the gwbench tag, which adds the
// breakdown exports of plugins/pdk/exports_bench_wasip1.go) instantiated
// in plain wazero, initialised, with one input buffer.
type rawGuest struct {
	rt  wazero.Runtime
	mod api.Module
	ptr uint32
	st  []uint64
	fns map[string]api.Function // wazero allocates a call engine per ExportedFunction
}

func newRawGuest(b *testing.B, c *caseA, variant string) *rawGuest {
	ctx := context.Background()
	wasm, err := os.ReadFile(plugintest.BuildGuest(b, ".", "gwbench"))
	if err != nil {
		b.Fatal(err)
	}
	switch variant {
	case "stopcheck":
		wasm, err = plugintest.InstrumentStopChecks(wasm)
	case "stopcheck-everyloop":
		wasm, err = plugintest.InstrumentStopChecksEveryLoop(wasm)
	}
	if err != nil {
		b.Fatal(err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(plugintest.Cache()))
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	if _, err := r.NewHostModuleBuilder("gw_host").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).
		Export("log").Instantiate(ctx); err != nil {
		b.Fatal(err)
	}
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	m, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		b.Fatal(err)
	}
	g := &rawGuest{rt: r, mod: m, st: make([]uint64, 2), fns: map[string]api.Function{}}
	g.st[0] = 1 << 16
	g.call(b, "gw_alloc")
	g.ptr = uint32(g.st[0])
	g.write(b, c.initJSON)
	g.call(b, "gw_init")
	if uint32(g.st[0]) != 8 {
		b.Fatalf("gw_init result len %d", uint32(g.st[0]))
	}
	b.Cleanup(func() { r.Close(ctx) })
	return g
}

func (g *rawGuest) write(b *testing.B, msg []byte) {
	if !g.mod.Memory().Write(g.ptr, msg) {
		b.Fatal("write")
	}
	g.st[0], g.st[1] = uint64(g.ptr), uint64(len(msg))
}

func (g *rawGuest) call(b *testing.B, name string) {
	f := g.fns[name]
	if f == nil {
		f = g.mod.ExportedFunction(name)
		g.fns[name] = f
	}
	if err := f.CallWithStack(context.Background(), g.st); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
}

// preMsg and postMsg are the envelopes the host sends for caseA.
func (c *caseA) preMsg() []byte {
	var eb envelope.Builder
	eb.PadAttrs(abi.AttrsPad) // as the host encodes
	eb.Attr(abi.AttrEmbodiment, Tag).Attr(abi.AttrInstruction, "Put the blue block in the green bowl")
	for _, k := range cameras {
		eb.Descriptor(abi.VideoPrefix+k, envelope.Uint8, []int64{2, 180, 320, 3})
	}
	for _, g := range groups {
		eb.Float64(abi.StatePrefix+g.key, []int64{int64(g.dim)}, c.state[g.key])
	}
	msg, _ := eb.Bytes()
	return msg
}

func (c *caseA) postMsg() []byte {
	var eb envelope.Builder
	eb.PadAttrs(abi.AttrsPad) // as the host encodes
	eb.Attr(abi.AttrEmbodiment, Tag)
	eb.Float32(abi.TensorActionPred, []int64{40, 132}, c.actionPred)
	for _, g := range groups {
		eb.Float64(abi.StatePrefix+g.key, []int64{1, int64(g.dim)}, c.state[g.key])
	}
	msg, _ := eb.Bytes()
	return msg
}

// BenchmarkBreakdown splits one request's guest side into layers, through
// raw wazero (no pool, no deadline timer), on droid.wasm as shipped
// ("plain"), as the host rewrites it for DeadlineStopFlag ("stopcheck")
// and as it did before the dispatch-loop analysis ("stopcheck-everyloop":
// a check at every loop header):
//
//	empty        an export with no body (gw_abi_v1): entering and leaving
//	             a Go wasmexport
//	nop          gw_pre's shape: input lookup and result packing only
//	write-pre/post  copying the input envelope into guest memory
//	decode-pre/post the guest's envelope decode, in full (decode-checked-*:
//	             its slow path alone, as before the fast path existed)
//	decode-reuse-pre/post Envelope.Decode as the Runner calls it, in steady
//	             state (same buffer and layout: the attributes only)
//	attrs-pre/post the Runner's request-attribute scan alone (on
//	             decode-reuse's last decode)
//	extract-pre/post the Runner's decode plus filling its Observation /
//	             PostInput, in steady state: the input layout repeats, so
//	             the decoded tensors and what was derived from them are
//	             reused and only the attributes are read
//	logic-pre/post  the plugin's Pre/Post alone (on the last decoded input)
//	steps(-ref)  Post's 40-step chunk decode alone (-ref: the previous
//	             implementation, for A/B in one module)
//	gw_pre/post  the full export (decode, logic, encode), input write included
//
// guest-allocs/op is the guest runtime's heap allocations per call
// (runtime.MemStats.Mallocs), guest-gcs/op its collections per call.
//
//	go test ./embodiments/droid -run '^$' -bench Breakdown -benchtime 2000x
func BenchmarkBreakdown(b *testing.B) {
	c := loadCaseA(b)
	pre, post := c.preMsg(), c.postMsg()
	for _, variant := range []string{"plain", "stopcheck", "stopcheck-everyloop"} {
		g := newRawGuest(b, c, variant)
		// Prime the Runner's decoded inputs for the logic-only exports.
		g.write(b, pre)
		g.call(b, "gw_pre")
		g.write(b, post)
		g.call(b, "gw_post")
		budget, _ := g.mod.ExportedGlobal(plugintest.StopCheckBudget).(api.MutableGlobal)
		run := func(name string, msg []byte, fn string) {
			b.Run(variant+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				g.st[0] = 0
				g.call(b, "gw_bench_mallocs")
				m0 := g.st[0]
				b.ResetTimer()
				c0 := benchcpu.Now()
				for range b.N {
					if msg != nil {
						g.write(b, msg)
					}
					if fn != "" {
						g.call(b, fn)
					}
				}
				benchcpu.Report(b, c0)
				b.StopTimer()
				g.call(b, "gw_bench_mallocs")
				m1 := g.st[0]
				b.ReportMetric(float64(uint32(m1)-uint32(m0))/float64(b.N), "guest-allocs/op")
				if budget != nil {
					// A deterministic work count: the stop checks the call
					// passes (budget far from zero, so no resets). In
					// stopcheck-everyloop: function entries plus every
					// jump through Go's dispatch loops.
					budget.Set(1 << 30)
					for range 10 {
						if msg != nil {
							g.write(b, msg)
						}
						if fn != "" {
							g.call(b, fn)
						}
					}
					b.ReportMetric(float64((1<<30)-budget.Get())/10, "checks/op")
				}
				b.ReportMetric(float64((m1>>32)-(m0>>32))/float64(b.N), "guest-gcs/op")
			})
		}
		run("empty", nil, "gw_abi_v1")
		run("nop", pre, "gw_bench_nop")
		run("write-pre", pre, "")
		run("write-post", post, "")
		run("decode-pre", pre, "gw_bench_decode")
		run("decode-post", post, "gw_bench_decode")
		run("decode-reuse-pre", pre, "gw_bench_decode_reuse")
		run("attrs-pre", nil, "gw_bench_attrs")
		run("decode-reuse-post", post, "gw_bench_decode_reuse")
		run("attrs-post", nil, "gw_bench_attrs")
		run("extract-pre", pre, "gw_bench_extract_pre")
		run("extract-post", post, "gw_bench_extract_post")
		run("decode-checked-pre", pre, "gw_bench_decode_checked")
		run("decode-checked-post", post, "gw_bench_decode_checked")
		g.write(b, pre)
		g.call(b, "gw_pre")
		run("logic-pre", nil, "gw_bench_logic_pre")
		g.write(b, post)
		g.call(b, "gw_post")
		run("logic-post", nil, "gw_bench_logic_post")
		run("encode-pre", nil, "gw_bench_encode_pre")
		run("encode-post", nil, "gw_bench_encode_post")
		run("post-full", nil, "gw_bench_post_full")
		run("post-validate", nil, "gw_bench_post_validate")
		run("post-frame", nil, "gw_bench_post_frame")
		run("steps", nil, "gw_bench_steps")
		run("steps-ref", nil, "gw_bench_steps_ref")
		run("gw_pre", pre, "gw_pre")
		run("gw_post", post, "gw_post")
	}
}

// BenchmarkBreakdownNative is BenchmarkBreakdown's guest layers run
// natively (same Go code, amd64/arm64): the wasm/native factor per layer.
func BenchmarkBreakdownNative(b *testing.B) {
	c := loadCaseA(b)
	pre, post := c.preMsg(), c.postMsg()
	r := pdk.NewRunner(newInitialised(b, c))
	var dec envelope.Envelope
	bench := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			c0 := benchcpu.Now()
			for range b.N {
				f()
			}
			benchcpu.Report(b, c0)
		})
	}
	bench("encode-pre", func() { c.preMsg() })
	bench("decode-pre", func() { _ = dec.Decode(pre) })
	bench("decode-post", func() { _ = dec.Decode(post) })
	bench("runner-pre", func() { r.Pre(pre) })
	bench("runner-post", func() { r.Post(post) })
}
