package rewrite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
)

// dispatchModule exports functions shaped like Go's wasm output (a loop
// around a block nest and a br_table on a "PC" local; jumps are
// i32.const K; local.set pc; br loop):
//
//	dspin ()  -> ()     seg0 → seg1 (forward) → seg0 (back-edge), forever
//	dsum  (n) -> i32    1+…+n: seg0 tests n (forward jump out to seg2),
//	                    seg1 adds and jumps back to seg0
//	dbrif ()  -> ()     dispatch-shaped, but loops with br_if: not
//	                    recognised, gets a header check
func dispatchModule() []byte {
	types := sec(secType, 2,
		0x60, 0, 0, // () -> ()
		0x60, 1, 0x7F, 1, 0x7F) // (i32) -> i32
	funcs := sec(secFunction, 3, 0, 1, 0)
	mem := sec(secMemory, 1, 0x00, 0x01)
	exports := sec(secExport, cat([]byte{3},
		[]byte{5}, []byte("dspin"), []byte{0x00, 0},
		[]byte{4}, []byte("dsum"), []byte{0x00, 1},
		[]byte{5}, []byte("dbrif"), []byte{0x00, 2})...)
	dspin := fnBody(1, 1, 0x7F, // local 0: pc
		0x03, 0x40, // loop
		0x02, 0x40, 0x02, 0x40, // block block
		0x20, 0x00, 0x0E, 0x02, 0x00, 0x01, 0x01, // local.get pc; br_table 0 1 1
		0x0B,                               // end: seg 0
		0x41, 0x01, 0x21, 0x00, 0x0C, 0x01, // pc = 1; br loop (forward)
		0x0B,                               // end: seg 1
		0x41, 0x00, 0x21, 0x00, 0x0C, 0x00, // pc = 0; br loop (back-edge)
		0x0B, 0x0B)
	dsum := fnBody(1, 2, 0x7F, // local 1: pc, local 2: acc
		0x03, 0x40, // loop
		0x02, 0x40, 0x02, 0x40, 0x02, 0x40, // block ×3
		0x20, 0x01, 0x0E, 0x03, 0x00, 0x01, 0x02, 0x02, // br_table 0 1 2 2
		0x0B,                                                                   // seg 0
		0x20, 0x00, 0x45, 0x04, 0x40, 0x41, 0x02, 0x21, 0x01, 0x0C, 0x03, 0x0B, // if n == 0 { pc = 2; br loop }
		0x0B,                                     // seg 1
		0x20, 0x02, 0x20, 0x00, 0x6A, 0x21, 0x02, // acc += n
		0x20, 0x00, 0x41, 0x01, 0x6B, 0x21, 0x00, // n--
		0x41, 0x00, 0x21, 0x01, 0x0C, 0x01, // pc = 0; br loop (back-edge)
		0x0B,             // seg 2
		0x20, 0x02, 0x0F, // return acc
		0x0B,
		0x00, 0x0B)
	dbrif := fnBody(1, 1, 0x7F,
		0x03, 0x40, 0x02, 0x40,
		0x20, 0x00, 0x0E, 0x01, 0x00, 0x00, // br_table 0 0
		0x0B,
		0x41, 0x01, 0x0D, 0x00, // br_if loop
		0x0B, 0x0B)
	code := sec(secCode, cat([]byte{3}, dspin, dsum, dbrif)...)
	return cat(append([]byte("\x00asm\x01\x00\x00\x00"), types...), funcs, mem, exports, code)
}

// TestDispatchLoopChecksOnlyBackEdges: forward jumps through a dispatch
// loop cost no check; back-edges and function entries do.
func TestDispatchLoopChecksOnlyBackEdges(t *testing.T) {
	m, _, budget := instantiate(t, dispatchModule())
	res, err := m.ExportedFunction("dsum").Call(context.Background(), 100)
	require.NoError(t, err)
	assert.Equal(t, uint64(5050), res[0])
	// 1 entry check + 100 back-edges; the 101 loop-header passes and the
	// forward jump out are not checked.
	assert.Equal(t, uint64(Interval-101), budget.Get())
}

// TestDispatchLoopStops: an infinite loop made of dispatch jumps, and one
// made with br_if in a dispatch-shaped loop, are both stopped.
func TestDispatchLoopStops(t *testing.T) {
	ctx := context.Background()
	for _, fn := range []string{"dspin", "dbrif"} {
		t.Run(fn, func(t *testing.T) {
			m, stop, budget := instantiate(t, dispatchModule())
			tm := time.AfterFunc(20*time.Millisecond, func() { stop.Set(1); budget.Set(0) })
			defer tm.Stop()
			start := time.Now()
			_, err := m.ExportedFunction(fn).Call(ctx)
			require.ErrorContains(t, err, "unreachable")
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	}
	t.Run("flag already set", func(t *testing.T) {
		m, stop, budget := instantiate(t, dispatchModule())
		stop.Set(1)
		budget.Set(0)
		_, err := m.ExportedFunction("dsum").Call(ctx, 5)
		require.ErrorContains(t, err, "unreachable", "function entry is checked")
	})
}

// TestInstrumentEveryLoop: the reference mode checks every loop header.
func TestInstrumentEveryLoop(t *testing.T) {
	out, err := InstrumentEveryLoop(dispatchModule())
	require.NoError(t, err)
	r := wazero.NewRuntime(context.Background())
	defer r.Close(context.Background())
	m, err := r.Instantiate(context.Background(), out)
	require.NoError(t, err)
	res, err := m.ExportedFunction("dsum").Call(context.Background(), 100)
	require.NoError(t, err)
	assert.Equal(t, uint64(5050), res[0])
	// 102 loop-header passes: the first entry (the body starts with the
	// loop, so no separate entry check), 100 back-edges, 1 forward jump.
	assert.Equal(t, uint64(Interval-102), m.ExportedGlobal(Budget).Get())
}
