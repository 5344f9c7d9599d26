//go:build amd64 && !purego

package image

import "unsafe"

// patchify16x2NT is implemented in patchify_amd64.s.
//
//go:noescape
func patchify16x2NT(out *float32, pix *byte, stride int, lut *NormLUT)

// patchifyFast writes one pixel_values row like patchify16x2 with the
// streaming-store kernel; it reports false (nothing written) when the row is
// not 16-byte aligned or the inputs are too short.
func patchifyFast(out []float32, pix []uint8, stride int, lut *NormLUT) bool {
	if forceScalar || len(out) < 3*2*256 || len(pix) < 15*stride+48 || uintptr(unsafe.Pointer(&out[0]))&15 != 0 {
		return false
	}
	patchify16x2NT(&out[0], &pix[0], stride, lut)
	return true
}
