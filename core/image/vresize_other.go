//go:build !amd64 || purego

package image

// vresizeRowFast has no SIMD version on this architecture.
func vresizeRowFast(d []uint8, h0, h1 []int32, b0, b1 int32) int { return 0 }

// hresizeRGBFast has no SIMD version on this architecture.
func hresizeRGBFast(d []uint8, buf []uint8, t *bicubicTab) int { return 0 }

// hlinearRGBFast has no SIMD version on this architecture.
func hlinearRGBFast(h []int32, buf []uint8, xofs []int32, w []int16, xmax int) int { return 0 }
