package rewrite

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// progGen writes random function bodies over the locals of
// (param $a i32 $b i32 $x i64) (result i64)
// (local $c i32 $acc i64 $y i64 $n0 $n1 $n2 $pc0 $pc1 $pc2 i32):
// loads and stores at random offsets through i32 locals and wrapped i64
// locals (Go's shape), writes to those locals, local.tee, if/else, blocks
// left early with br_if, counted loops (br_if back to the loop), loops of
// the shape of Go's block dispatch (forward jumps and a counted back-edge,
// which the rewrite checks in front of the back-edge only), calls,
// memory.size and memory.grow 0. Local indices: a 0, b 1, x 2, c 3, acc 4,
// y 5, n 6+depth, pc 9+depth.
type progGen struct {
	rng   *rand.Rand
	out   []byte
	depth int
}

var (
	loadOps  = []byte{0x28, 0x29, 0x2C, 0x2D, 0x2E, 0x2F, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35}
	storeOps = []byte{0x36, 0x37, 0x3A, 0x3B, 0x3C, 0x3D, 0x3E}
)

func (g *progGen) emit(b ...byte) { g.out = append(g.out, b...) }

// addr pushes an i32 address: an i32 local or a wrapped i64 local.
func (g *progGen) addr() {
	switch g.rng.IntN(5) {
	case 0, 1, 2:
		g.emit(0x20, []byte{0, 1, 3}[g.rng.IntN(3)])
	default:
		g.emit(0x20, []byte{2, 5}[g.rng.IntN(2)], 0xA7)
	}
}

func (g *progGen) offset() []byte { return uleb(uint64(g.rng.IntN(72))) }

func (g *progGen) stmt() {
	n, pc := byte(6+g.depth), byte(9+g.depth) // this depth's loop counter and dispatch selector
	switch k := g.rng.IntN(18); {
	case k < 4: // acc = acc + load
		g.emit(0x20, 4)
		g.addr()
		op := loadOps[g.rng.IntN(len(loadOps))]
		g.emit(op, 0x00)
		g.emit(g.offset()...)
		if op == 0x28 || (op >= 0x2C && op <= 0x2F) {
			g.emit(0xAD) // i64.extend_i32_u
		}
		g.emit(0x7C, 0x21, 4)
	case k < 6: // store acc (or its low bits)
		g.addr()
		op := storeOps[g.rng.IntN(len(storeOps))]
		g.emit(0x20, 4)
		if op == 0x36 || op == 0x3A || op == 0x3B {
			g.emit(0xA7)
		}
		g.emit(op, 0x00)
		g.emit(g.offset()...)
	case k == 6: // c = a|b + small constant
		g.emit(0x20, byte(g.rng.IntN(2)), 0x41, byte(g.rng.IntN(64)), 0x6A, 0x21, 3)
	case k == 7: // y or x = x + small constant
		g.emit(0x20, 2, 0x42, byte(g.rng.IntN(64)), 0x7C, 0x21, []byte{2, 5}[g.rng.IntN(2)])
	case k == 8: // acc = acc*7 + 1
		g.emit(0x20, 4, 0x42, 7, 0x7E, 0x42, 1, 0x7C, 0x21, 4)
	case k == 9 && g.depth < 3: // if (acc & 1) { … } else { … }
		g.depth++
		g.emit(0x20, 4, 0xA7, 0x41, 1, 0x71, 0x04, 0x40)
		g.stmts(3)
		g.emit(0x05)
		g.stmts(3)
		g.emit(0x0B)
		g.depth--
	case k == 10 && g.depth < 3: // block { …; br_if 0 (acc & 2); far read; … }
		g.depth++
		g.emit(0x02, 0x40)
		g.stmts(3)
		g.emit(0x20, 4, 0xA7, 0x41, 2, 0x71, 0x0D, 0)
		g.emit(0x20, 4, 0x20, 0, 0x29, 0x00, byte(40+g.rng.IntN(32)), 0x7C, 0x21, 4)
		g.stmts(3)
		g.emit(0x0B)
		g.depth--
	case k == 11: // load through a tee into c
		g.emit(0x20, 4)
		g.emit(0x20, byte(g.rng.IntN(2)), 0x22, 3, 0x29, 0x00)
		g.emit(g.offset()...)
		g.emit(0x7C, 0x21, 4)
	case k == 12: // call $poke(c): a store at c+8 in another function
		g.emit(0x20, 3, 0x10, 1)
	case k == 14 && g.depth < 3: // n = 1..4; loop { …; n--; br_if 0 (n) }
		g.emit(0x41, byte(1+g.rng.IntN(4)), 0x21, n, 0x03, 0x40)
		g.depth++
		g.stmts(3)
		g.depth--
		g.emit(0x20, n, 0x41, 1, 0x6B, 0x22, n, 0x0D, 0, 0x0B)
	case k == 15 && g.depth < 3: // Go's dispatch loop: seg 0 → seg 1 (→ seg 0 while n--) → seg 2
		g.emit(0x41, byte(1+g.rng.IntN(4)), 0x21, n, 0x41, 0, 0x21, pc)
		g.emit(0x03, 0x40, 0x02, 0x40, 0x02, 0x40, 0x02, 0x40, 0x20, pc, 0x0E, 3, 0, 1, 2, 2, 0x0B)
		g.depth++
		g.stmts(3)                                          // seg 0
		g.emit(0x41, 1, 0x21, pc, 0x0C, 2, 0x0B)            // pc = 1; br loop (forward)
		g.stmts(3)                                          // seg 1
		g.emit(0x20, n, 0x41, 1, 0x6B, 0x22, n, 0x04, 0x40) // if n-- != 1 {
		g.emit(0x41, 0, 0x21, pc, 0x0C, 2, 0x0B)            //   pc = 0; br loop (back-edge) }
		g.emit(0x41, 2, 0x21, pc, 0x0C, 1, 0x0B)            // pc = 2; br loop (forward)
		g.stmts(3)                                          // seg 2
		g.depth--
		g.emit(0x0B) // falls out of the loop
	default: // acc += memory.size (+ a memory.grow 0)
		g.emit(0x20, 4, 0x3F, 0x00, 0xAD, 0x7C, 0x21, 4)
		if g.rng.IntN(2) == 0 {
			g.emit(0x41, 0, 0x40, 0x00, 0x1A)
		}
	}
}

func (g *progGen) stmts(n int) {
	for range 1 + g.rng.IntN(n) {
		g.stmt()
	}
}

// module returns a module exporting f (the random body) and its memory.
func (g *progGen) module() []byte {
	g.out = g.out[:0]
	g.emit(0x20, 0, 0x21, 3) // c = a
	g.emit(0x20, 2, 0x21, 5) // y = x
	g.stmts(40)
	g.emit(0x20, 4, 0x0B)
	types := sec(secType, 2,
		0x60, 3, 0x7F, 0x7F, 0x7E, 1, 0x7E, // (i32 i32 i64) -> i64
		0x60, 1, 0x7F, 0) // (i32) -> ()
	funcs := sec(secFunction, 2, 0, 1)
	mem := sec(secMemory, 1, 0x00, 0x01)
	exports := sec(secExport, cat([]byte{2},
		[]byte{1}, []byte("f"), []byte{0x00, 0},
		[]byte{3}, []byte("mem"), []byte{0x02, 0})...)
	f := fnBody(cat([]byte{3, 1, 0x7F, 2, 0x7E, 6, 0x7F}, g.out)...)
	poke := fnBody(0, 0x20, 0, 0x41, 0x2A, 0x36, 0x02, 0x08, 0x0B) // i32.store offset=8 (c, 42)
	code := sec(secCode, cat([]byte{2}, f, poke)...)
	return cat([]byte("\x00asm\x01\x00\x00\x00"), types, funcs, mem, exports, code)
}

type runResult struct {
	trapped bool
	ret     uint64
	mem     []byte
	checks  uint64 // stop checks passed (budget started above Interval: no resets)
}

// runF calls f once on a fresh instance. budget, if not 0, is stored in
// the module's budget global first (an instrumented module).
func runF(t *testing.T, r wazero.Runtime, cm wazero.CompiledModule, budget uint32, a, b uint32, x uint64) runResult {
	t.Helper()
	ctx := context.Background()
	m, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
	require.NoError(t, err)
	defer m.Close(ctx)
	var bg api.MutableGlobal
	if budget != 0 {
		bg = m.ExportedGlobal(Budget).(api.MutableGlobal)
		bg.Set(uint64(budget))
	}
	res, err := m.ExportedFunction("f").Call(ctx, api.EncodeU32(a), api.EncodeU32(b), x)
	if err != nil {
		return runResult{trapped: true}
	}
	mem, _ := m.Memory().Read(0, m.Memory().Size())
	out := runResult{ret: res[0], mem: bytes.Clone(mem)}
	if bg != nil && budget > Interval {
		out.checks = uint64(budget) - bg.Get()
	}
	return out
}

// TestRewriteKeepsBehaviour runs random programs before and after both
// rewrites (Instrument, InstrumentEveryLoop) with bases near the end of
// memory (so that some accesses are out of bounds) and in the middle: the
// rewritten module must trap exactly when the original traps, and
// otherwise return the same value and leave the same memory, also when the
// budget runs out during the call (a small starting budget takes the
// checks' periodic memory.grow 0 path). With a high budget it counts the
// checks: the dispatch-loop placement never passes more than a check at
// every loop header does, and fewer over the corpus (forward jumps).
func TestRewriteKeepsBehaviour(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	rng := rand.New(rand.NewPCG(7, 11))
	g := &progGen{rng: rng}
	n := 300
	switch {
	case testing.Short():
		n = 60
	case raceEnabled: // how make test runs this package
		n = 120
	}
	traps := 0
	var checks, checksEvery uint64
	for p := range n {
		orig := g.module()
		inst, err := Instrument(orig)
		require.NoError(t, err, "program %d", p)
		every, err := InstrumentEveryLoop(orig)
		require.NoError(t, err, "program %d", p)
		compile := func(wasm []byte) wazero.CompiledModule {
			cm, err := r.CompileModule(ctx, wasm)
			require.NoError(t, err, "program %d", p)
			return cm
		}
		co, ci, ce := compile(orig), compile(inst), compile(every)
		for range 8 {
			near := func() uint32 { return 65536 - 48 - uint32(rng.IntN(40)) }
			a, b, x := near(), uint32(rng.IntN(65536)), uint64(near())
			if rng.IntN(3) == 0 {
				a, x = uint32(rng.IntN(60000)), uint64(rng.IntN(60000))
			}
			want := runF(t, r, co, 0, a, b, x)
			var got [3]runResult
			for i, v := range []struct {
				name   string
				cm     wazero.CompiledModule
				budget uint32
			}{
				{"Instrument", ci, 1 << 30},
				{"InstrumentEveryLoop", ce, 1 << 30},
				{"Instrument, budget runs out", ci, 1 + uint32(rng.IntN(8))},
			} {
				got[i] = runF(t, r, v.cm, v.budget, a, b, x)
				got := got[i]
				require.Equal(t, want.trapped, got.trapped, "program %d (a=%d b=%d x=%d), %s: trap", p, a, b, x, v.name)
				if want.trapped {
					continue
				}
				require.Equal(t, want.ret, got.ret, "program %d, %s: result", p, v.name)
				require.True(t, bytes.Equal(want.mem, got.mem), "program %d, %s: memory", p, v.name)
			}
			if want.trapped {
				traps++
				continue
			}
			require.LessOrEqual(t, got[0].checks, got[1].checks, "program %d: checks", p)
			checks += got[0].checks
			checksEvery += got[1].checks
		}
		for _, cm := range []wazero.CompiledModule{co, ci, ce} {
			require.NoError(t, cm.Close(ctx))
		}
	}
	// The corpus must exercise both outcomes, and loops.
	assert.Greater(t, traps, n/4, "trapping runs")
	assert.Less(t, checks, checksEvery, "dispatch back-edges only vs every loop header")
	assert.Greater(t, checks, uint64(n), "checks passed")
	t.Logf("%d programs, %d trapping runs, %d checks passed (%d with a check at every loop header)", n, traps, checks, checksEvery)
}
