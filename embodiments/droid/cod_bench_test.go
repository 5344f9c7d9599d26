package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// BenchmarkPostCloseOnContextDone isolates the cost of wazero's
// close-on-context-done instrumentation on droid.wasm's gw_post (raw
// wazero, no pool or host wrapper): "plain" runs without it, "cod" with it,
// "cod+timeout" also with a per-call context.WithTimeout like the host;
// "stopcheck" runs the module as the host's default DeadlineStopFlag
// rewrites it (checks only; the flag is never raised).
//
//	go test ./embodiments/droid -run '^$' -bench PostCloseOnContextDone -benchtime 2000x
func BenchmarkPostCloseOnContextDone(b *testing.B) {
	ctx := context.Background()
	orig, _ := os.ReadFile(plugintest.BuildGuest(b, "."))
	c := loadCaseA(b)
	for _, mode := range []string{"plain", "stopcheck", "cod", "cod+timeout"} {
		wasm := orig
		if mode == "stopcheck" {
			var err error
			if wasm, err = plugintest.InstrumentStopChecks(orig); err != nil {
				b.Fatal(err)
			}
		}
		cod := mode == "cod" || mode == "cod+timeout"
		r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(cod).WithCompilationCache(plugintest.Cache()))
		wasi_snapshot_preview1.MustInstantiate(ctx, r)
		r.NewHostModuleBuilder("gw_host").NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {}), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).Export("log").Instantiate(ctx)
		cm, err := r.CompileModule(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		m, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
		if err != nil {
			b.Fatal(err)
		}
		ck, err := plugins.ReadCheckpoint(goldenDir)
		if err != nil {
			b.Fatal(err)
		}
		ij, err := plugins.InitConfigJSON(Tag, ck, nil)
		if err != nil {
			b.Fatal(err)
		}
		st := make([]uint64, 2)
		st[0] = 1 << 20
		m.ExportedFunction("gw_alloc").CallWithStack(ctx, st)
		ptr := uint32(st[0])
		m.Memory().Write(ptr, ij)
		st[0], st[1] = uint64(ptr), uint64(len(ij))
		if err := m.ExportedFunction("gw_init").CallWithStack(ctx, st); err != nil || uint32(st[0]) != 8 {
			b.Fatalf("gw_init: %v (result len %d)", err, uint32(st[0]))
		}
		var eb envelope.Builder
		eb.Float32("action_pred", []int64{40, 132}, c.actionPred)
		for _, g := range groups {
			eb.Float64("state."+g.key, []int64{int64(g.dim)}, c.state[g.key])
		}
		msg, _ := eb.Bytes()
		post := m.ExportedFunction("gw_post")
		defer r.Close(ctx)
		b.Run(mode, func(b *testing.B) {
			b.ResetTimer()
			c0 := benchcpu.Now()
			defer benchcpu.Report(b, c0)
			for range b.N {
				cctx := ctx
				var cancel func()
				if mode == "cod+timeout" {
					cctx, cancel = context.WithTimeout(ctx, time.Second)
				}
				m.Memory().Write(ptr, msg)
				st[0], st[1] = uint64(ptr), uint64(len(msg))
				if err := post.CallWithStack(cctx, st); err != nil {
					b.Fatal(err)
				}
				if cancel != nil {
					cancel()
				}
			}
		})
	}
}
