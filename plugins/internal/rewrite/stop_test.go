package rewrite

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

func sec(id byte, body ...byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(body)))...), body...)
}

func fnBody(code ...byte) []byte { return append(uleb(uint64(len(code))), code...) }

// testModule exports:
//
//	spin  () -> ()           loop br 0 end (never returns)
//	sum   (n i32) -> i32     1+2+…+n with a loop
//	rec   (n i32) -> i32     recursion without a loop: rec(n-1)+1
//
// plus one memory page and one immutable i32 global (index 0), so the
// control globals are 1 and 2.
func testModule(extra ...[]byte) []byte {
	types := sec(secType, 2,
		0x60, 0, 0, // () -> ()
		0x60, 1, 0x7F, 1, 0x7F) // (i32) -> i32
	funcs := sec(secFunction, 3, 0, 1, 1)
	mem := sec(secMemory, 1, 0x00, 0x01)
	globals := sec(secGlobal, 1, 0x7F, 0x00, 0x41, 0x07, 0x0B)
	exports := sec(secExport, cat([]byte{3},
		[]byte{4}, []byte("spin"), []byte{0x00, 0},
		[]byte{3}, []byte("sum"), []byte{0x00, 1},
		[]byte{3}, []byte("rec"), []byte{0x00, 2})...)
	spin := fnBody(0, 0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B)
	sum := fnBody(1, 1, 0x7F, // one i32 local (acc)
		0x03, 0x40, // loop
		0x20, 0x00, 0x45, 0x04, 0x40, 0x20, 0x01, 0x0F, 0x0B, // if n == 0 return acc
		0x20, 0x01, 0x20, 0x00, 0x6A, 0x21, 0x01, // acc += n
		0x20, 0x00, 0x41, 0x01, 0x6B, 0x21, 0x00, // n--
		0x0C, 0x00, // br loop
		0x0B,
		0x00, 0x0B) // unreachable end
	rec := fnBody(0,
		0x20, 0x00, 0x45, 0x04, 0x40, 0x41, 0x00, 0x0F, 0x0B, // if n == 0 return 0
		0x20, 0x00, 0x41, 0x01, 0x6B, 0x10, 0x02, 0x41, 0x01, 0x6A, // rec(n-1)+1
		0x0B)
	code := sec(secCode, cat([]byte{3}, spin, sum, rec)...)
	return cat(append([]byte("\x00asm\x01\x00\x00\x00"), types...), funcs, mem, globals, exports, code, cat(extra...))
}

func instantiate(t *testing.T, wasm []byte) (m api.Module, stop, budget api.MutableGlobal) {
	t.Helper()
	ctx := context.Background()
	out, err := Instrument(wasm)
	require.NoError(t, err)
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig()) // no close-on-context-done
	t.Cleanup(func() { _ = r.Close(ctx) })
	m, err = r.Instantiate(ctx, out)
	require.NoError(t, err)
	stop, ok := m.ExportedGlobal(Stop).(api.MutableGlobal)
	require.True(t, ok, "stop flag exported as a mutable global")
	budget, ok = m.ExportedGlobal(Budget).(api.MutableGlobal)
	require.True(t, ok, "budget exported as a mutable global")
	return m, stop, budget
}

func TestInstrumentKeepsBehaviour(t *testing.T) {
	m, stop, budget := instantiate(t, testModule())
	ctx := context.Background()
	assert.Equal(t, uint64(0), stop.Get())
	assert.Equal(t, uint64(Interval), budget.Get())
	res, err := m.ExportedFunction("sum").Call(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, uint64(5050), res[0])
	res, err = m.ExportedFunction("rec").Call(ctx, 1000)
	require.NoError(t, err)
	assert.Equal(t, uint64(1000), res[0])
	// 101 checks for sum (its body starts with the loop, so no separate
	// entry check), 1001 for rec = 1102: Interval decrements, one reset to
	// Interval, then 1102-Interval-1 decrements.
	assert.Equal(t, uint64(Interval-(1102-Interval-1)), budget.Get())
}

func TestStopFlagStopsLoopAndRecursion(t *testing.T) {
	ctx := context.Background()
	t.Run("stop without budget reset", func(t *testing.T) {
		// The host's budget store may be lost to the guest's own
		// decrement: the flag is still seen within Interval checks.
		m, stop, _ := instantiate(t, testModule())
		stop.Set(1)
		_, err := m.ExportedFunction("spin").Call(ctx)
		require.ErrorContains(t, err, "unreachable")
	})
	t.Run("infinite loop", func(t *testing.T) {
		m, stop, budget := instantiate(t, testModule())
		tm := time.AfterFunc(20*time.Millisecond, func() { stop.Set(1); budget.Set(0) })
		defer tm.Stop()
		start := time.Now()
		_, err := m.ExportedFunction("spin").Call(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "unreachable")
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("flag already set", func(t *testing.T) {
		m, stop, budget := instantiate(t, testModule())
		stop.Set(1)
		budget.Set(0)
		_, err := m.ExportedFunction("rec").Call(ctx, 5)
		require.ErrorContains(t, err, "unreachable", "function entry is checked")
		stop.Set(0)
		res, err := m.ExportedFunction("sum").Call(ctx, 3)
		require.NoError(t, err)
		assert.Equal(t, uint64(6), res[0])
	})
}

func TestInstrumentCreatesMissingSections(t *testing.T) {
	// No global and no export section: both are created in order.
	wasm := cat([]byte("\x00asm\x01\x00\x00\x00"),
		sec(secType, 1, 0x60, 0, 0),
		sec(secFunction, 1, 0),
		sec(secMemory, 1, 0x00, 0x01),
		sec(secCode, cat([]byte{1}, fnBody(0, 0x0B))...),
		sec(secCustom, cat([]byte{4}, []byte("note"), []byte("x"))...))
	_, stop, _ := instantiate(t, wasm)
	assert.Equal(t, uint64(0), stop.Get())
}

// TestInstrumentSIMD: fixed-width SIMD bodies (a v128 local and every
// immediate shape: memarg, 16-byte const and shuffle, lane index, memarg
// plus lane) are rewritten, compile and keep their result.
func TestInstrumentSIMD(t *testing.T) {
	body := cat([]byte{1, 1, 0x7B}, // one v128 local
		[]byte{0xFD, 0x0C, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}, // v128.const i32x4 1 2 3 4
		[]byte{0x21, 0x01}, // local.set 1
		[]byte{0x41, 0x00, 0x20, 0x01, 0xFD, 0x0B, 0x04, 0x00},                                           // v128.store [0] = local 1
		[]byte{0x41, 0x00, 0xFD, 0x00, 0x04, 0x00},                                                       // v128.load [0]
		[]byte{0x20, 0x01, 0x20, 0x01, 0xFD, 0x0D, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, // identity shuffle
		[]byte{0xFD, 0xAE, 0x01, 0x21, 0x01},                                                             // i32x4.add → 2 4 6 8; local.set 1
		[]byte{0x41, 0x04, 0x20, 0x01, 0xFD, 0x56, 0x02, 0x00, 0x03},                                     // v128.load32_lane [4] (= 2) into lane 3
		[]byte{0xFD, 0x1B, 0x03, 0x20, 0x00, 0x6A, 0x0B})                                                 // i32x4.extract_lane 3 + n
	wasm := cat([]byte("\x00asm\x01\x00\x00\x00"),
		sec(secType, 1, 0x60, 1, 0x7F, 1, 0x7F),
		sec(secFunction, 1, 0),
		sec(secMemory, 1, 0x00, 0x01),
		sec(secExport, cat([]byte{1, 4}, []byte("simd"), []byte{0x00, 0})...),
		sec(secCode, cat([]byte{1}, fnBody(body...))...))
	m, _, budget := instantiate(t, wasm)
	res, err := m.ExportedFunction("simd").Call(context.Background(), 40)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), res[0])
	assert.Equal(t, uint64(Interval-1), budget.Get(), "the entry check ran")
}

func TestInstrumentRefuses(t *testing.T) {
	simd := testModule()
	// Replace the spin body's `br 0; end` with relaxed SIMD's first
	// opcode (0xfd 256), which wazero does not implement.
	for i := range simd {
		if simd[i] == 0x03 && simd[i+1] == 0x40 && simd[i+2] == 0x0C {
			simd[i+2], simd[i+3], simd[i+4] = 0xFD, 0x80, 0x02
			break
		}
	}
	tests := []struct {
		name string
		wasm []byte
		want string
	}{
		{"not wasm", []byte("hello wasm"), "not a version-1 binary"},
		{"truncated", testModule()[:40], "unexpected end"},
		{"relaxed simd", simd, "opcode 0xfd 256"},
		{"name taken", cat([]byte("\x00asm\x01\x00\x00\x00"), sec(secExport, cat([]byte{1, byte(len(Budget))}, []byte(Budget), []byte{0x03, 0})...)), "already exports"},
		{"no memory", cat([]byte("\x00asm\x01\x00\x00\x00"), sec(secType, 1, 0x60, 0, 0), sec(secFunction, 1, 0), sec(secCode, cat([]byte{1}, fnBody(0, 0x0B))...)), "no memory"},
		{"unknown section", append(testModule(), sec(42, 0)...), "unknown section id 42"},
		// (local (ref null func)): a two-byte value type, refused rather than misparsed
		{"typed reference local", cat([]byte("\x00asm\x01\x00\x00\x00"), sec(secType, 1, 0x60, 0, 0), sec(secFunction, 1, 0),
			sec(secMemory, 1, 0x00, 0x01), sec(secCode, cat([]byte{1}, fnBody(1, 1, 0x63, 0x70, 0x0B))...)), "locals: value type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Instrument(tt.wasm)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrUnsupported))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// FuzzInstrument: Instrument never panics, and whenever wazero accepts the
// original module it also accepts the instrumented one.
func FuzzInstrument(f *testing.F) {
	f.Add(testModule())
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	g := &progGen{rng: rand.New(rand.NewPCG(1, 2))}
	for range 4 {
		f.Add(g.module())
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := Instrument(wasm)
		if err != nil {
			return
		}
		orig, ok := compiles(ctx, r, wasm)
		if !ok {
			return
		}
		defer orig.Close(ctx)
		inst, err := r.CompileModule(ctx, out)
		require.NoError(t, err, "instrumented module must stay valid")
		_ = inst.Close(ctx)
	})
}

// compiles reports whether wazero accepts wasm. wazero v1.12's validator
// panics on some invalid modules (a call to a function whose type index is
// out of range: testdata/fuzz/FuzzInstrument/53c8d6c4355ea5fd, with or
// without the rewrite); such a module is not accepted either.
func compiles(ctx context.Context, r wazero.Runtime, wasm []byte) (cm wazero.CompiledModule, ok bool) {
	defer func() {
		if recover() != nil {
			cm, ok = nil, false
		}
	}()
	cm, err := r.CompileModule(ctx, wasm)
	return cm, err == nil
}
