//go:build !amd64 || purego

package inflate

var useFastAsm = false

const (
	fastLimit      = 0
	fastEOB        = 1
	fastBadLit     = 2
	fastBadDist    = 3
	fastDistTooFar = 4
)

// huffmanAsm: no assembly loop on this platform.
func huffmanAsm(lt *[litTableSize]uint32, dt *[distTableSize]uint32, src, dst []byte,
	bitbuf uint64, nbits uint, in, out int) (status int, ok bool, bitbuf2 uint64, nbits2 uint, in2, out2 int) {
	return 0, false, bitbuf, nbits, in, out
}
