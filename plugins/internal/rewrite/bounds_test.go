package rewrite

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// progGen writes random function bodies over the locals of
// (param $a i32 $b i32 $x i64) (result i64) (local $c i32 $acc i64 $y i64):
// loads and stores at random offsets through i32 locals and through
// wrapped i64 locals (Go's shape), float accesses through an i64 pointer
// plus a constant (Go's shape for those), writes to those locals, local.tee,
// if/else, blocks left early with br_if, calls, memory.size and
// memory.grow 0. Local indices: a 0, b 1, x 2, c 3, acc 4, y 5.
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
	switch k := g.rng.IntN(17); {
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
	case k == 10 && g.depth < 3: // block { …; br_if 0 (acc & 2); … }
		g.depth++
		g.emit(0x02, 0x40)
		g.stmts(3)
		// a safe read through $a right before the branch and a far one
		// right after it: a probe must not carry the far one across
		g.emit(0x20, 4, 0x20, 0, 0x31, 0x00, 0x00, 0x7C, 0x21, 4)
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
	case k >= 14: // Go's float access: i64 pointer plus a constant, wrapped
		x := []byte{2, 5}[g.rng.IntN(2)]
		c := byte(g.rng.IntN(64))
		if g.rng.IntN(2) == 0 { // acc += bits of f32/f64.load
			g.emit(0x20, 4, 0x20, x, 0x42, c, 0x7C, 0xA7)
			if g.rng.IntN(2) == 0 {
				g.emit(0x2B, 0x03)
				g.emit(g.offset()...)
				g.emit(0xBD) // i64.reinterpret_f64
			} else {
				g.emit(0x2A, 0x02)
				g.emit(g.offset()...)
				g.emit(0xBC, 0xAD) // i32.reinterpret_f32, i64.extend_i32_u
			}
			g.emit(0x7C, 0x21, 4)
		} else { // f32/f64.store of acc's bits, the value computed after the address
			g.emit(0x20, x, 0x42, c, 0x7C, 0xA7, 0x20, 4)
			if g.rng.IntN(2) == 0 {
				g.emit(0xBF, 0x39, 0x03) // f64.reinterpret_i64; f64.store
			} else {
				g.emit(0xA7, 0xBE, 0x38, 0x02) // i32.wrap_i64; f32.reinterpret_i32; f32.store
			}
			g.emit(g.offset()...)
		}
	case k == 12: // call $poke(c): a store at c+8 in another function
		g.emit(0x20, 3, 0x10, 1)
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
	f := fnBody(cat([]byte{2, 1, 0x7F, 2, 0x7E}, g.out)...)
	poke := fnBody(0, 0x20, 0, 0x41, 0x2A, 0x36, 0x02, 0x08, 0x0B) // i32.store offset=8 (c, 42)
	code := sec(secCode, cat([]byte{2}, f, poke)...)
	return cat([]byte("\x00asm\x01\x00\x00\x00"), types, funcs, mem, exports, code)
}

type runResult struct {
	trapped bool
	ret     uint64
	mem     []byte
}

func runF(t *testing.T, r wazero.Runtime, wasm []byte, a, b uint32, x uint64) runResult {
	t.Helper()
	ctx := context.Background()
	m, err := r.Instantiate(ctx, wasm)
	require.NoError(t, err)
	defer m.Close(ctx)
	res, err := m.ExportedFunction("f").Call(ctx, api.EncodeU32(a), api.EncodeU32(b), x)
	if err != nil {
		return runResult{trapped: true}
	}
	mem, _ := m.Memory().Read(0, m.Memory().Size())
	return runResult{ret: res[0], mem: bytes.Clone(mem)}
}

// TestBoundsRewriteKeepsBehaviour runs random programs before and after
// the rewrite with bases near the end of memory (so that some accesses are
// out of bounds) and in the middle: the rewritten module must trap exactly
// when the original traps, and otherwise return the same value and leave
// the same memory.
func TestBoundsRewriteKeepsBehaviour(t *testing.T) {
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
	probes, traps := 0, 0
	for p := range n {
		orig := g.module()
		inst, err := Instrument(orig)
		require.NoError(t, err, "program %d", p)
		probes += bytes.Count(inst, []byte{0x2D, 0x00}) - bytes.Count(orig, []byte{0x2D, 0x00})
		for range 8 {
			near := func() uint32 { return 65536 - 48 - uint32(rng.IntN(40)) }
			a, b, x := near(), uint32(rng.IntN(65536)), uint64(near())
			if rng.IntN(3) == 0 {
				a, x = uint32(rng.IntN(60000)), uint64(rng.IntN(60000))
			}
			want := runF(t, r, orig, a, b, x)
			got := runF(t, r, inst, a, b, x)
			require.Equal(t, want.trapped, got.trapped, "program %d (a=%d b=%d x=%d): trap", p, a, b, x)
			if want.trapped {
				traps++
				continue
			}
			require.Equal(t, want.ret, got.ret, "program %d: result", p)
			require.True(t, bytes.Equal(want.mem, got.mem), "program %d: memory", p)
		}
	}
	// The corpus must exercise both outcomes and the probes themselves.
	assert.Greater(t, traps, n/4, "trapping runs")
	assert.Greater(t, probes, n/2, "probes inserted")
	t.Logf("%d programs, %d probes, %d trapping runs", n, probes, traps)
}

// TestProbeStopsAtBranch: a probe covers one straight-line run only. The
// access at offset 60 sits after a br_if that leaves the block, so with a
// base near the end of memory the original returns without touching it,
// and so must the rewritten module.
func TestProbeStopsAtBranch(t *testing.T) {
	body := []byte{0, // no locals
		0x02, 0x40, // block
		0x20, 0, 0x28, 0x02, 0x00, 0x1A, // i32.load a+0; drop
		0x20, 0, 0x28, 0x02, 0x04, 0x1A, // i32.load a+4; drop
		0x41, 1, 0x0D, 0, // br_if 0 (always)
		0x20, 0, 0x28, 0x02, 0x3C, 0x1A, // i32.load a+60; drop (not reached)
		0x20, 0, 0x28, 0x02, 0x38, 0x1A, // i32.load a+56; drop
		0x0B, 0x42, 1, 0x0B}
	types := sec(secType, 1, 0x60, 3, 0x7F, 0x7F, 0x7E, 1, 0x7E)
	mod := cat([]byte("\x00asm\x01\x00\x00\x00"), types, sec(secFunction, 1, 0), sec(secMemory, 1, 0x00, 0x01),
		sec(secExport, cat([]byte{1, 1}, []byte("f"), []byte{0x00, 0})...), sec(secCode, cat([]byte{1}, fnBody(body...))...))
	inst, err := Instrument(mod)
	require.NoError(t, err)
	r := wazero.NewRuntime(context.Background())
	defer r.Close(context.Background())
	for _, w := range [][]byte{mod, inst} {
		res := runF(t, r, w, 65536-8, 0, 0)
		require.False(t, res.trapped)
		require.Equal(t, uint64(1), res.ret)
	}
	// The first run ascends (a+4, then a+8): one probe. The accesses after
	// the branch are a run of their own that descends (a+64, then a+60),
	// which wazero already checks once: no probe.
	assert.Equal(t, 1, bytes.Count(inst, []byte{0x2D, 0x00})-bytes.Count(mod, []byte{0x2D, 0x00}))
}

// TestWrapCache: Go's "local.get X; i32.wrap_i64" in front of each access
// becomes one wrap into a new local per run, read again by the later
// accesses (and one probe covers the three ascending offsets).
func TestWrapCache(t *testing.T) {
	body := []byte{0,
		0x20, 2, 0xA7, 0x29, 0x03, 0x00, // i64.load wrap(x)+0
		0x20, 2, 0xA7, 0x29, 0x03, 0x08, // i64.load wrap(x)+8
		0x7C,
		0x20, 2, 0xA7, 0x29, 0x03, 0x10, // i64.load wrap(x)+16
		0x7C, 0x0B}
	types := sec(secType, 1, 0x60, 3, 0x7F, 0x7F, 0x7E, 1, 0x7E)
	mod := cat([]byte("\x00asm\x01\x00\x00\x00"), types, sec(secFunction, 1, 0), sec(secMemory, 1, 0x00, 0x01),
		sec(secExport, cat([]byte{1, 1}, []byte("f"), []byte{0x00, 0})...), sec(secCode, cat([]byte{1}, fnBody(body...))...))
	inst, err := Instrument(mod)
	require.NoError(t, err)
	assert.Equal(t, 1, bytes.Count(inst, []byte{0xA7, 0x22, 3}), "one wrap, teed into the new local 3")
	assert.Equal(t, 2, bytes.Count(inst, []byte{0x20, 3, 0x29}), "two accesses read the cached wrap")
	assert.Equal(t, 1, bytes.Count(inst, []byte{0x20, 3, 0x2D, 0x00, 0x17, 0x1A}), "probe at offset 23 (ceiling 24)")
	r := wazero.NewRuntime(context.Background())
	defer r.Close(context.Background())
	for _, base := range []uint64{100, 65536 - 24, 65536 - 23} {
		want, got := runF(t, r, mod, 0, 0, base), runF(t, r, inst, 0, 0, base)
		assert.Equal(t, want, got, fmt.Sprint("base ", base))
	}
}

// TestFoldWrapEdge pins the one case where planFolds changes behaviour: an
// i64 pointer whose low 32 bits are within the folded constant of 4 GiB.
// Before the rewrite the address wraps around to low memory (here 4); after
// it the access is out of bounds and traps. No pointer into a wasm32
// memory below the page limit comes near 4 GiB.
func TestFoldWrapEdge(t *testing.T) {
	body := []byte{0,
		0x20, 2, 0x42, 8, 0x7C, 0xA7, 0x2B, 0x03, 0x00, 0xBD, 0x0B} // i64.reinterpret(f64.load(wrap(x+8)))
	types := sec(secType, 1, 0x60, 3, 0x7F, 0x7F, 0x7E, 1, 0x7E)
	mod := cat([]byte("\x00asm\x01\x00\x00\x00"), types, sec(secFunction, 1, 0), sec(secMemory, 1, 0x00, 0x01),
		sec(secExport, cat([]byte{1, 1}, []byte("f"), []byte{0x00, 0})...), sec(secCode, cat([]byte{1}, fnBody(body...))...))
	inst, err := Instrument(mod)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(inst, []byte{0x20, 2, 0xA7}), "constant folded away")
	r := wazero.NewRuntime(context.Background())
	defer r.Close(context.Background())
	for _, x := range []uint64{0, 65536 - 16} {
		assert.Equal(t, runF(t, r, mod, 0, 0, x), runF(t, r, inst, 0, 0, x), "x=%d", x)
	}
	edge := uint64(1<<32 - 4)
	assert.False(t, runF(t, r, mod, 0, 0, edge).trapped, "original wraps to address 4")
	assert.True(t, runF(t, r, inst, 0, 0, edge).trapped, "folded form traps")
}

// TestAddrConsumer: the access that takes an address as its operand is
// found through the value computed in between, and nothing else is.
func TestAddrConsumer(t *testing.T) {
	addr := []byte{0x20, 2, 0x42, 8, 0x7C, 0xA7} // local.get x; i64.const 8; i64.add; i32.wrap_i64
	for _, tc := range []struct {
		name string
		rest []byte
		want int // index into the instructions after addr, -1 for none
	}{
		{"load", []byte{0x2B, 0x03, 0x00}, 0},
		{"store after its value", []byte{0x20, 4, 0xBF, 0x39, 0x03, 0x00}, 2},
		{"store of a loaded value", []byte{0x20, 0, 0x2B, 0x03, 0x10, 0x39, 0x03, 0x00}, 2},
		{"integer use", []byte{0x41, 1, 0x6A, 0x1A}, -1},
		{"integer load", []byte{0x29, 0x03, 0x00}, -1},
		{"call first", []byte{0x20, 4, 0x10, 0x00, 0x39, 0x03, 0x00}, -1},
		{"branch first", []byte{0x20, 4, 0xBF, 0x0D, 0x00, 0x39, 0x03, 0x00}, -1},
	} {
		var sc scratch
		body := append(append([]byte{}, addr...), tc.rest...)
		require.NoError(t, decodeBody(&reader{b: body}, 1<<20, &sc), tc.name)
		got := addrConsumer(sc.ins, 4)
		if got >= 0 {
			got -= 4
		}
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// TestReviewCounterexamples: modules from the review of the bounds passes
// (helper report, session 3) that wazero accepts. A padded local-group
// count stays valid after wrap locals are added; a local of a typed
// reference type is refused (ErrUnsupported) rather than misparsed; a
// fold constant of 1 MiB or more is left alone, so a small pointer plus a
// huge constant still wraps as before.
func TestReviewCounterexamples(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	types := sec(secType, 1, 0x60, 3, 0x7F, 0x7F, 0x7E, 1, 0x7E)
	module := func(body ...byte) []byte {
		return cat([]byte("\x00asm\x01\x00\x00\x00"), types, sec(secFunction, 1, 0), sec(secMemory, 1, 0x00, 0x01),
			sec(secExport, cat([]byte{1, 1}, []byte("f"), []byte{0x00, 0})...), sec(secCode, cat([]byte{1}, fnBody(body...))...))
	}

	padded := module(0x81, 0x00, 1, 0x7E, // one local group, the count in two bytes
		0x20, 2, 0xA7, 0x29, 0x03, 0x00,
		0x20, 2, 0xA7, 0x29, 0x03, 0x08, 0x7C, 0x0B)
	inst, err := Instrument(padded)
	require.NoError(t, err)
	_, err = r.CompileModule(ctx, inst)
	require.NoError(t, err, "padded local count")
	assert.Equal(t, runF(t, r, padded, 0, 0, 64), runF(t, r, inst, 0, 0, 64))

	typedRef := module(1, 1, 0x63, 0x70, 0x42, 0, 0x0B) // (local (ref null func))
	if _, err := r.CompileModule(ctx, typedRef); err == nil {
		_, err = Instrument(typedRef)
		require.ErrorIs(t, err, ErrUnsupported)
	}

	huge := module(0, 0x20, 2, 0x42, 0xF0, 0xFF, 0xFF, 0xFF, 0x0F, 0x7C, 0xA7, // wrap(x + 0xFFFFFFF0)
		0x2B, 0x03, 0x00, 0xBD, 0x0B) // f64.load; i64.reinterpret
	inst, err = Instrument(huge)
	require.NoError(t, err)
	want := runF(t, r, huge, 0, 0, 100) // reads address 84
	require.False(t, want.trapped)
	assert.Equal(t, want, runF(t, r, inst, 0, 0, 100))
}
