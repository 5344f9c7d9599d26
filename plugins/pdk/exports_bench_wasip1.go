//go:build wasip1 && gwbench

package pdk

import (
	"runtime"

	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

// Extra exports for latency breakdowns (build tag gwbench, never in a
// shipped plugin; the host ignores exports it does not know). They let a
// benchmark time each layer of a call through raw wazero.

// gw_bench_nop has gw_pre's signature and does only the input lookup and
// result packing of a real export.
//
//go:wasmexport gw_bench_nop
func gwBenchNop(ptr, n uint32) uint64 {
	in, bad := input(ptr, n)
	if bad != nil {
		return pack(bad)
	}
	return pack(in[:8])
}

var benchDec envelope.Envelope

// gw_bench_decode decodes the input envelope in full (not reusing the
// previous call's layout) and nothing else.
//
//go:wasmexport gw_bench_decode
func gwBenchDecode(ptr, n uint32) uint64 {
	in, bad := input(ptr, n)
	if bad != nil {
		return pack(bad)
	}
	if err := envelope.DecodeNoReuseForBench(&benchDec, in); err != nil {
		panic(err)
	}
	return pack(in[:8])
}

// gw_bench_logic_pre / gw_bench_logic_post rerun the plugin's Pre/Post on
// the Runner's last decoded input (the host must not have overwritten the
// input buffer since).
//
//go:wasmexport gw_bench_logic_pre
func gwBenchLogicPre() {
	if _, err := registered.Pre(&mustRunner().obs); err != nil {
		panic(err)
	}
}

//go:wasmexport gw_bench_logic_post
func gwBenchLogicPost() {
	if _, err := registered.Post(&mustRunner().post); err != nil {
		panic(err)
	}
}

// gw_bench_mallocs returns the guest runtime's cumulative heap allocation
// count (low 32 bits) and GC count (high 32 bits).
//
//go:wasmexport gw_bench_mallocs
func gwBenchMallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return uint64(m.NumGC)<<32 | uint64(uint32(m.Mallocs))
}

var benchActs = &Actions{Groups: []ActionOutput{
	{Key: "eef_9d", Horizon: 40, Dim: 9, Values: make([]float32, 360)},
	{Key: "gripper_position", Horizon: 40, Dim: 1, Values: make([]float32, 40)},
	{Key: "joint_position", Horizon: 40, Dim: 7, Values: make([]float32, 280)},
}}

// gw_bench_encode_post encodes a DROID-shaped post result (3 groups,
// 40×17 values) as Runner.Post does.
//
//go:wasmexport gw_bench_encode_post
func gwBenchEncodePost() uint64 { return pack(mustRunner().encodeActions(benchActs)) }

// gw_bench_encode_pre encodes a 132-value pre result as Runner.Pre does.
//
//go:wasmexport gw_bench_encode_pre
func gwBenchEncodePre() uint64 { return pack(mustRunner().encodeState(benchState[:])) }

var benchState [132]float32

// gw_bench_decode_checked decodes the input with the envelope's checked
// (one branch per condition) path only, for A/B against gw_bench_decode.
//
//go:wasmexport gw_bench_decode_checked
func gwBenchDecodeChecked(ptr, n uint32) uint64 {
	in, bad := input(ptr, n)
	if bad != nil {
		return pack(bad)
	}
	if err := envelope.DecodeCheckedForBench(&benchDec, in); err != nil {
		panic(err)
	}
	return pack(in[:8])
}

// gw_bench_extract_pre / gw_bench_extract_post decode the input and fill
// the Runner's Observation / PostInput, without calling the plugin.
//
//go:wasmexport gw_bench_extract_pre
func gwBenchExtractPre(ptr, n uint32) uint64 {
	in, _ := input(ptr, n)
	if res := mustRunner().observation(in); res != nil {
		panic("extract")
	}
	return pack(in[:8])
}

//go:wasmexport gw_bench_extract_post
func gwBenchExtractPost(ptr, n uint32) uint64 {
	in, _ := input(ptr, n)
	if res := mustRunner().postInput(in); res != nil {
		panic("extract")
	}
	return pack(in[:8])
}

var benchReuse envelope.Envelope

// gw_bench_decode_reuse decodes the input with Decode as the Runner does
// (after the first call on one buffer and layout: the attributes only).
//
//go:wasmexport gw_bench_decode_reuse
func gwBenchDecodeReuse(ptr, n uint32) uint64 {
	in, _ := input(ptr, n)
	if err := benchReuse.Decode(in); err != nil {
		panic(err)
	}
	return pack(in[:8])
}

// gw_bench_attrs is requestAttrs alone on gw_bench_decode_reuse's last
// decode.
//
//go:wasmexport gw_bench_attrs
func gwBenchAttrs() uint32 {
	id, emb, ins, dt := requestAttrs(&benchReuse)
	return uint32(len(id) + len(emb) + len(ins) + len(dt))
}
