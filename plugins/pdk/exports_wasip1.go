//go:build wasip1

package pdk

import (
	"unsafe"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// allocs keeps every buffer handed to the host alive (and findable by its
// address) until gw_free.
var allocs = map[uint32][]uint64{}

// result keeps the last result alive until the next export call.
var result []byte

// lastPtr/lastBuf are the most recent gw_alloc buffer: the host reuses one
// input buffer for every call, so input usually finds it without the map.
// lastBytes is lastBuf as bytes (made once: unsafe.Slice is a call in a
// wasm guest).
var (
	lastPtr   uint32
	lastBuf   []uint64
	lastBytes []byte
)

//go:wasmexport gw_abi_v1
func gwABIv1() {}

//go:wasmexport gw_alloc
func gwAlloc(size uint32) uint32 {
	buf := make([]uint64, (uint64(size)+7)/8+1)
	p := uint32(uintptr(unsafe.Pointer(&buf[0])))
	allocs[p] = buf
	lastPtr, lastBuf, lastBytes = p, buf, asBytes(buf)
	return p
}

//go:wasmexport gw_free
func gwFree(ptr uint32) {
	delete(allocs, ptr)
	if ptr == lastPtr {
		lastPtr, lastBuf, lastBytes = 0, nil, nil
	}
}

//go:wasmexport gw_describe
func gwDescribe() uint64 { return pack(mustRunner().Describe()) }

//go:wasmexport gw_init
func gwInit(ptr, n uint32) uint64 {
	in, bad := input(ptr, n)
	if bad != nil {
		return pack(bad)
	}
	return pack(mustRunner().Init(in))
}

//go:wasmexport gw_pre
func gwPre(ptr, n uint32) uint64 {
	in, bad := input(ptr, n)
	if bad != nil {
		return pack(bad)
	}
	return pack(mustRunner().Pre(in))
}

//go:wasmexport gw_post
func gwPost(ptr, n uint32) uint64 {
	in, bad := input(ptr, n)
	if bad != nil {
		return pack(bad)
	}
	return pack(mustRunner().Post(in))
}

//go:wasmexport gw_reencode
func gwReencode(ptr, n uint32) uint64 {
	in, bad := input(ptr, n)
	if bad != nil {
		return pack(bad)
	}
	return pack(mustRunner().Reencode(in))
}

func mustRunner() *Runner {
	if runner == nil {
		panic("pdk: no plugin registered (call pdk.Register from an init function)")
	}
	return runner
}

// input returns the n bytes at ptr, which must be the start of a buffer
// from gw_alloc holding at least n bytes.
func input(ptr, n uint32) ([]byte, []byte) {
	if ptr == lastPtr && ptr != 0 && uint64(n) <= uint64(len(lastBytes)) {
		return lastBytes[:n], nil
	}
	buf, ok := allocs[ptr]
	if !ok || uint64(n) > 8*uint64(len(buf)) {
		return nil, mustRunner().fail(abi.StatusPluginError, Errorf(abi.CodePluginError, "", "input [%#x, +%d) is not inside a gw_alloc buffer", ptr, n))
	}
	return asBytes(buf)[:n], nil
}

// asBytes returns buf's memory as bytes.
func asBytes(buf []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 8*len(buf))
}

func pack(b []byte) uint64 {
	result = b
	if len(b) == 0 {
		return 0
	}
	return uint64(uint32(uintptr(unsafe.Pointer(&b[0]))))<<32 | uint64(uint32(len(b)))
}

//go:wasmimport gw_host log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

// Log sends msg to the host's structured logger at level (abi.LogDebug …
// abi.LogError), tagged with the plugin's name. The host caps the size.
func Log(level int32, msg string) {
	if len(msg) == 0 {
		return
	}
	hostLog(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}
