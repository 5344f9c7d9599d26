//go:build amd64 && !purego

package image

import "golang.org/x/sys/cpu"

// patchify16x2SSE is implemented in patchify_amd64.s.
//
//go:noescape
func patchify16x2SSE(out *float32, pix *byte, stride int, lut *NormLUT)

// patchify16x2AVX512 is implemented in patchify_amd64.s.
//
//go:noescape
func patchify16x2AVX512(out *float32, pix *byte, stride int, idx *[3][64]byte, sub, div *[3]float32)

// hasPatchifyAVX512 selects the AVX-512 VBMI kernel (VPERMB deinterleave).
var hasPatchifyAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI

// rgbPick are the VPERMB indices that gather channel c of 16 interleaved
// RGB pixels into the low 16 bytes.
var rgbPick = func() (t [3][64]byte) {
	for c := range 3 {
		for i := range 16 {
			t[c][i] = byte(3*i + c)
		}
	}
	return t
}()

// patchifyFast writes one pixel_values row like patchify16x2 with a SIMD
// kernel; it reports false (nothing written) when the inputs are too short.
// Stores are ordinary (cached): a reused
// pixel_values buffer stays in the last-level cache between requests, and
// when it does not they cost the same as streaming stores
// (BenchmarkPatchifyKernels).
func patchifyFast(out []float32, pix []uint8, stride int, lut *NormLUT) bool {
	if forceScalar || len(out) < 3*2*256 || len(pix) < 15*stride+48 {
		return false
	}
	if hasPatchifyAVX512 && !forceNoAVX512Patchify {
		patchify16x2AVX512(&out[0], &pix[0], stride, &rgbPick, &lut.Sub, &lut.Div)
		return true
	}
	patchify16x2SSE(&out[0], &pix[0], stride, lut)
	return true
}

// forceNoAVX512Patchify makes patchifyFast use the SSE kernel (tests).
var forceNoAVX512Patchify = false
