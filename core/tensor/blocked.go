package tensor

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// kernelKind selects the SIMD micro-kernel of a blockedKernels. The kernels
// are called directly (not through a func value) so that escape analysis
// keeps the edge-tile scratch on the stack.
type kernelKind int

const (
	kindAVX512 kernelKind = iota + 1
	kindAVX2
	kindNEON // arm64 ASIMD (blocked_arm64.go)
)

// widenOnceRowPanels is the number of row panels from which an item widens
// a bf16 B panel once into scratch instead of in every micro-kernel call
// (the in-kernel widening costs ~5 % of the kernel's peak per call).
const widenOnceRowPanels = 8

// Blocking of the packed GEMM (BLIS-style). A packed A block of mcPanels
// micro-panels × kc columns (≈ 192 × 256 floats, 192 KiB) stays in L2 while
// one B micro-panel (kc × NR) streams through it, reused by every row panel.
const (
	blockKCConst  = 256  // target k block; the real one evens out k
	blockMC       = 192  // target rows per item (rounded to MR)
	blockNCMax    = 1024 // max columns per item
	itemsPerCore  = 8    // work items per thread, for dynamic balance
	maxTileFloats = 6 * 64
)

// blockedKernels is the packed, cache-blocked GEMM driving an MR×NR SIMD
// micro-kernel. It is shared and safe for concurrent use; per-call state
// (the packed activations) lives in a free list, so steady-state MatMul
// calls do not allocate.
type blockedKernels struct {
	name   string
	kind   kernelKind
	mr, nr int
	// bf16w stores a weight whose every value is exactly representable in
	// bf16 as bf16 panels (half the bytes, lossless); others stay fp32.
	// Items with few row panels (small m, weight-streaming bound) widen B
	// inside the micro-kernel; items with many widen each (k block, column
	// panel) once into a per-worker fp32 panel that all row panels reuse.
	bf16w bool

	mu   sync.Mutex
	free []*gemmState
}

// blockedPacked holds W as ⌈n/NR⌉ panels of [k][NR] values (zero-padded
// past n), 64-byte aligned, so that the micro-kernel streams one contiguous
// panel. Exactly one of w (fp32) and h (bf16 bits) is set.
type blockedPacked struct {
	n, k, nr int
	panels   int
	w        []float32
	h        []uint16
	owner    *blockedKernels
}

// narrow converts the fp32 panels to bf16 storage when every value is
// exactly a bf16 (its low 16 bits are zero), which is the case for weights
// widened from a bf16 checkpoint.
func (p *blockedPacked) narrow() {
	for _, v := range p.w {
		if math.Float32bits(v)&0xffff != 0 {
			return
		}
	}
	h := alignedUint16s(len(p.w))
	for i, v := range p.w {
		h[i] = uint16(math.Float32bits(v) >> 16)
	}
	p.h, p.w = h, nil
}

// packedBy names the implementation that packed w, for error messages.
func packedBy(w Packed) string {
	if bp, ok := w.(*blockedPacked); ok {
		return bp.owner.name
	}
	return fmt.Sprintf("%T", w)
}

// alignedUint16s returns a zeroed slice of n uint16 starting on a 64-byte
// boundary.
func alignedUint16s(n int) []uint16 {
	s := make([]uint16, n+32)
	off := int(uintptr(unsafe.Pointer(&s[0])) % 64 / 2)
	if off != 0 {
		off = 32 - off
	}
	return s[off : off+n : off+n]
}

// widenBF16Go is the scalar bf16 → fp32 widening.
func widenBF16Go(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

func (p *blockedPacked) N() int { return p.n }
func (p *blockedPacked) K() int { return p.k }

// alignedFloats returns a zeroed slice of n float32 starting on a 64-byte
// boundary.
func alignedFloats(n int) []float32 {
	s := make([]float32, n+16)
	off := int(uintptr(unsafe.Pointer(&s[0])) % 64 / 4)
	if off != 0 {
		off = 16 - off
	}
	return s[off : off+n : off+n]
}

func (bk *blockedKernels) newPacked(n, k int) *blockedPacked {
	panels := (n + bk.nr - 1) / bk.nr
	return &blockedPacked{n: n, k: k, nr: bk.nr, panels: panels, w: alignedFloats(panels * k * bk.nr), owner: bk}
}

// PackLinear packs w ([n, k], nn.Linear layout) into NR-wide panels. It
// panics if len(w) < n*k.
func (bk *blockedKernels) PackLinear(w []float32, n, k int) Packed {
	return bk.pack("PackLinear", w, n, k, false)
}

// pack packs w ([n, k], or [k, n] when kn) into NR-wide fp32 panels,
// narrowed to bf16 for the bf16-storage variants; op names the caller in
// checkPack's panic.
func (bk *blockedKernels) pack(op string, w []float32, n, k int, kn bool) Packed {
	checkPack(op, len(w), n, k)
	bp := bk.newPacked(n, k)
	packLayout(bp.w, w, n, k, bk.nr, kn)
	if bk.bf16w {
		bp.narrow()
	}
	return bp
}

// packLayout is packPanels for src [n, k], packKNPanels for src [k, n]
// (kn).
func packLayout[T uint16 | float32](dst, src []T, n, k, nr int, kn bool) {
	if kn {
		packKNPanels(dst, src, k, n, nr)
	} else {
		packPanels(dst, src, n, k, nr)
	}
}

// packPanels transposes the rows of src ([n, k], nn.Linear layout) into
// dst's ⌈n/nr⌉ panels of [k][nr] (dst zeroed past n), one panel per part on
// the worker team when the weight is large enough to pay for it. Within a
// panel it moves blocks of packKB columns: the block's destination (packKB
// × nr values) stays in L1 while nr row segments are read sequentially, so
// a real-size checkpoint packs at memory speed instead of one cache miss
// per value.
func packPanels[T uint16 | float32](dst, src []T, n, k, nr int) {
	runPack(&packJob[T]{dst: dst, src: src, n: n, k: k, nr: nr}, n, k, nr)
}

// runPack runs j, a job of one part per NR-wide panel of an [n, k]
// weight, on the worker team when the weight has packParallelMin values or
// more, else on the caller.
func runPack(j job, n, k, nr int) {
	panels := (n + nr - 1) / nr
	if n*k < packParallelMin {
		for p := range panels {
			j.run(p, 0)
		}
		return
	}
	defaultTeam().parallelFor(j, panels)
}

// packKNPanels copies the rows of src ([k, n], x·W layout) into dst's
// ⌈n/nr⌉ panels of [k][nr] (dst zeroed past n), one panel per part on the
// worker team when the weight is large enough to pay for it (one
// goroutine faulting in a real-size checkpoint's category-specific
// weights took 0.6 s).
func packKNPanels[T uint16 | float32](dst, src []T, k, n, nr int) {
	runPack(&packKNJob[T]{dst: dst, src: src, n: n, k: k, nr: nr}, n, k, nr)
}

type packKNJob[T uint16 | float32] struct {
	dst, src []T
	n, k, nr int
}

func (j *packKNJob[T]) run(part, _ int) {
	nr, k, n := j.nr, j.k, j.n
	j0 := part * nr
	j1 := min(j0+nr, n)
	panel := j.dst[part*k*nr : (part+1)*k*nr]
	for p := range k {
		copy(panel[p*nr:], j.src[p*n+j0:p*n+j1])
	}
}

// packParallelMin is the weight size (values) from which packPanels uses
// the team.
const packParallelMin = 1 << 16

// packKB is the column block of packPanels.
const packKB = 64

type packJob[T uint16 | float32] struct {
	dst, src []T
	n, k, nr int
}

func (j *packJob[T]) run(part, _ int) {
	nr, k := j.nr, j.k
	panel := j.dst[part*k*nr : (part+1)*k*nr]
	j0 := part * nr
	rows := min(nr, j.n-j0)
	h, isBF16 := any(j).(*packJob[uint16])
	for p0 := 0; p0 < k; p0 += packKB {
		p1 := min(p0+packKB, k)
		blk := panel[p0*nr : p1*nr]
		c0 := 0
		if isBF16 && littleEndian && nr%4 == 0 {
			c0 = transpose4(h, any(blk).([]uint16), j0, rows, p0, p1)
		}
		for c := c0; c < rows; c++ {
			for i, v := range j.src[(j0+c)*k+p0 : (j0+c)*k+p1] {
				blk[i*nr+c] = v
			}
		}
	}
}

// transpose4 moves the block's rows in groups of four, four columns at a
// time: four 8-byte loads (one per row), a 4×4 transpose of their 16-bit
// lanes in registers and four 8-byte stores (one per destination row),
// where the scalar loop makes 16 loads and 16 stores 2·nr bytes apart (it
// was most of a real-size checkpoint's load time). It returns the first
// row it did not move (rows rounded down to 4; the caller moves the rest)
// and moves the columns past the last multiple of 4 itself. Little-endian
// only: lane 0 is the low 16 bits.
func transpose4(h *packJob[uint16], blk []uint16, j0, rows, p0, p1 int) int {
	nr, k := h.nr, h.k
	const lo16, lo32 = 0x0000ffff0000ffff, 0x00000000ffffffff
	w := p1 - p0
	w4 := w &^ 3
	c := 0
	for ; c+4 <= rows; c += 4 {
		s0 := h.src[(j0+c)*k+p0:][:w]
		s1 := h.src[(j0+c+1)*k+p0:][:w]
		s2 := h.src[(j0+c+2)*k+p0:][:w]
		s3 := h.src[(j0+c+3)*k+p0:][:w]
		for i := 0; i < w4; i += 4 {
			r0 := *(*uint64)(unsafe.Pointer(&s0[i]))
			r1 := *(*uint64)(unsafe.Pointer(&s1[i]))
			r2 := *(*uint64)(unsafe.Pointer(&s2[i]))
			r3 := *(*uint64)(unsafe.Pointer(&s3[i]))
			// [a0 b0 a2 b2], [a1 b1 a3 b3] and the same of rows 2, 3.
			t0 := r0&lo16 | (r1&lo16)<<16
			t1 := (r0>>16)&lo16 | r1&^lo16
			t2 := r2&lo16 | (r3&lo16)<<16
			t3 := (r2>>16)&lo16 | r3&^lo16
			d := blk[i*nr+c:]
			_ = d[3*nr+3]
			*(*uint64)(unsafe.Pointer(&d[0])) = t0&lo32 | t2<<32
			*(*uint64)(unsafe.Pointer(&d[nr])) = t1&lo32 | t3<<32
			*(*uint64)(unsafe.Pointer(&d[2*nr])) = t0>>32 | t2&^lo32
			*(*uint64)(unsafe.Pointer(&d[3*nr])) = t1>>32 | t3&^lo32
		}
		for i := w4; i < w; i++ {
			d := blk[i*nr+c:][:4]
			d[0], d[1], d[2], d[3] = s0[i], s1[i], s2[i], s3[i]
		}
	}
	return c
}

// littleEndian reports the byte order transpose4 needs.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// PackKN packs w ([k, n], x·W layout) into NR-wide panels. It panics if
// len(w) < k*n.
func (bk *blockedKernels) PackKN(w []float32, k, n int) Packed {
	return bk.pack("PackKN", w, n, k, true)
}

// gemmState is the per-call state of one MatMul: arguments, the blocking
// decided for this shape and the packed activations. It is recycled.
type gemmState struct {
	bk         *blockedKernels
	y, x, bias []float32
	w          *blockedPacked
	m          int
	mPanels    int // ⌈m/MR⌉
	mcPanels   int // row panels per item
	icBlocks   int
	jcChunks   int
	jcPanels   int // B panels per item
	kc         int
	act        Activation
	a          []float32   // packed x: [mPanels][k][MR]
	bscr       [][]float32 // per-worker widened B panel [kc][NR] (bf16 weights)
}

func (bk *blockedKernels) getState() *gemmState {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	if n := len(bk.free); n > 0 {
		st := bk.free[n-1]
		bk.free = bk.free[:n-1]
		return st
	}
	return &gemmState{bk: bk}
}

func (bk *blockedKernels) putState(st *gemmState) {
	st.y, st.x, st.bias, st.w = nil, nil, nil, nil
	bk.mu.Lock()
	bk.free = append(bk.free, st)
	bk.mu.Unlock()
}

// MatMul computes y[m, n] = x[m, k]·Wᵀ + bias on every core. It panics if w
// was packed by another implementation or a slice is too short.
func (bk *blockedKernels) MatMul(y, x []float32, m int, w Packed, bias []float32) {
	bk.MatMulAct(y, x, m, w, bias, ActNone)
}

// MatMulAct is MatMul followed by act, applied to each row of a work
// item (up to blockNCMax columns) right after the item's last k block,
// while it is in cache.
func (bk *blockedKernels) MatMulAct(y, x []float32, m int, w Packed, bias []float32, act Activation) {
	// Any variant with the same micro-kernel may run a weight (e.g. packed
	// by DefaultBF16Weights, multiplied through Default): the panel layout
	// is the kernel's, and bf16 panels are handled whoever packed them.
	bp, ok := w.(*blockedPacked)
	if !ok || bp.owner.kind != bk.kind {
		panic(fmt.Sprintf("tensor: MatMul: weight packed by %s, not usable by %s", packedBy(w), bk.name))
	}
	checkMatMul(y, x, m, bp.n, bp.k, bias)
	if m == 0 {
		return
	}
	st := bk.getState()
	st.plan(y, x, m, bp, bias)
	st.act = act
	t := defaultTeam()
	t.parallelFor((*packPhase)(st), st.mPanels)
	t.parallelFor((*gemmPhase)(st), st.icBlocks*st.jcChunks)
	bk.putState(st)
}

// plan fixes the blocking for one call and sizes the packed-A buffer.
func (st *gemmState) plan(y, x []float32, m int, bp *blockedPacked, bias []float32) {
	mr := st.bk.mr
	st.y, st.x, st.bias, st.w, st.m = y, x, bias, bp, m
	st.mPanels = (m + mr - 1) / mr
	// Even row blocks of at most blockMC rows (no ragged last block).
	st.icBlocks = (st.mPanels + blockMC/mr - 1) / (blockMC / mr)
	st.mcPanels = (st.mPanels + st.icBlocks - 1) / st.icBlocks
	st.icBlocks = (st.mPanels + st.mcPanels - 1) / st.mcPanels
	threads := defaultTeam().threads()
	want := (threads*itemsPerCore + st.icBlocks - 1) / st.icBlocks
	maxChunk := max(1, blockNCMax/bp.nr)
	chunks := max(want, (bp.panels+maxChunk-1)/maxChunk)
	chunks = min(chunks, bp.panels)
	st.jcPanels = (bp.panels + chunks - 1) / chunks
	st.jcChunks = (bp.panels + st.jcPanels - 1) / st.jcPanels
	nkc := (bp.k + blockKC - 1) / blockKC
	st.kc = (bp.k + nkc - 1) / nkc
	need := st.mPanels * mr * bp.k
	if cap(st.a) < need {
		st.a = alignedFloats(need)
	}
	st.a = st.a[:need]
	if bp.h != nil && st.mcPanels >= widenOnceRowPanels {
		for len(st.bscr) < threads {
			st.bscr = append(st.bscr, nil)
		}
		for i := range threads {
			if cap(st.bscr[i]) < st.kc*bp.nr {
				st.bscr[i] = alignedFloats(st.kc * bp.nr)
			}
		}
	}
}

// packPhase packs one MR-row panel of x per part: a[p][kk][r] = x[p·MR+r][kk],
// zero past m.
type packPhase gemmState

func (ph *packPhase) run(part, worker int) {
	st := (*gemmState)(ph)
	mr, k := st.bk.mr, st.w.k
	i0 := part * mr
	interleave(st.a[part*k*mr:(part+1)*k*mr], st.x[i0*k:], k, min(mr, st.m-i0), mr, k)
}

// gemmPhase computes one (row block, column chunk) item of y per part.
type gemmPhase gemmState

func (ph *gemmPhase) run(part, worker int) {
	st := (*gemmState)(ph)
	bk, bp := st.bk, st.w
	mr, nr, n, k := bk.mr, bk.nr, bp.n, bp.k
	ic, jc := part/st.jcChunks, part%st.jcChunks
	ir0 := ic * st.mcPanels
	ir1 := min(ir0+st.mcPanels, st.mPanels)
	jr0 := jc * st.jcPanels
	jr1 := min(jr0+st.jcPanels, bp.panels)
	direct := ir1-ir0 < widenOnceRowPanels
	var tile [maxTileFloats]float32
	for k0 := 0; k0 < k; k0 += st.kc {
		kc := min(st.kc, k-k0)
		last := k0+kc >= k
		mode := 1
		if k0 == 0 {
			mode = 0
			if st.bias != nil {
				mode = 2
			}
		}
		for jr := jr0; jr < jr1; jr++ {
			off := (jr*k + k0) * nr
			var b *float32
			var bh *uint16
			switch {
			case bp.h == nil:
				b = &bp.w[off]
			case direct:
				bh = &bp.h[off]
			default:
				scr := st.bscr[worker][:kc*nr]
				widenBF16(bk.kind, scr, bp.h[off:off+kc*nr])
				b = &scr[0]
			}
			j0 := jr * nr
			cols := min(nr, n-j0)
			var bias *float32
			if mode == 2 && cols == nr {
				bias = &st.bias[j0]
			}
			for ir := ir0; ir < ir1; ir++ {
				a := &st.a[(ir*k+k0)*mr]
				i0 := ir * mr
				rows := min(mr, st.m-i0)
				if rows == mr && cols == nr {
					if bh != nil {
						callKernelBF16(bk.kind, a, bh, &st.y[i0*n+j0], n, kc, mode, bias)
					} else {
						callKernel(bk.kind, a, b, &st.y[i0*n+j0], n, kc, mode, bias)
					}
					continue
				}
				if bh != nil {
					callKernelBF16(bk.kind, a, bh, &tile[0], nr, kc, 0, nil)
				} else {
					callKernel(bk.kind, a, b, &tile[0], nr, kc, 0, nil)
				}
				for r := 0; r < rows; r++ {
					dst := st.y[(i0+r)*n+j0 : (i0+r)*n+j0+cols]
					src := tile[r*nr : r*nr+cols]
					switch mode {
					case 0:
						copy(dst, src)
					case 1:
						for c, v := range src {
							dst[c] += v
						}
					case 2:
						bb := st.bias[j0 : j0+cols]
						for c, v := range src {
							dst[c] = v + bb[c]
						}
					}
				}
			}
		}
		if last && st.act != ActNone {
			// The activation once per row of the item (up to blockNCMax
			// columns), not per tile row: a call per 16 floats (AVX2) cost
			// as much as the activation itself. Elementwise, so the same
			// bits in any grouping.
			c0, c1 := jr0*nr, min(jr1*nr, n)
			for i := ir0 * mr; i < min(ir1*mr, st.m); i++ {
				activateKind(bk.kind, st.act, st.y[i*n+c0:i*n+c1])
			}
		}
	}
}

// blockKC is a variable only so that tuning tests can vary it.
var blockKC = blockKCConst
