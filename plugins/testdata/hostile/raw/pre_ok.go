//go:build !wrongsig

package main

//go:wasmexport gw_pre
func gwPre(ptr, n uint32) uint64 { return pre(ptr, n) }
