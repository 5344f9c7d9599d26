//go:build amd64 && !purego

package image

import "golang.org/x/sys/cpu"

// useAVX2Resize selects the AVX2 group kernels of the area-mode linear
// and torch bicubic passes (tests switch it off to cover the SSE paths).
var useAVX2Resize = cpu.X86.HasAVX2

// hgroupI16AVX2 is implemented in hgroup_amd64.s.
//
//go:noescape
func hgroupI16AVX2(dst *int16, src *byte, off *int32, shuf *byte, w *int16, nblk int)

// hgroupU8AVX2 is implemented in hgroup_amd64.s.
//
//go:noescape
func hgroupU8AVX2(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, shuf *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)

// vlinearI16AVX2 is implemented in hgroup_amd64.s.
//
//go:noescape
func vlinearI16AVX2(dst *byte, h0, h1 *int16, n int, b0, b1 int32)

// hgroupI16BcastAVX2 is implemented in hgroup_amd64.s.
//
//go:noescape
func hgroupI16BcastAVX2(dst *int16, src *byte, off *int32, shuf *byte, w *int16, nblk int)

// hgroupU8JoinedAVX2 is implemented in hgroup_amd64.s.
//
//go:noescape
func hgroupU8JoinedAVX2(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, shuf *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)

// groupRuns calls fn(b0, b1, paired) for consecutive block ranges covering
// [0, t.nblk): the paired runs of t (when usePairedWindows) and the ranges
// between them.
func groupRuns(t *groupTab, fn func(b0, b1 int, paired bool)) {
	b := 0
	if usePairedWindows {
		for k := 0; k+1 < len(t.runs); k += 2 {
			r0, r1 := int(t.runs[k]), int(t.runs[k+1])
			if r0 > b {
				fn(b, r0, false)
			}
			fn(r0, r1, true)
			b = r1
		}
	}
	if b < t.nblk {
		fn(b, t.nblk, false)
	}
}

// groupKernels reports whether the group kernels may run.
func groupKernels() bool { return useAVX2Resize && !forceScalar }

// hgroupI16 runs the int16 group kernel on one row: h receives
// 16·t.nblk values; row must hold the whole source row (t.off windows).
func hgroupI16(h []int16, row []uint8, t *groupTab) {
	if len(h) < 16*t.nblk || len(row) < 16 {
		panic("image: hgroupI16: short buffers")
	}
	groupRuns(t, func(b0, b1 int, paired bool) {
		kern := hgroupI16AVX2
		if paired {
			kern = hgroupI16BcastAVX2
		}
		kern(&h[16*b0], &row[0], &t.off[4*b0], &t.shuf[64*b0], &t.w[32*b0], b1-b0)
	})
}

// hgroupU8 runs the uint8 group kernel on rows rows: row y reads src[y·sstride:]
// and writes dst[y·dstride:]. Bounds were established when t was built
// (windows inside rowBytes, blocks inside width); the caller checks that
// the buffers hold rows rows.
func hgroupU8(dst []uint8, dstride int, src []uint8, sstride, rows int, t *groupTab, prec uint, init int32) {
	if rows <= 0 {
		return
	}
	groupRuns(t, func(b0, b1 int, paired bool) {
		kern := hgroupU8AVX2
		if paired {
			kern = hgroupU8JoinedAVX2
		}
		e := t.e
		kern(&dst[0], dstride, &src[0], sstride, rows, &t.off[e*b0], &t.shuf[16*e*b0], &t.w[8*e*t.np*b0], &t.bdst[b0],
			b1-b0, t.np, t.pstride, uint64(prec), init)
	})
}

// useAVX512Resize selects the AVX-512 (F, BW, VBMI) kernels; tests switch
// it off to cover the AVX2 ones.
var useAVX512Resize = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI

// zgroupU8SharedAVX512 is implemented in zgroup_amd64.s.
//
//go:noescape
func zgroupU8SharedAVX512(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, idx *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)

// zgroupU8Shared2AVX512 is implemented in zgroup_amd64.s.
//
//go:noescape
func zgroupU8Shared2AVX512(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, idx *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)

// zgroupI16AVX512 is implemented in zgroup_amd64.s.
//
//go:noescape
func zgroupI16AVX512(dst *int16, src *byte, off *int32, idx *byte, w *int16, nblk int)

// zgroupI16SharedAVX512 is implemented in zgroup_amd64.s.
//
//go:noescape
func zgroupI16SharedAVX512(dst *int16, src *byte, off *int32, idx *byte, w *int16, nblk int)

// zgroupI16Shared2AVX512 is implemented in zgroup_amd64.s.
//
//go:noescape
func zgroupI16Shared2AVX512(dst0, dst1 *int16, src0, src1 *byte, off *int32, idx *byte, w *int16, nblk int)

// zgroupI16x2 is zgroupI16 on two rows at once (row0 → h0, row1 → h1); it
// reports false, doing nothing, when t has no shared-window kernel.
func zgroupI16x2(h0, h1 []int16, row0, row1 []uint8, t *zgroupTab) bool {
	if !t.shared || !useSharedWindow {
		return false
	}
	if len(h0) < 32*t.nblk || len(h1) < 32*t.nblk || len(row0) < 64 || len(row1) < 64 {
		panic("image: zgroupI16x2: short buffers")
	}
	zgroupI16Shared2AVX512(&h0[0], &h1[0], &row0[0], &row1[0], &t.off[0], &t.idx[0], &t.w[0], t.nblk)
	return true
}

// zgroupU8AVX512 is implemented in zgroup_amd64.s.
//
//go:noescape
func zgroupU8AVX512(dst *byte, dstride int, src *byte, sstride int, rows int, off *int32, idx *byte, w *int16, bdst *int32, nblk, np, pstride int, prec uint64, init int32)

// vlinearI16AVX512 is implemented in zgroup_amd64.s.
//
//go:noescape
func vlinearI16AVX512(dst *byte, h0, h1 *int16, n int, b0, b1 int32)

// zgroupKernels reports whether the AVX-512 kernels may run.
func zgroupKernels() bool { return useAVX512Resize && useAVX2Resize && !forceScalar }

// zgroupI16 is hgroupI16 for a zgroupTab (h receives 32·t.nblk values).
func zgroupI16(h []int16, row []uint8, t *zgroupTab) {
	if len(h) < 32*t.nblk || len(row) < 64 {
		panic("image: zgroupI16: short buffers")
	}
	if t.shared && useSharedWindow {
		zgroupI16SharedAVX512(&h[0], &row[0], &t.off[0], &t.idx[0], &t.w[0], t.nblk)
		return
	}
	zgroupI16AVX512(&h[0], &row[0], &t.off[0], &t.idx[0], &t.w[0], t.nblk)
}

// zgroupU8 is hgroupU8 for a zgroupTab.
func zgroupU8(dst []uint8, dstride int, src []uint8, sstride, rows int, t *zgroupTab, prec uint, init int32) {
	if rows <= 0 {
		return
	}
	if t.shared { // contiguous slot layout: only these kernels can run it
		if even := rows &^ 1; even > 0 {
			zgroupU8Shared2AVX512(&dst[0], dstride, &src[0], sstride, even, &t.off[0], &t.idx[0], &t.w[0], &t.bdst[0], t.nblk, t.np, t.pstride, uint64(prec), init)
		}
		if rows&1 != 0 {
			y := rows - 1
			zgroupU8SharedAVX512(&dst[y*dstride], dstride, &src[y*sstride], sstride, 1, &t.off[0], &t.idx[0], &t.w[0], &t.bdst[0], t.nblk, t.np, t.pstride, uint64(prec), init)
		}
		return
	}
	zgroupU8AVX512(&dst[0], dstride, &src[0], sstride, rows, &t.off[0], &t.idx[0], &t.w[0], &t.bdst[0], t.nblk, t.np, t.pstride, uint64(prec), init)
}

// vlinear runs the vertical area-mode linear pass on len(d) ≥ 32 outputs
// with the widest kernel available.
func vlinear(d []uint8, h0, h1 []int16, b0, b1 int32) {
	n := len(d)
	if n < 32 || len(h0) < n || len(h1) < n {
		panic("image: vlinear: short buffers")
	}
	if n >= 64 && zgroupKernels() {
		vlinearI16AVX512(&d[0], &h0[0], &h1[0], n, b0, b1)
		return
	}
	vlinearI16AVX2(&d[0], &h0[0], &h1[0], n, b0, b1)
}
