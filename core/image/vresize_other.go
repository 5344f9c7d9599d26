//go:build !amd64 || purego

package image

// vresizeRowFast has no SIMD version on this architecture.
func vresizeRowFast(d []uint8, h0, h1 []int32, b0, b1 int32) int { return 0 }

// hresizeRGBFast has no SIMD version on this architecture.
func hresizeRGBFast(d []uint8, buf []uint8, t *bicubicTab) int { return 0 }

// hlinearRGBFast has no SIMD version on this architecture.
func hlinearRGBFast(h []int32, buf []uint8, xofs []int32, w []int16, xmax int) int { return 0 }

// paethFast has no SIMD version on this architecture.
func paethFast(cur, prev []uint8, bpp int) bool { return false }

// simdAvailable reports whether this build has the SIMD kernels.
const simdAvailable = false

// paeth2Fast has no SIMD version on this architecture.
func paeth2Fast(cur0, cur1, prev []uint8, bpp int) bool { return false }

// patchifyFast has no SIMD version on this architecture.
func patchifyFast(out []float32, pix []uint8, stride int, lut *NormLUT) bool { return false }

// paeth4Fast has no SIMD version on this architecture.
func paeth4Fast(cur0, cur1, cur2, cur3, prev []uint8, bpp int) bool { return false }
