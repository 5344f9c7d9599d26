//go:build abiv2

package main

//go:wasmexport gw_abi_v2
func gwABIv2() {}
