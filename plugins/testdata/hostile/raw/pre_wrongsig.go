//go:build wrongsig

package main

//go:wasmexport gw_pre
func gwPre(ptr uint32) uint64 { return pre(ptr, 0) }
