package tensor

import (
	"fmt"
	"math"
)

// AttentionArgs describes one multi-head scaled-dot-product attention over
// row-major activations:
//
//	out[i, h] = Σ_j softmax_j(Scale·q[i, h]·k[j, g]) · v[j, g],  g = h / (Heads/KVHeads)
//
// where q[i, h] is the HeadDim floats of Q at row i, column QOff + h·HeadDim
// (likewise k, v at KOff/VOff + g·HeadDim, out at OutOff + h·HeadDim).
// Keys a query cannot see (Causal, KeyMask) get probability 0; a query that
// sees no key gets a zero output (torch would produce NaN).
type AttentionArgs struct {
	Q, K, V, Out []float32
	// Row strides in floats.
	QStride, KStride, VStride, OutStride int
	// Column (float) offsets of head 0.
	QOff, KOff, VOff, OutOff int
	// NQ query rows, NK key/value rows.
	NQ, NK int
	// Heads query heads, KVHeads key/value heads (grouped-query attention;
	// Heads must be a multiple of KVHeads), HeadDim floats per head.
	Heads, KVHeads, HeadDim int
	// Scale multiplies q·k, usually 1/√HeadDim.
	Scale float32
	// Causal lets query i see key j only if j ≤ i + NK − NQ (torch's
	// is_causal, aligned bottom-right when NK > NQ).
	Causal bool
	// KeyMask, if not nil (len ≥ NK), hides key j when KeyMask[j] == 0.
	KeyMask []int32
}

func (a *AttentionArgs) check() {
	bad := func(format string, args ...any) {
		panic("tensor: Attention: " + fmt.Sprintf(format, args...))
	}
	if a.NQ < 0 || a.NK < 0 || a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 {
		bad("NQ=%d NK=%d Heads=%d KVHeads=%d HeadDim=%d", a.NQ, a.NK, a.Heads, a.KVHeads, a.HeadDim)
	}
	if a.Heads%a.KVHeads != 0 {
		bad("Heads=%d is not a multiple of KVHeads=%d", a.Heads, a.KVHeads)
	}
	need := func(name string, s []float32, rows, stride, off, width int) {
		if rows == 0 {
			return
		}
		if stride < off+width || off < 0 {
			bad("%s: stride %d < offset %d + width %d", name, stride, off, width)
		}
		if len(s) < (rows-1)*stride+off+width {
			bad("%s: %d floats, %d rows of stride %d need %d", name, len(s), rows, stride, (rows-1)*stride+off+width)
		}
	}
	need("Q", a.Q, a.NQ, a.QStride, a.QOff, a.Heads*a.HeadDim)
	need("K", a.K, a.NK, a.KStride, a.KOff, a.KVHeads*a.HeadDim)
	need("V", a.V, a.NK, a.VStride, a.VOff, a.KVHeads*a.HeadDim)
	need("Out", a.Out, a.NQ, a.OutStride, a.OutOff, a.Heads*a.HeadDim)
	if a.KeyMask != nil && len(a.KeyMask) < a.NK {
		bad("KeyMask has %d entries, NK=%d", len(a.KeyMask), a.NK)
	}
}

// visible reports whether query row i may attend to key j.
func (a *AttentionArgs) visible(i, j int) bool {
	if a.Causal && j > i+a.NK-a.NQ {
		return false
	}
	return a.KeyMask == nil || a.KeyMask[j] != 0
}

// attnChunkRows is the number of query rows per work item (a multiple of
// the micro-kernels' MR: 6 on amd64, 12 on arm64).
const attnChunkRows = 48

// Attention computes AttentionArgs on every core. With a SIMD GEMM
// (AVX-512, AVX2 or NEON) both products run on the packed micro-kernels: K and V
// are packed once per call and head, then each (head, 48-query chunk) item
// computes its score block with one GEMM, the softmax in place (vector exp
// of the same level, ≤ 1 ulp, see Activate) and the output with a second
// GEMM. Without SIMD it runs a scalar loop (float64 exp).
//
// An Attention keeps its packing and score buffers between calls, so warm
// calls do not allocate. It is not safe for concurrent use: give each
// runner its own. The zero value is ready to use.
type Attention struct {
	args         AttentionArgs
	kind         kernelKind
	mr, nr       int
	nkPanels     int // ⌈NK/NR⌉
	hdPanels     int // ⌈HeadDim/NR⌉
	chunks       int
	kp, vp       []float32 // packed K [KVHeads][nkPanels][HeadDim][NR], V [KVHeads][hdPanels][NK][NR]
	work         []attnScratch
	scalarScores [][]float32

	// impl overrides the GEMM implementation (tests): nil means Default,
	// Portable forces the scalar path.
	impl Kernels
}

// attnScratch is one worker's buffers.
type attnScratch struct {
	qa, s, pa, o, inv []float32
}

type (
	attnPack Attention
	attnRows Attention
)

// Run computes out for a. It panics if a slice is too short for the shapes
// or the head counts do not divide (programmer errors).
func (at *Attention) Run(a *AttentionArgs) {
	a.check()
	if a.NQ == 0 {
		return
	}
	at.args = *a
	defer func() { at.args = AttentionArgs{} }()
	t := defaultTeam()
	at.chunks = (a.NQ + attnChunkRows - 1) / attnChunkRows
	impl := at.impl
	if impl == nil {
		impl = Default()
	}
	bk, ok := impl.(*blockedKernels)
	if !ok || a.NK == 0 {
		at.kind = 0
		for len(at.scalarScores) < t.threads() {
			at.scalarScores = append(at.scalarScores, nil)
		}
		for i := range at.scalarScores {
			if cap(at.scalarScores[i]) < a.NK {
				at.scalarScores[i] = make([]float32, a.NK)
			}
		}
		t.parallelFor((*attnRows)(at), a.Heads*at.chunks)
		return
	}
	at.kind, at.mr, at.nr = bk.kind, bk.mr, bk.nr
	at.nkPanels = (a.NK + at.nr - 1) / at.nr
	at.hdPanels = (a.HeadDim + at.nr - 1) / at.nr
	kpLen := a.KVHeads * at.nkPanels * a.HeadDim * at.nr
	vpLen := a.KVHeads * at.hdPanels * a.NK * at.nr
	if cap(at.kp) < kpLen {
		at.kp = alignedFloats(kpLen)
	}
	if cap(at.vp) < vpLen {
		at.vp = alignedFloats(vpLen)
	}
	at.kp, at.vp = at.kp[:kpLen], at.vp[:vpLen]
	nkPad := at.nkPanels * at.nr
	hdPad := at.hdPanels * at.nr
	for len(at.work) < t.threads() {
		at.work = append(at.work, attnScratch{})
	}
	grow := func(s *[]float32, n int) {
		if cap(*s) < n {
			*s = alignedFloats(n)
		}
		*s = (*s)[:n]
	}
	for i := range at.work[:t.threads()] {
		w := &at.work[i]
		grow(&w.qa, attnChunkRows*a.HeadDim)
		grow(&w.s, attnChunkRows*nkPad)
		if !kernelRowsA {
			grow(&w.pa, attnChunkRows*a.NK)
		}
		grow(&w.o, attnChunkRows*hdPad)
		grow(&w.inv, attnChunkRows)
	}
	t.parallelFor((*attnPack)(at), 2*a.KVHeads)
	t.parallelFor((*attnRows)(at), a.Heads*at.chunks)
}

// run packs K (even parts) or V (odd parts) of one kv head into NR-wide
// panels, zero-padding keys (K) or head dimensions (V) past the end.
func (ap *attnPack) run(part, _ int) {
	at := (*Attention)(ap)
	a := &at.args
	g, isV := part/2, part%2 == 1
	hd, nr := a.HeadDim, at.nr
	if !isV {
		kp := at.kp[g*at.nkPanels*hd*nr : (g+1)*at.nkPanels*hd*nr]
		for j := 0; j < at.nkPanels*nr; j++ {
			panel := kp[(j/nr)*hd*nr:]
			c := j % nr
			if j >= a.NK {
				for d := 0; d < hd; d++ {
					panel[d*nr+c] = 0
				}
				continue
			}
			row := a.K[j*a.KStride+a.KOff+g*hd:][:hd]
			for d, v := range row {
				panel[d*nr+c] = v
			}
		}
		return
	}
	vp := at.vp[g*at.hdPanels*a.NK*nr : (g+1)*at.hdPanels*a.NK*nr]
	for j := 0; j < a.NK; j++ {
		row := a.V[j*a.VStride+a.VOff+g*hd:][:hd]
		for dp := 0; dp < at.hdPanels; dp++ {
			dst := vp[(dp*a.NK+j)*nr : (dp*a.NK+j+1)*nr]
			n := copy(dst, row[min(dp*nr, hd):])
			clear(dst[n:])
		}
	}
}

// run computes one (head, query chunk) item.
func (ar *attnRows) run(part, worker int) {
	at := (*Attention)(ar)
	a := &at.args
	h, c := part%a.Heads, part/a.Heads
	i0 := c * attnChunkRows
	i1 := min(i0+attnChunkRows, a.NQ)
	if at.kind == 0 {
		at.scalarRows(h, i0, i1, at.scalarScores[worker])
		return
	}
	g := h / (a.Heads / a.KVHeads)
	hd, mr, nr := a.HeadDim, at.mr, at.nr
	rows := i1 - i0
	rp := (rows + mr - 1) / mr
	w := &at.work[worker]

	// Keys any row of this chunk can see.
	nkEff := a.NK
	if a.Causal {
		nkEff = min(a.NK, i1+a.NK-a.NQ)
	}
	if nkEff <= 0 {
		for i := i0; i < i1; i++ {
			clear(a.Out[i*a.OutStride+a.OutOff+h*hd:][:hd])
		}
		return
	}
	nkp := (nkEff + nr - 1) / nr
	nkPad := nkp * nr

	// Pack the scaled queries: qa[ir][d][r].
	qa := w.qa[:rp*hd*mr]
	for ir := 0; ir < rp; ir++ {
		r0 := ir * mr
		interleave(qa[ir*hd*mr:(ir+1)*hd*mr], a.Q[(i0+r0)*a.QStride+a.QOff+h*hd:], a.QStride, min(mr, rows-r0), mr, hd)
	}
	for i := range qa {
		qa[i] *= a.Scale
	}

	// Scores: s[r][j] for the chunk's rows and nkPad keys.
	s := w.s[:rp*mr*nkPad]
	kp := at.kp[g*at.nkPanels*hd*nr:]
	for jp := 0; jp < nkp; jp++ {
		for ir := 0; ir < rp; ir++ {
			callKernel(at.kind, &qa[ir*hd*mr], &kp[jp*hd*nr], &s[ir*mr*nkPad+jp*nr], nkPad, hd, 0, nil)
		}
	}

	// Softmax per row, in place; inv[r] = 1/Σ (0 when no key is visible).
	// A row runs its exp over the keys it sees rounded up to 16 (the
	// vector kernels' block), not all nkPad: the keys past that are
	// zeros in the sum (exp(−Inf) = +0 added to a lane leaves its bits),
	// so the causal rows skip the exp of their hidden keys, bit for bit.
	neg := float32(math.Inf(-1))
	inv := w.inv[:rows]
	for r := 0; r < rows; r++ {
		i := i0 + r
		lim := nkEff
		if a.Causal {
			lim = min(lim, i+a.NK-a.NQ+1)
		}
		lim = max(lim, 0)
		m := min((lim+15)&^15, nkPad)
		row := s[r*nkPad : r*nkPad+m]
		clear(s[r*nkPad+m : r*nkPad+max(m, nkEff)])
		for j := lim; j < m; j++ {
			row[j] = neg
		}
		if a.KeyMask != nil {
			for j, mk := range a.KeyMask[:max(min(lim, a.NK), 0)] {
				if mk == 0 {
					row[j] = neg
				}
			}
		}
		inv[r] = softmaxRow(at.kind, row)
	}

	// Pack the probabilities (first nkEff keys): pa[ir][j][r].
	// Where the level has an in-place-A kernel (amd64), the output GEMM
	// reads them from s directly (the same bits) and nothing is packed.
	var pa []float32
	if !kernelRowsA {
		pa = w.pa[:rp*nkEff*mr]
		for ir := 0; ir < rp; ir++ {
			r0 := ir * mr
			interleave(pa[ir*nkEff*mr:(ir+1)*nkEff*mr], s[r0*nkPad:], nkPad, min(mr, rows-r0), mr, nkEff)
		}
	}

	// Output: o[r][d] = Σ_j p[r][j]·v[j][d], then scale by inv and store.
	hdPad := at.hdPanels * nr
	o := w.o[:rp*mr*hdPad]
	vp := at.vp[g*at.hdPanels*a.NK*nr:]
	for dp := 0; dp < at.hdPanels; dp++ {
		for ir := 0; ir < rp; ir++ {
			if kernelRowsA {
				callKernelRows(at.kind, &s[ir*mr*nkPad], nkPad, &vp[dp*a.NK*nr], &o[ir*mr*hdPad+dp*nr], hdPad, nkEff)
			} else {
				callKernel(at.kind, &pa[ir*nkEff*mr], &vp[dp*a.NK*nr], &o[ir*mr*hdPad+dp*nr], hdPad, nkEff, 0, nil)
			}
		}
	}
	for r := 0; r < rows; r++ {
		dst := a.Out[(i0+r)*a.OutStride+a.OutOff+h*hd:][:hd]
		src := o[r*hdPad : r*hdPad+hd]
		f := inv[r]
		for d, v := range src {
			dst[d] = v * f
		}
	}
}

// softmaxRow replaces row by exp(row − max(row)) and returns 1/Σ, or fills
// it with zeros and returns 0 when every entry is −Inf, at vector level
// kind (AVX-512, AVX2 or NEON, the same bits; exp as in Activate's contract) when
// len(row) is a multiple of 16, else in float64.
func softmaxRow(kind kernelKind, row []float32) float32 {
	if sum, ok := softmaxSIMD(kind, row); ok {
		if sum == 0 {
			return 0
		}
		return 1 / sum
	}
	mx := float32(math.Inf(-1))
	for _, v := range row {
		mx = max(mx, v)
	}
	if math.IsInf(float64(mx), -1) {
		clear(row)
		return 0
	}
	var s float64
	for j, v := range row {
		e := float32(math.Exp(float64(v - mx)))
		row[j] = e
		s += float64(e)
	}
	return 1 / float32(s)
}

// scalarRows is the portable attention for one (head, chunk) item.
func (at *Attention) scalarRows(h, i0, i1 int, sc []float32) {
	a := &at.args
	hd := a.HeadDim
	g := h / (a.Heads / a.KVHeads)
	for i := i0; i < i1; i++ {
		q := a.Q[i*a.QStride+a.QOff+h*hd:][:hd]
		out := a.Out[i*a.OutStride+a.OutOff+h*hd:][:hd]
		sc := sc[:a.NK]
		mx := math.Inf(-1)
		for j := range sc {
			if !a.visible(i, j) {
				sc[j] = float32(math.Inf(-1))
				continue
			}
			sc[j] = dot(q, a.K[j*a.KStride+a.KOff+g*hd:][:hd]) * a.Scale
			mx = max(mx, float64(sc[j]))
		}
		clear(out)
		if math.IsInf(mx, -1) {
			continue
		}
		var sum float64
		for j, v := range sc {
			e := math.Exp(float64(v) - mx)
			sc[j] = float32(e)
			sum += e
		}
		for j, p := range sc {
			if p == 0 {
				continue
			}
			vr := a.V[j*a.VStride+a.VOff+g*hd:][:hd]
			for d, v := range vr {
				out[d] += p * v
			}
		}
		f := float32(1 / sum)
		for d := range out {
			out[d] *= f
		}
	}
}

// interleave packs rows ≤ w rows of src (row r at src[r*stride:], n
// values each) column-interleaved into dst[:n*w], the layout of a
// micro-kernel's A panel: dst[j*w+r] = src[r*stride+j] for r < rows and 0
// for rows ≤ r < w. The six-row case (the amd64 micro-kernels' MR) is
// unrolled: it writes dst in order, one 6-float group per column, where
// the general loop stores with a stride of w. It packs GEMM activations
// (packPhase) and attention's queries and, without an in-place kernel,
// probabilities.
func interleave(dst, src []float32, stride, rows, w, n int) {
	dst = dst[:n*w]
	if w == 6 && rows == 6 {
		s0 := src[:n]
		s1 := src[stride:][:len(s0)]
		s2 := src[2*stride:][:len(s0)]
		s3 := src[3*stride:][:len(s0)]
		s4 := src[4*stride:][:len(s0)]
		s5 := src[5*stride:][:len(s0)]
		for j, v := range s0 {
			e := dst[j*6 : j*6+6 : j*6+6]
			e[0], e[1], e[2] = v, s1[j], s2[j]
			e[3], e[4], e[5] = s3[j], s4[j], s5[j]
		}
		return
	}
	for r := 0; r < w; r++ {
		if r >= rows {
			for j := 0; j < n; j++ {
				dst[j*w+r] = 0
			}
			continue
		}
		for j, v := range src[r*stride:][:n] {
			dst[j*w+r] = v
		}
	}
}
