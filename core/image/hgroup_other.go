//go:build !amd64 || purego

package image

// useAVX2Resize is false: this build has no group kernels.
var useAVX2Resize = false

func groupKernels() bool { return false }

func hgroupI16(h []int16, row []uint8, t *groupTab) { panic("image: no group kernels") }

func hgroupU8(dst []uint8, dstride int, src []uint8, sstride, rows int, t *groupTab, prec uint, init int32) {
	panic("image: no group kernels")
}

// useAVX512Resize is false: this build has no AVX-512 kernels.
var useAVX512Resize = false

func zgroupKernels() bool { return false }

func zgroupI16(h []int16, row []uint8, t *zgroupTab) { panic("image: no group kernels") }

func zgroupI16x2(h0, h1 []int16, row0, row1 []uint8, t *zgroupTab) bool { return false }

func zgroupU8(dst []uint8, dstride int, src []uint8, sstride, rows int, t *zgroupTab, prec uint, init int32) {
	panic("image: no group kernels")
}

func vlinear(d []uint8, h0, h1 []int16, b0, b1 int32) { panic("image: no group kernels") }
