//go:build !abiv2 && !noabi

package main

//go:wasmexport gw_abi_v1
func gwABIv1() {}
