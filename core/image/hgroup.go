package image

import "unsafe"

// This file lays out horizontal resampling passes for the "group" kernels
// (AVX2: hgroup_amd64.s, AVX-512: zgroup_amd64.s), shared by the area-mode
// linear enlarge and the torch bicubic. A horizontal pass here is: every
// output channel j of a row is Σ_p Σ_t src[idx(j)+p·pstride+t·tstride]·
// w(j,p,t) over np tap pairs p and two taps t per pair, with integer
// weights that fit int16. The source bytes are 0..255, so pmaddwd on
// zero-extended bytes forms exactly the scalar int32 products and pair
// sums. The AVX2 kernels take output channels in groups of four. Group g
// reads, for tap pair p, the 16 source bytes at off[g]+p·pstride, picks
// its eight bytes with one pshufb mask (the same for every pair: the taps
// of pair p sit p·pstride bytes after those of pair 0), zero-extends them
// to words and multiplies them by eight int16 weights with pmaddwd, which
// leaves the four int32 sums of the group.
//
// Groups are grouped again into blocks of E = 4 or 8 (16 or 32 outputs),
// and within a block stored in the order the kernel packs them (see perm4
// and perm8), so that the saturating packs of the kernel leave the outputs
// in natural order without a cross-lane permute.

// groupTab is the table of one horizontal pass for the group kernels.
// The zero value is "not usable" (ok false).
type groupTab struct {
	ok      bool
	np      int // tap pairs
	pstride int // bytes between the windows of consecutive pairs
	e       int // entries (groups) per block: 4 or 8
	nblk    int
	off     []int32 // per entry: row byte offset of the pair-0 window
	shuf    []uint8 // per entry: 16 pshufb indices
	w       []int16 // per block, pair, entry: 8 weights
	bdst    []int32 // per block: first output channel (overlap blocks)
	// runs lists the blocks whose ymm read one load each (pairedWindow):
	// half-open ranges [runs[2k], runs[2k+1]) in ascending order.
	runs []int32
}

// pairedDelta is the distance between the two windows of one ymm in a
// paired block: 16 for the uint8 kernel (e = 8: lane 1 holds group g+4,
// about 16 bytes further, and one 32-byte load fills both lanes), 0 for
// the int16 kernel (e = 4: lane 1 holds group g+2, close enough for one
// 16-byte window broadcast to both lanes).
func pairedDelta(e int) int {
	if e == 8 {
		return 16
	}
	return 0
}

// usePairedWindows selects the AVX2 kernels that read a paired block's
// ymm with one load (hgroupU8JoinedAVX2, hgroupI16BcastAVX2); tests switch
// it off to cover the two-window kernels on the same tables (a paired
// block's entries are valid for both). Read when a kernel runs.
var usePairedWindows = true

// useSharedWindow selects the AVX-512 tables and kernels in which zmm
// share 64-byte windows (zgroupTab.shared); tests switch it off to cover
// the window-per-zmm ones. Read when a uint8 table is built and when an
// int16 kernel runs.
var useSharedWindow = true

// perm4 and perm8 map kernel entry order to group order inside a block:
// the int16 kernel packs ymm{e0|e1} with ymm{e2|e3} (lanes g0,g1 | g2,g3),
// the uint8 kernel packs four ymm twice (lanes g0..g3 | g4..g7).
var (
	perm4 = [4]int{0, 2, 1, 3}
	perm8 = [8]int{0, 4, 1, 5, 2, 6, 3, 7}
)

// groupSpec describes one pass for groupTab.build and zgroupTab.build.
type groupSpec struct {
	width    int // output channels per row
	rowBytes int // readable source bytes per row (windows stay inside)
	np       int
	pstride  int
	e        int  // 4 or 8
	overlap  bool // last block ends at width (dst has no padding)
	// phases is the number of tap arrangements (1 or 2) a group may use
	// when the first does not fit; the bicubic pass with an odd tap count
	// pads its pairs with a zero tap after the last tap (phase 0) or before
	// the first (phase 1, for groups whose windows meet the row end).
	phases int
	// taps returns the source byte indices of the two pair-0 taps of output
	// channel j in phase ph (i1 may equal i0 when its weight is always
	// zero).
	taps func(j, ph int) (i0, i1 int)
	// weight returns the weight of tap t of pair p for output channel j in
	// phase ph.
	weight func(j, p, t, ph int) int32
}

// build fills t from s; t.ok reports whether every group fits the kernel
// (windows inside the row, indices inside the window, int16 weights).
func (t *groupTab) build(s groupSpec) {
	t.ok = false
	if s.np < 1 || (s.overlap && s.width < 4*s.e) || s.width < 1 {
		return
	}
	last := s.rowBytes - 16 - s.pstride*(s.np-1) // highest window offset
	if last < 0 {
		return
	}
	bw := 4 * s.e // outputs per block
	nblk := (s.width + bw - 1) / bw
	ne := nblk * s.e
	t.np, t.pstride, t.e, t.nblk = s.np, s.pstride, s.e, nblk
	t.off = growI32(t.off, ne)
	t.bdst = growI32(t.bdst, nblk)
	t.shuf = alignedU8(t.shuf, 16*ne)
	t.w = alignedI16(t.w, 8*ne*s.np)
	clear(t.w)
	perm := perm4[:]
	if s.e == 8 {
		perm = perm8[:]
	}
	t.runs = t.runs[:0]
	for b := 0; b < nblk; b++ {
		start := b * bw
		if s.overlap && start+bw > s.width {
			start = s.width - bw
		}
		t.bdst[b] = int32(start)
		paired := true
		for e := 0; e < s.e && paired; e += 2 {
			paired = t.pair(&s, b, e, start+4*perm[e], start+4*perm[e+1], last)
		}
		if paired {
			if n := len(t.runs); n > 0 && t.runs[n-1] == int32(b) {
				t.runs[n-1]++
			} else {
				t.runs = append(t.runs, int32(b), int32(b+1))
			}
			continue
		}
		for e := 0; e < s.e; e++ {
			j0 := start + 4*perm[e]
			fit := false
			for ph := 0; ph < max(s.phases, 1) && !fit; ph++ {
				fit = t.group(&s, b, e, j0, ph, last, -1)
			}
			if !fit {
				return
			}
		}
	}
	t.ok = true
}

// pair fills entries e and e+1 of block b (output channels j0.. and j1..,
// the two lanes of one ymm) with windows at o and o + pairedDelta(t.e) for
// one offset o, trying every phase of each, and reports whether they fit.
func (t *groupTab) pair(s *groupSpec, b, e, j0, j1, last int) bool {
	d := pairedDelta(s.e)
	phases := max(s.phases, 1)
	for ph0 := 0; ph0 < phases; ph0++ {
		lo0, hi0, ok0 := s.tapRange(j0, ph0)
		for ph1 := 0; ph1 < phases; ph1++ {
			lo1, hi1, ok1 := s.tapRange(j1, ph1)
			var o int
			switch {
			case ok0 && ok1:
				o = min(lo0, lo1-d)
			case ok0:
				o = lo0
			case ok1:
				o = lo1 - d
			}
			o = min(max(o, 0), last-d)
			if o < 0 || (ok0 && (lo0 < o || hi0 > o+15)) || (ok1 && (lo1 < o+d || hi1 > o+d+15)) {
				continue
			}
			if t.group(s, b, e, j0, ph0, last, o) && t.group(s, b, e+1, j1, ph1, last, o+d) {
				return true
			}
		}
	}
	return false
}

// tapRange returns the lowest and highest pair-0 tap of the (up to) four
// output channels j0..j0+3 in phase ph; ok is false for a padding group.
func (s *groupSpec) tapRange(j0, ph int) (lo, hi int, ok bool) {
	for k := 0; k < 4; k++ {
		if j := j0 + k; j < s.width {
			i0, i1 := s.taps(j, ph)
			if !ok {
				lo, hi, ok = min(i0, i1), max(i0, i1), true
			}
			lo, hi = min(lo, i0, i1), max(hi, i0, i1)
		}
	}
	return lo, hi, ok
}

// group fills entry e of block b (output channels j0..j0+3) in phase ph
// and reports whether it fits the kernel. A fixed ≥ 0 (at most last) is
// the window offset; else group picks its lowest tap.
func (t *groupTab) group(s *groupSpec, b, e, j0, ph, last, fixed int) bool {
	ent := b*s.e + e
	mask := t.shuf[16*ent : 16*ent+16]
	for i := range mask {
		mask[i] = 0x80
	}
	for p := 0; p < s.np; p++ {
		wo := 8 * ((b*s.np+p)*s.e + e)
		clear(t.w[wo : wo+8])
	}
	t.off[ent] = int32(max(fixed, 0))
	base := -1
	for k := 0; k < 4; k++ {
		if j := j0 + k; j < s.width {
			i0, i1 := s.taps(j, ph)
			if base < 0 || i0 < base {
				base = i0
			}
			if i1 < base {
				base = i1
			}
		}
	}
	if base == -1 { // padding group: no outputs, zero weights
		return true
	}
	if base < 0 {
		return false
	}
	off := min(base, last)
	if fixed >= 0 {
		off = fixed
	}
	t.off[ent] = int32(off)
	for k := 0; k < 4; k++ {
		j := j0 + k
		if j >= s.width {
			continue
		}
		i0, i1 := s.taps(j, ph)
		r0, r1 := i0-off, i1-off
		if r0 < 0 || r0 > 15 || r1 < 0 || r1 > 15 {
			return false
		}
		mask[4*k], mask[4*k+2] = uint8(r0), uint8(r1)
		for p := 0; p < s.np; p++ {
			wo := 8 * ((b*s.np+p)*s.e + e)
			for tt := 0; tt < 2; tt++ {
				v := s.weight(j, p, tt, ph)
				if v < -32768 || v > 32767 {
					return false
				}
				t.w[wo+2*k+tt] = int16(v)
			}
		}
	}
	return true
}

// zgroupTab is the table of one horizontal pass for the AVX-512 VBMI
// kernels: blocks of 64 (uint8 kernel: four zmm of 16 int32) or 32 (int16
// kernel: two zmm) outputs. Each zmm reads one 64-byte window at off and,
// for tap pair p, forms its 32 words with one vpermb (odd bytes
// zero-masked) on indices idx+p·pstride (mod 64), then pmaddwd. A
// zmm slot s = 4k+d (lane k, dword d) holds the output that the kernel's
// packs put at position 16k+4r+d (uint8, register r of 4) or 8k+4r+d
// (int16, r of 2), so the packed result is in natural order.
type zgroupTab struct {
	ok      bool
	np      int
	pstride int
	regs    int  // zmm per block: 4 (uint8) or 2 (int16)
	shared  bool // one window per block (off equal for its zmm)
	nblk    int
	off     []int32 // per block and register: window offset in the row
	idx     []uint8 // per block and register: 64 vpermb indices of pair 0
	w       []int16 // per block, pair, register: 32 weights
	bdst    []int32 // per block: first output channel
}

// build fills t from s (s.e is ignored: regs selects the kernel; each
// zmm uses the first phase that fits). A tap whose weight is zero in every pair may lie anywhere:
// vpermb reads only the loaded window, and the product is 0.
//
// With shared, the zmm of a block share one window (off is the same for
// all of them; zgroupI16 then loads it once): build fails when a block's
// taps do not fit one window.
func (t *zgroupTab) build(s groupSpec, regs int, shared bool) {
	t.ok, t.shared = false, shared
	bw := 16 * regs
	if s.np < 1 || s.width < 1 || (s.overlap && s.width < bw) {
		return
	}
	last := s.rowBytes - 64 // highest window offset
	if last < 0 {
		return
	}
	nblk := (s.width + bw - 1) / bw
	nr := nblk * regs
	t.np, t.pstride, t.regs, t.nblk = s.np, s.pstride, regs, nblk
	t.off = growI32(t.off, nr)
	t.bdst = growI32(t.bdst, nblk)
	t.idx = alignedU8(t.idx, 64*nr)
	clear(t.idx)
	t.w = alignedI16(t.w, 32*nr*s.np)
	clear(t.w)
	for b := 0; b < nblk; b++ {
		start := b * bw
		if s.overlap && start+bw > s.width {
			start = s.width - bw
		}
		t.bdst[b] = int32(start)
		for r := 0; r < regs; r++ {
			fit := false
			for ph := 0; ph < max(s.phases, 1) && !fit; ph++ {
				fit = t.reg(&s, b, r, start, ph, last, -1)
			}
			if !fit {
				return
			}
		}
		if shared {
			// int16: both zmm share a window; uint8: zmm 0,1 and 2,3.
			for r0 := 0; r0 < regs; r0 += 2 {
				off := min(t.off[b*regs+r0], t.off[b*regs+r0+1])
				for r := r0; r < r0+2; r++ {
					if !t.reg(&s, b, r, start, 0, last, int(off)) {
						return
					}
				}
			}
		}
	}
	t.ok = true
}

// reg fills zmm r of block b in phase ph and reports whether it fits; a
// fixedOff ≥ 0 replaces the window offset reg would choose.
func (t *zgroupTab) reg(s *groupSpec, b, r, start, ph, last, fixedOff int) bool {
	regs := t.regs
	ri := b*regs + r
	idx := t.idx[64*ri : 64*ri+64]
	clear(idx)
	for p := 0; p < s.np; p++ {
		clear(t.w[32*((b*s.np+p)*regs+r) : 32*((b*s.np+p)*regs+r)+32])
	}
	chanOf := func(slot int) int {
		k, d := slot/4, slot%4
		switch {
		case regs == 4 && t.shared:
			return start + 16*r + slot // contiguous; the kernel permutes dwords
		case regs == 4:
			return start + 16*k + 4*r + d
		}
		return start + 8*k + 4*r + d
	}
	// Window: from the lowest tap with a nonzero weight in any pair.
	base := -1
	for slot := 0; slot < 16; slot++ {
		if j := chanOf(slot); j < s.width {
			i0, i1 := s.taps(j, ph)
			for p := 0; p < s.np; p++ {
				for tt, i := range [2]int{i0, i1} {
					if s.weight(j, p, tt, ph) != 0 && (base < 0 || i+p*s.pstride < base) {
						base = i + p*s.pstride
					}
				}
			}
		}
	}
	off := min(max(base, 0), last)
	if fixedOff >= 0 {
		off = fixedOff
	}
	t.off[ri] = int32(off)
	for slot := 0; slot < 16; slot++ {
		j := chanOf(slot)
		if j >= s.width {
			continue
		}
		i0, i1 := s.taps(j, ph)
		for tt, i := range [2]int{i0, i1} {
			// Indices wrap mod 64 like vpermb's; only taps with a nonzero
			// weight must land inside the window.
			idx[4*slot+2*tt] = uint8((i - off) & 63)
			for p := 0; p < s.np; p++ {
				v := s.weight(j, p, tt, ph)
				if v == 0 {
					continue
				}
				if rel := i + p*s.pstride - off; rel < 0 || rel > 63 || v < -32768 || v > 32767 {
					return false
				}
				t.w[32*((b*s.np+p)*regs+r)+2*slot+tt] = int16(v)
			}
		}
	}
	return true
}

// alignedU8 returns b resized to n bytes starting on a 64-byte boundary
// (reusing b when it is large enough and aligned): vector loads of whole
// table entries then never split a cache line.
func alignedU8(b []uint8, n int) []uint8 {
	if cap(b) >= n && uintptr(unsafe.Pointer(unsafe.SliceData(b[:cap(b)])))%64 == 0 {
		return b[:n]
	}
	raw := make([]uint8, n+64)
	o := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & 63)
	return raw[o : o+n : o+n]
}

// alignedI16 is alignedU8 for int16 slices.
func alignedI16(b []int16, n int) []int16 {
	if cap(b) >= n && uintptr(unsafe.Pointer(unsafe.SliceData(b[:cap(b)])))%64 == 0 {
		return b[:n]
	}
	raw := make([]int16, n+32)
	o := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw)))&63) / 2
	return raw[o : o+n : o+n]
}
