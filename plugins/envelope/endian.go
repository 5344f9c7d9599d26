package envelope

import "unsafe"

// The zero-copy views in this package assume a little-endian host, as the
// wire format is little-endian. Go's wasm, amd64 and arm64 ports all are;
// a big-endian port fails loudly at start-up rather than silently.
func init() {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) != 1 {
		panic("envelope: big-endian platforms are not supported")
	}
}
