// Command raw is a hostile test guest written against the bare ABI (no
// PDK). Build tags select the defect:
//
//	(none)    valid (pre halves state.s, post copies action_pred[:4, :2]);
//	          pre returns an out-of-range result pointer when the
//	          instruction is "badptr" and an oversized length for "badlen"
//	wrongsig  gw_pre has signature (i32) -> i64
//	abiv2     exports gw_abi_v2 instead of gw_abi_v1
//	noabi     exports no ABI marker at all
//	reencodefeature  lists the reencode feature without exporting gw_reencode
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared [-tags wrongsig] ./plugins/testdata/hostile/raw
package main

import (
	"encoding/binary"
	"unsafe"

	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

func main() {}

var (
	allocs = map[uint32][]uint64{}
	result []byte
	dec    envelope.Envelope
	b      envelope.Builder
	state  [8]float32
	act    [8]float32
)

const describeJSON = `{"name":"raw","version":"0.1.0","abi":1,"embodiment":"test_raw","projector_slot":10,` +
	`"cameras":[{"key":"cam","delta_indices":[0],"height":64,"width":64}],` +
	`"state":[{"key":"s","dim":2,"delta_indices":[0]}],` +
	`"actions":[{"key":"a","dim":2,"rep":"absolute","type":"non_eef","format":"default"}],` +
	`"language":{"key":"instruction","min_chars":1,"max_chars":100},` +
	`"action_horizon":4,"max_state_dim":8,"max_action_dim":8,` +
	`"layout":{"name":"test","frame_order":["cam@0"],"vit_grid_thw":[1,4,4],"tokens_per_image":4,"l_max":16,"frame_aspect":[0.5,2],"frame_side":[16,1024]}` +
	features + `}`

//go:wasmexport gw_alloc
func gwAlloc(size uint32) uint32 {
	buf := make([]uint64, size/8+1)
	p := uint32(uintptr(unsafe.Pointer(&buf[0])))
	allocs[p] = buf
	return p
}

//go:wasmexport gw_free
func gwFree(ptr uint32) { delete(allocs, ptr) }

func ok(body []byte) uint64 {
	result = make([]byte, 8+len(body))
	copy(result[8:], body)
	return pack(result)
}

func pack(r []byte) uint64 {
	return uint64(uint32(uintptr(unsafe.Pointer(&r[0]))))<<32 | uint64(uint32(len(r)))
}

func input(ptr, n uint32) []byte {
	buf := allocs[ptr]
	return unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 8*len(buf))[:n]
}

//go:wasmexport gw_describe
func gwDescribe() uint64 { return ok([]byte(describeJSON)) }

//go:wasmexport gw_init
func gwInit(ptr, n uint32) uint64 { return ok(nil) }

func pre(ptr, n uint32) uint64 {
	if err := dec.Decode(input(ptr, n)); err != nil {
		panic(err)
	}
	switch ins, _ := dec.Attr("instruction"); ins {
	case "badptr":
		return uint64(0xFFFFFF00)<<32 | 64
	case "badlen":
		return uint64(uint32(uintptr(unsafe.Pointer(&state[0]))))<<32 | 0x7FFFFFF0
	case "badstatus":
		r := make([]byte, 8)
		binary.LittleEndian.PutUint32(r, 7)
		result = r
		return pack(r)
	}
	if t := dec.Tensor("state.s"); t != nil {
		if v, err := t.Float64s(); err == nil && len(v) == 2 {
			state[0], state[1] = float32(v[0]*0.5), float32(v[1]*0.5)
		}
	}
	b.Reset()
	b.Float32("state", []int64{8}, state[:])
	out, _ := b.Bytes()
	return ok(out)
}

//go:wasmexport gw_post
func gwPost(ptr, n uint32) uint64 {
	if err := dec.Decode(input(ptr, n)); err != nil {
		panic(err)
	}
	if t := dec.Tensor("action_pred"); t != nil && len(t.Dims) == 2 && t.Dims[0] >= 4 && t.Dims[1] >= 2 {
		v, _ := t.Float32s()
		d := int(t.Dims[1])
		for k := 0; k < 4; k++ {
			act[2*k], act[2*k+1] = v[k*d], v[k*d+1]
		}
	}
	b.Reset()
	b.Float32("action.a", []int64{4, 2}, act[:])
	out, _ := b.Bytes()
	return ok(out)
}
