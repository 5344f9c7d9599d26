//go:build amd64 && !purego

package image

import (
	"math"

	"golang.org/x/sys/cpu"
)

// patchify16x2SSE is implemented in patchify_amd64.s.
//
//go:noescape
func patchify16x2SSE(out *float32, pix *byte, stride int, lut *NormLUT)

// patchify16x2AVX512 is implemented in patchify_amd64.s.
//
//go:noescape
func patchify16x2AVX512(out *float32, pix *byte, stride int, idx *[3][64]byte, sub, div *[3]float32)

// patchify16x2AVX2 is implemented in patchify_amd64.s.
//
//go:noescape
func patchify16x2AVX2(out *float32, pix *byte, stride int, masks *[6][32]byte, sub, div, rcp *[3]float32, fma bool)

// hasPatchifyAVX2 selects the AVX2 kernel (VPSHUFB deinterleave; FMA for
// the division-free normalisation) where AVX-512 VBMI is missing.
var hasPatchifyAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// rgbPick2 are the VPSHUFB masks of patchify16x2AVX2: entry c picks
// channel c of pixels 0–3 | 4–7 (lanes loaded from bytes 0 and 12 of the
// patch row) into zero-extended dwords, entry 3+c that of pixels 8–11 |
// 12–15 (lanes loaded from bytes 24 and 32).
var rgbPick2 = func() (t [6][32]byte) {
	for c := range 3 {
		for k := range 4 {
			for lane := range 2 {
				for _, e := range []int{c, 3 + c} {
					d := t[e][16*lane+4*k : 16*lane+4*k+4]
					d[0], d[1], d[2], d[3] = byte(3*k+c), 0x80, 0x80, 0x80
				}
			}
			t[3+c][16+4*k] = byte(4 + 3*k + c)
		}
	}
	return t
}()

// normFMAExact reports whether patchify16x2AVX2's division-free
// normalisation gives exactly l.V on this CPU: it runs the kernel on a
// patch that holds every sample value 0..255 in every channel and
// compares the bits, so the check is exhaustive.
func normFMAExact(l *NormLUT) bool {
	if !hasPatchifyAVX2 {
		return false
	}
	var pix [16 * 48]uint8
	for i := range 256 {
		for c := range 3 {
			pix[(i/16)*48+(i%16)*3+c] = uint8(i + 85*c)
		}
	}
	var out [3 * 2 * 256]float32
	patchify16x2AVX2(&out[0], &pix[0], 48, &rgbPick2, &l.Sub, &l.Div, &l.rcp, true)
	for c := range 3 {
		for i := range 256 {
			want := math.Float32bits(l.V[c][uint8(i+85*c)])
			if math.Float32bits(out[c*512+i]) != want || math.Float32bits(out[c*512+256+i]) != want {
				return false
			}
		}
	}
	return true
}

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
// The AVX2 kernel streams its stores (VMOVNTPS) when out is 32-byte
// aligned, as a pixel_values buffer from make is: the 11 MB of a DROID
// request are written once and read once by the vision stage, and in
// serving the model's weights evict them between requests. On a Zen 3 VM
// (EPYC, AVX2) the four frames took 2.1–2.4 ms cold and 1.3–1.5 hot with
// cached stores, 1.4–1.6 and 1.3–1.5 streaming (BenchmarkPatchifyKernels,
// one thread); unaligned rows store cached. The AVX-512 and SSE kernels
// store cached: where they were measured the two cost the same.
func patchifyFast(out []float32, pix []uint8, stride int, lut *NormLUT) bool {
	if forceScalar || len(out) < 3*2*256 || len(pix) < 15*stride+48 {
		return false
	}
	switch {
	case hasPatchifyAVX512 && !forceNoAVX512Patchify:
		patchify16x2AVX512(&out[0], &pix[0], stride, &rgbPick, &lut.Sub, &lut.Div)
	case hasPatchifyAVX2 && !forceNoAVX2Patchify:
		patchify16x2AVX2(&out[0], &pix[0], stride, &rgbPick2, &lut.Sub, &lut.Div, &lut.rcp, lut.fma && !forceNoFMANorm)
	default:
		patchify16x2SSE(&out[0], &pix[0], stride, lut)
	}
	return true
}

// forceNoAVX512Patchify makes patchifyFast use the AVX2 kernel, and
// forceNoAVX2Patchify with it the SSE kernel; forceNoFMANorm makes the
// AVX2 kernel divide (tests and benchmarks).
var forceNoAVX512Patchify, forceNoAVX2Patchify, forceNoFMANorm = false, false, false
