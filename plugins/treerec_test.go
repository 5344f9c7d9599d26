package plugins_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

func wULEB(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func wSLEB(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func wCat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func wSec(id byte, body []byte) []byte { return wCat([]byte{id}, wULEB(uint64(len(body))), body) }
func wBody(code ...byte) []byte        { return wCat(wULEB(uint64(len(code)+1)), []byte{0}, code) } // no locals
func wName(s string) []byte            { return wCat(wULEB(uint64(len(s))), []byte(s)) }

const treerecDescribe = `{"name":"treerec","version":"0.1.0","abi":1,"embodiment":"test_raw","projector_slot":10,` +
	`"cameras":[{"key":"cam","delta_indices":[0],"height":64,"width":64}],` +
	`"state":[{"key":"s","dim":2,"delta_indices":[0]}],` +
	`"actions":[{"key":"a","dim":2,"rep":"absolute","type":"non_eef","format":"default"}],` +
	`"language":{"key":"instruction","min_chars":1,"max_chars":100},` +
	`"action_horizon":4,"max_state_dim":8,"max_action_dim":8,` +
	`"layout":{"name":"test","frame_order":["cam@0"],"vit_grid_thw":[1,4,4],"tokens_per_image":4,"l_max":16,"frame_aspect":[0.5,2],"frame_side":[16,1024]}}`

// treerecModule is a whole ABI v1 guest assembled by hand, as a non-Go
// toolchain emits one: gw_pre computes f(n) = f(n−1) + f(n−1) (2ⁿ calls,
// recursion and no loop anywhere) and gw_post holds one SIMD instruction
// (v128.const) when simd.
func treerecModule(n int32, simd bool) []byte {
	const okAt, descAt = 16, 64
	desc := append(make([]byte, 8), treerecDescribe...)
	packed := func(ptr, l int) []byte { return wSLEB(int64(ptr)<<32 | int64(l)) }
	types := wSec(1, wCat([]byte{5},
		[]byte{0x60, 0, 0},                   // t0 () -> ()
		[]byte{0x60, 1, 0x7F, 1, 0x7F},       // t1 (i32) -> i32
		[]byte{0x60, 1, 0x7F, 0},             // t2 (i32) -> ()
		[]byte{0x60, 0, 1, 0x7E},             // t3 () -> i64
		[]byte{0x60, 2, 0x7F, 0x7F, 1, 0x7E}, // t4 (i32,i32) -> i64
	))
	funcs := wSec(3, []byte{9, 0, 0, 1, 2, 3, 4, 4, 4, 1})
	mem := wSec(5, []byte{1, 0x00, 2})
	exports := wSec(7, wCat([]byte{9},
		wName("gw_abi_v1"), []byte{0, 0},
		wName("_initialize"), []byte{0, 1},
		wName("gw_alloc"), []byte{0, 2},
		wName("gw_free"), []byte{0, 3},
		wName("gw_describe"), []byte{0, 4},
		wName("gw_init"), []byte{0, 5},
		wName("gw_pre"), []byte{0, 6},
		wName("gw_post"), []byte{0, 7},
		wName("memory"), []byte{2, 0},
	))
	empty := wBody(0x0B)
	alloc := wBody(wCat([]byte{0x41}, wSLEB(65536), []byte{0x0B})...)
	describe := wBody(wCat([]byte{0x42}, packed(descAt, len(desc)), []byte{0x0B})...)
	ok := wBody(wCat([]byte{0x42}, packed(okAt, 8), []byte{0x0B})...)
	pre := wBody(wCat([]byte{0x41}, wSLEB(int64(n)), []byte{0x10, 8, 0x1A, 0x42}, packed(okAt, 8), []byte{0x0B})...)
	post := ok
	if simd {
		post = wBody(wCat([]byte{0xFD, 0x0C}, make([]byte, 16), []byte{0x1A, 0x42}, packed(okAt, 8), []byte{0x0B})...) // v128.const 0; drop
	}
	rec := wBody(0x20, 0, 0x45, 0x04, 0x40, 0x41, 1, 0x0F, 0x0B,
		0x20, 0, 0x41, 1, 0x6B, 0x10, 8,
		0x20, 0, 0x41, 1, 0x6B, 0x10, 8,
		0x6A, 0x0B)
	code := wSec(10, wCat([]byte{9}, empty, empty, alloc, empty, describe, ok, pre, post, rec))
	data := wSec(11, wCat([]byte{2},
		[]byte{0, 0x41}, wSLEB(okAt), []byte{0x0B}, wULEB(8), make([]byte, 8),
		[]byte{0, 0x41}, wSLEB(descAt), []byte{0x0B}, wULEB(uint64(len(desc))), desc))
	return wCat([]byte("\x00asm\x01\x00\x00\x00"), types, funcs, mem, exports, code, data)
}

// TestRecursionDeadline: a guest that recurses without looping (2³⁰ calls:
// seconds of native code) is stopped at its deadline, with or without SIMD
// in the module. With SIMD the rewrite used to refuse the module and the
// fallback (wazero checks at loop headers only) let the call run to its
// end, stalling every goroutine of the process meanwhile.
func TestRecursionDeadline(t *testing.T) {
	for _, simd := range []bool{false, true} {
		wasm := treerecModule(29, simd)
		sum := sha256.Sum256(wasm)
		m := &plugins.Manifest{Name: "treerec", Version: "0.1.0", ABI: 1, SHA256: hex.EncodeToString(sum[:]),
			Embodiments: []string{"test_raw"}, Limits: plugins.Limits{TimeoutMS: 50, PoolSize: 1}}
		ctx := context.Background()
		p, err := plugins.New(ctx, m, wasm, plugintest.DefaultOptions(t)...)
		require.NoError(t, err)
		assert.Equal(t, plugins.DeadlineStopFlag, p.DeadlineMode(), "simd %v", simd)
		start := time.Now()
		_, err = p.Pre(ctx, preIn("ok", 1, 1))
		require.ErrorIs(t, err, plugins.ErrTimeout, "simd %v", simd)
		assert.Less(t, time.Since(start), 10*time.Second, "simd %v", simd)
		require.NoError(t, p.Close(ctx))
	}
}
