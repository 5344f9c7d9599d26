//go:build amd64 && !purego

package inflate

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useFastAsm selects the assembly fast loop (it uses BMI2 SHRX/BZHI);
// tests switch it off to cover the Go loop.
var useFastAsm = cpu.X86.HasBMI2

// fastState is the bit-buffer and buffer state shared with inflateFastBMI2
// (field offsets come from go_asm.h).
type fastState struct {
	bitbuf uint64
	nbits  uint64
	src    unsafe.Pointer // &src[0]
	in     unsafe.Pointer // &src[in]
	inEnd  unsafe.Pointer // &src[len(src)-inSlack]: last refill position
	dst    unsafe.Pointer // &dst[0]
	out    unsafe.Pointer // &dst[out]
	outEnd unsafe.Pointer // &dst[len(dst)-outSlack]: last symbol start
	lt     *uint32
	dt     *uint32
}

// inflateFastBMI2 is implemented in fast_amd64.s. It decodes symbols while
// in ≤ inEnd and out ≤ outEnd and returns one of the fast* statuses.
//
//go:noescape
func inflateFastBMI2(s *fastState) int

// Statuses of inflateFastBMI2.
const (
	fastLimit      = 0 // stopped at a limit, at a symbol boundary
	fastEOB        = 1 // end-of-block code consumed
	fastBadLit     = 2 // invalid literal/length code
	fastBadDist    = 3 // invalid distance code
	fastDistTooFar = 4 // distance beyond the start of the output
)

// huffmanAsm runs the assembly loop when the limits leave room for it and
// reports its status; ok is false when it did not run.
func huffmanAsm(lt *[litTableSize]uint32, dt *[distTableSize]uint32, src, dst []byte,
	bitbuf uint64, nbits uint, in, out int) (status int, ok bool, bitbuf2 uint64, nbits2 uint, in2, out2 int) {
	inLimit, outLimit := len(src)-inSlack, len(dst)-outSlack
	if !useFastAsm || in > inLimit || out > outLimit {
		return 0, false, bitbuf, nbits, in, out
	}
	s0 := unsafe.Pointer(unsafe.SliceData(src))
	d0 := unsafe.Pointer(unsafe.SliceData(dst))
	st := fastState{
		bitbuf: bitbuf,
		nbits:  uint64(nbits),
		src:    s0,
		in:     unsafe.Add(s0, in),
		inEnd:  unsafe.Add(s0, inLimit),
		dst:    d0,
		out:    unsafe.Add(d0, out),
		outEnd: unsafe.Add(d0, outLimit),
		lt:     &lt[0],
		dt:     &dt[0],
	}
	status = inflateFastBMI2(&st)
	return status, true, st.bitbuf, uint(st.nbits),
		int(uintptr(st.in) - uintptr(s0)), int(uintptr(st.out) - uintptr(d0))
}
