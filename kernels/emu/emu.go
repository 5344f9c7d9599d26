// Package emu executes the DiT megakernel's schedule on the CPU: every
// emulated compute core produces exactly the output tiles the schedule gives
// it, in the schedule's order, from weight tiles decoded out of the packed
// DRAM arena (bfp8_b under mixed_dit), accumulating in fp32. Every op ends
// in a barrier, as on the device. The result is a DiT forward that serves as
// the CPU backend's mixed_dit DiT and as the numerical reference of the
// device megakernel.
//
// Numerics: activations, accumulators, LayerNorm statistics and softmax are
// fp32; matmul sums run over k in increasing order (k-tile outer, k inside
// the tile inner); LayerNorm is two-pass with per-core partial sums reduced
// in core order; attention is a flash-style split of each head's keys into
// up to three ways merged by way 0. So the emulation is deterministic and
// independent of the worker count.
package emu

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/gr00tgw/gr00tgw/kernels/arena"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
	"github.com/gr00tgw/gr00tgw/kernels/tile"
)

// ErrShape reports inputs whose sizes do not match the DiT.
var ErrShape = errors.New("emu: input shape")

// DiT is the emulated megakernel DiT over one packed arena. It is safe for
// concurrent use: PrepareCross and Forward allocate their own activations
// and worker goroutines per call. A Session (one per concurrent caller)
// keeps both, so its steady-state calls allocate nothing.
type DiT struct {
	plan    *arena.Plan
	data    []byte
	dims    schedule.Dims
	workers int

	mu     sync.Mutex
	scheds map[[2]int]*schedule.Schedule // by (text keys, image keys)
}

// New returns the emulated DiT over the packed arena data of plan (as
// Plan.Pack writes it). workers bounds the goroutines that run emulated
// cores (≤ 0 means 1). data is retained, not copied.
func New(plan *arena.Plan, data []byte, workers int) (*DiT, error) {
	if int64(len(data)) != plan.Size {
		return nil, fmt.Errorf("emu: arena is %d bytes, plan says %d", len(data), plan.Size)
	}
	return &DiT{plan: plan, data: data, dims: plan.Sched.Dims, workers: max(workers, 1),
		scheds: map[[2]int]*schedule.Schedule{{plan.Sched.Dims.TextKeys, plan.Sched.Dims.ImageKeys}: plan.Sched}}, nil
}

// Dims returns the DiT shapes.
func (d *DiT) Dims() schedule.Dims { return d.dims }

// schedule returns the schedule for the given key counts, planning and
// caching it on first use; the weights' layout does not depend on them,
// only the prologue's row tiles and the attention split do. A schedule
// evicted from the cache stays valid for callers still holding it.
func (d *DiT) schedule(text, image int) (*schedule.Schedule, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := [2]int{text, image}
	if s, ok := d.scheds[k]; ok {
		return s, nil
	}
	dims := d.dims
	dims.TextKeys, dims.ImageKeys = text, image
	s, err := schedule.Plan(dims)
	if err != nil {
		return nil, err
	}
	if len(d.scheds) >= maxSchedules { // bound the cache: drop any but the planned shape
		base := [2]int{d.plan.Sched.Dims.TextKeys, d.plan.Sched.Dims.ImageKeys}
		for old := range d.scheds {
			if old != base {
				delete(d.scheds, old)
				break
			}
		}
	}
	d.scheds[k] = s
	return s, nil
}

// maxSchedules bounds the per-key-count schedule cache (a real-size
// schedule is ≈ 1.5 MB and takes ≈ 10 ms to plan; key counts vary with
// the prompt length and image count, and requests must not grow memory
// without bound).
const maxSchedules = 32

// CrossKV holds the cross-attention keys and values of one request (the
// prologue's output), per cross block: [keys, Width] row-major.
type CrossKV struct {
	TextKeys, ImageKeys int
	K, V                map[int][]float32 // by block index
}

// PrepareCross runs the prologue: the K/V projections of every cross block
// over the VL features vl [vlRows, CrossDim]. Text blocks (i mod 4 = 0) use
// the valid non-image tokens (¬image ∧ valid), image blocks the valid image
// tokens, in sequence order; nil valid means all tokens are valid. It
// allocates its scratch and result (a Session reuses both).
func (d *DiT) PrepareCross(vl []float32, vlRows int, image, valid []bool) (*CrossKV, error) {
	e := d.newExec()
	defer e.close()
	kv := &CrossKV{}
	if err := e.prepareCross(kv, vl, vlRows, image, valid); err != nil {
		return nil, err
	}
	return kv, nil
}

// Forward runs the DiT for one Euler step: dst [Rows, OutDim] =
// proj_out_2(output layer(blocks(x))), x [Rows, Width] the DiT input
// (concat(state_features, action_features)), temb [Width] the timestep
// embedding of this step, kv from PrepareCross. x is not modified. It
// allocates its activations and starts its worker goroutines per call, so
// concurrent calls are safe; a Session's Forward allocates nothing.
func (d *DiT) Forward(dst, x, temb []float32, kv *CrossKV) error {
	e := d.newExec()
	defer e.close()
	return e.forward(dst, x, temb, kv)
}

// Euler applies x ← x + dt·v over the action chunk [Rows−1, ActionDim]
// tile by tile, as the schedule's Euler op distributes it.
func (d *DiT) Euler(x, v []float32, dt float32) error {
	s := d.plan.Sched
	A, R := s.ActionDim, d.dims.Rows-1
	if len(x) != R*A || len(v) != R*A {
		return fmt.Errorf("%w: euler x %d v %d, want %d", ErrShape, len(x), len(v), R*A)
	}
	for c := 0; c < schedule.Cores; c++ { // element-wise: core order is immaterial
		for _, t := range s.Euler[c] {
			for i := t.M * 32; i < min(t.M*32+32, R); i++ {
				for j := t.N * 32; j < min(t.N*32+32, A); j++ {
					x[i*A+j] += dt * v[i*A+j]
				}
			}
		}
	}
	return nil
}

// partial is one attention way's running softmax state for one head.
type partial struct {
	m, l []float32 // [R]
	o    []float32 // [R, hd]
	used bool
}

// exec is one caller's execution state: the worker pool, every activation
// buffer and the parameters of the op being run (read by the per-core
// bodies, whose function values are created once). After the first call
// with a given key-count shape, nothing in it allocates.
type exec struct {
	d    *DiT
	pool *pool

	// activations [Rows, Width] unless noted
	z, n, q, k, v, att []float32
	h                  []float32 // [Rows, FF]
	st                 []float32 // silu(temb) [Width]
	mod                map[string][]float32
	text, img          []float32 // gathered VL rows

	// current matmul
	mm          *schedule.Matmul
	x, out, res []float32

	// current LayerNorm
	s                    *schedule.Schedule
	lnZ, lnN, lnMean     []float32
	lnScale, lnShift     []float32
	part, mean, vr, rstd []float32

	// current attention
	a          *schedule.Attention
	aq, ak, av []float32
	keys       int
	parts      [][schedule.MaxWays]partial // [head][way]
	sc         [][]float32                 // per core: scores

	mmFn, sumFn, normFn, attnFn, mergeFn func(int)
}

func (d *DiT) newExec() *exec {
	R, D := d.dims.Rows, d.dims.Width
	e := &exec{d: d, pool: newPool(d.workers), mod: map[string][]float32{}}
	for _, b := range []*[]float32{&e.z, &e.n, &e.q, &e.k, &e.v, &e.att} {
		*b = make([]float32, R*D)
	}
	e.h = make([]float32, R*d.dims.FF)
	e.st = make([]float32, D)
	e.part = make([]float32, schedule.Cores*R)
	e.mean, e.vr, e.rstd = make([]float32, R), make([]float32, R), make([]float32, R)
	e.parts = make([][schedule.MaxWays]partial, d.dims.Heads)
	hd := d.dims.HeadDim
	for h := range e.parts {
		for w := range e.parts[h] {
			e.parts[h][w] = partial{m: make([]float32, R), l: make([]float32, R), o: make([]float32, R*hd)}
		}
	}
	e.sc = make([][]float32, schedule.Cores)
	e.mmFn, e.sumFn, e.normFn, e.attnFn, e.mergeFn = e.matmulCore, e.sumCore, e.normCore, e.attnCore, e.mergeCore
	return e
}

func (e *exec) close() { e.pool.close() }

// prepareCross fills kv, reusing its K/V buffers when they are large enough.
func (e *exec) prepareCross(kv *CrossKV, vl []float32, vlRows int, image, valid []bool) error {
	d := e.d
	cd := d.dims.CrossDim
	if len(vl) != vlRows*cd || len(image) != vlRows || (valid != nil && len(valid) != vlRows) {
		return fmt.Errorf("%w: vl %d values for %d rows × %d, image mask %d", ErrShape, len(vl), vlRows, cd, len(image))
	}
	text, img := e.text[:0], e.img[:0]
	for r := 0; r < vlRows; r++ {
		if valid != nil && !valid[r] {
			continue
		}
		if image[r] {
			img = append(img, vl[r*cd:(r+1)*cd]...)
		} else {
			text = append(text, vl[r*cd:(r+1)*cd]...)
		}
	}
	e.text, e.img = text, img
	nt, ni := len(text)/cd, len(img)/cd
	if nt == 0 || ni == 0 {
		return fmt.Errorf("%w: %d text and %d image keys; both sets must be non-empty", ErrShape, nt, ni)
	}
	s, err := d.schedule(nt, ni)
	if err != nil {
		return err
	}
	kv.TextKeys, kv.ImageKeys = nt, ni
	if kv.K == nil {
		kv.K, kv.V = map[int][]float32{}, map[int][]float32{}
	}
	for _, mm := range s.Prologue {
		in := text
		if schedule.Kind(mm.Block) == schedule.CrossImage {
			in = img
		}
		dst := kv.V
		if mm.Name[len(mm.Name)-1] == 'k' {
			dst = kv.K
		}
		out := dst[mm.Block]
		if cap(out) < mm.M*mm.N {
			out = make([]float32, mm.M*mm.N)
		}
		out = out[:mm.M*mm.N]
		dst[mm.Block] = out
		e.matmul(mm, in, out, nil)
	}
	return nil
}

// forward is DiT.Forward on e's buffers.
func (e *exec) forward(dst, x, temb []float32, kv *CrossKV) error {
	d := e.d
	D := d.dims.Width
	R := d.dims.Rows
	if len(x) != R*D || len(temb) != D || len(dst) != R*d.dims.OutDim || kv == nil {
		return fmt.Errorf("%w: x %d (want %d), temb %d (want %d), dst %d (want %d)", ErrShape, len(x), R*D, len(temb), D, len(dst), R*d.dims.OutDim)
	}
	s, err := d.schedule(kv.TextKeys, kv.ImageKeys)
	if err != nil {
		return err
	}
	z, n, q, k, v, att, h := e.z, e.n, e.q, e.k, e.v, e.att, e.h
	copy(z, x)
	siluInto(e.st, temb)
	for _, op := range s.Ops {
		switch op.Kind {
		case schedule.OpMatmul:
			mm := op.MM
			var in, out []float32
			switch {
			case mm.M == 1: // AdaLN / output modulation from silu(temb)
				in, out = e.st, e.mod[mm.Name]
				if len(out) != mm.N {
					out = make([]float32, mm.N)
					e.mod[mm.Name] = out
				}
			case hasSuffix(mm.Name, "attn1.to_q"):
				in, out = n, q
			case hasSuffix(mm.Name, "attn1.to_k"):
				in, out = n, k
			case hasSuffix(mm.Name, "attn1.to_v"):
				in, out = n, v
			case hasSuffix(mm.Name, "attn1.to_out.0"):
				in, out = att, z
			case hasSuffix(mm.Name, "ff.net.0.proj"):
				in, out = n, h
			case hasSuffix(mm.Name, "ff.net.2"):
				in, out = h, z
			case mm.Name == "proj_out_2":
				in, out = n, dst
			default:
				return fmt.Errorf("emu: unexpected matmul %s", mm.Name)
			}
			if op.Residual {
				e.matmul(mm, in, nil, out)
			} else {
				e.matmul(mm, in, out, nil)
			}
		case schedule.OpLayerNorm:
			var scale, shift []float32
			if op.Mod != "" {
				m := e.mod[op.Mod]
				if len(m) != 2*D {
					return fmt.Errorf("emu: layer norm before its modulation %s", op.Mod)
				}
				if op.ShiftFirst {
					shift, scale = m[:D], m[D:]
				} else {
					scale, shift = m[:D], m[D:]
				}
			}
			e.layerNorm(s, z, n, op.Eps, scale, shift)
		case schedule.OpAttention:
			a := op.Attn
			keys, kk, vv := R, k, v
			if a.Kind != schedule.Self {
				keys, kk, vv = kv.TextKeys, kv.K[a.Block], kv.V[a.Block]
				if a.Kind == schedule.CrossImage {
					keys = kv.ImageKeys
				}
			}
			e.attention(a, q, kk, vv, keys, att)
		default:
			return fmt.Errorf("emu: unexpected op kind %d", op.Kind)
		}
	}
	return nil
}

// matmul computes mm over the row-major input x [M, K]: into out [M, N]
// (overwritten) or, when res is non-nil, added into res [M, N].
func (e *exec) matmul(mm *schedule.Matmul, x, out, res []float32) {
	e.mm, e.x, e.out, e.res = mm, x, out, res
	e.pool.run(e.mmFn)
	e.mm, e.x, e.out, e.res = nil, nil, nil, nil
}

// matmulCore computes core c's output tiles of e.mm: acc = Σ_kt
// x(mt,kt)·Wᵀ(kt,nt) in fp32, then + bias, then the activation.
func (e *exec) matmulCore(c int) {
	pl, mm, x, out, res := e.d.plan, e.mm, e.x, e.out, e.res
	sg := pl.WeightSegment(mm)
	biasF := pl.Policy.Bias
	M, K, N := mm.M, mm.K, mm.N
	var acc, w [tile.Elems]float32
	for _, t := range mm.Tiles[c] {
		clear(acc[:])
		r0, r1 := t.M*32, min(t.M*32+32, M)
		c0, c1 := t.N*32, min(t.N*32+32, N)
		for kt := 0; kt < mm.Kt(); kt++ {
			off, size := pl.WeightTileOffset(mm, kt, t.N)
			tile.Unpack(sg.Format, w[:], e.d.data[off:off+int64(size)])
			k0, k1 := kt*32, min(kt*32+32, K)
			for i := r0; i < r1; i++ {
				tileRow(acc[(i-r0)*32:(i-r0)*32+32], x[i*K+k0:i*K+k1], w[:])
			}
		}
		boff, bsize := pl.BiasOffset(mm, t.N)
		braw := e.d.data[boff : boff+int64(bsize)]
		for i := r0; i < r1; i++ {
			for j := c0; j < c1; j++ {
				y := acc[(i-r0)*32+j-c0] + biasAt(braw, biasF, j-c0)
				if mm.Act == schedule.ActGELUTanh {
					y = geluTanh(y)
				}
				if res != nil {
					res[i*N+j] += y
				} else {
					out[i*N+j] = y
				}
			}
		}
	}
}

// layerNorm writes n = LN(z)·(1+scale) + shift (no modulation when scale is
// nil), two-pass, distributed over the residual-stream tiles; the sync core
// reduces the per-core partial sums in core order.
func (e *exec) layerNorm(s *schedule.Schedule, z, n []float32, eps float32, scale, shift []float32) {
	R, D := e.d.dims.Rows, e.d.dims.Width
	e.s, e.lnZ, e.lnN, e.lnScale, e.lnShift = s, z, n, scale, shift
	reduce := func(out []float32) { // sync core: in core order
		clear(out)
		for c := 0; c < schedule.Cores; c++ {
			for i := 0; i < R; i++ {
				out[i] += e.part[c*R+i]
			}
		}
		for i := range out {
			out[i] /= float32(D)
		}
	}
	e.lnMean = nil
	clear(e.part)
	e.pool.run(e.sumFn)
	reduce(e.mean)
	e.lnMean = e.mean
	clear(e.part)
	e.pool.run(e.sumFn)
	reduce(e.vr)
	for i, v := range e.vr {
		e.rstd[i] = float32(1 / math.Sqrt(float64(v+eps)))
	}
	e.pool.run(e.normFn)
	e.s, e.lnZ, e.lnN, e.lnScale, e.lnShift, e.lnMean = nil, nil, nil, nil, nil, nil
}

// sumCore accumulates core c's partial row sums of z (first pass) or of
// (z − mean)² (second pass, e.lnMean set).
func (e *exec) sumCore(c int) {
	R, D := e.d.dims.Rows, e.d.dims.Width
	z, mean := e.lnZ, e.lnMean
	for _, t := range e.s.Elem[c] {
		for i := t.M * 32; i < min(t.M*32+32, R); i++ {
			var acc float32
			for j := t.N * 32; j < min(t.N*32+32, D); j++ {
				v := z[i*D+j]
				if mean != nil {
					v -= mean[i]
					v *= v
				}
				acc += v
			}
			e.part[c*R+i] += acc
		}
	}
}

// normCore normalises and modulates core c's residual-stream tiles.
func (e *exec) normCore(c int) {
	R, D := e.d.dims.Rows, e.d.dims.Width
	z, n, mean, rstd, scale, shift := e.lnZ, e.lnN, e.mean, e.rstd, e.lnScale, e.lnShift
	for _, t := range e.s.Elem[c] {
		for i := t.M * 32; i < min(t.M*32+32, R); i++ {
			for j := t.N * 32; j < min(t.N*32+32, D); j++ {
				y := (z[i*D+j] - mean[i]) * rstd[i]
				if scale != nil {
					y = y*(1+scale[j]) + shift[j]
				}
				n[i*D+j] = y
			}
		}
	}
}

// attention computes att[:, head] = softmax(q·kᵀ/√hd)·v per head, each head's
// keys split into the schedule's ways; way 0 merges after the barrier.
func (e *exec) attention(a *schedule.Attention, q, k, v []float32, keys int, att []float32) {
	for c := range e.sc {
		if cap(e.sc[c]) < keys {
			e.sc[c] = make([]float32, keys)
		}
	}
	for h := range e.parts {
		for w := range e.parts[h] {
			e.parts[h][w].used = false
		}
	}
	e.a, e.aq, e.ak, e.av, e.keys = a, q, k, v, keys
	e.pool.run(e.attnFn)
	e.aq = att // the merge writes the output
	e.pool.run(e.mergeFn)
	e.a, e.aq, e.ak, e.av = nil, nil, nil, nil
}

// attnCore computes core c's (head, way) parts: running max, sum and
// unnormalised output over its key range.
func (e *exec) attnCore(c int) {
	R, D, hd := e.d.dims.Rows, e.d.dims.Width, e.d.dims.HeadDim
	q, k, v, keys := e.aq, e.ak, e.av, e.keys
	scale := float32(1 / math.Sqrt(float64(hd)))
	for _, p := range e.a.Parts[c] {
		pr := &e.parts[p.Head][p.Way]
		pr.used = true
		clear(pr.o)
		j0, j1 := p.K0*32, min(p.K1*32, keys)
		sc := e.sc[c][:max(j1-j0, 0)]
		for i := 0; i < R; i++ {
			qi := q[i*D+p.Head*hd : i*D+p.Head*hd+hd]
			m := float32(math.Inf(-1))
			for j := j0; j < j1; j++ {
				kj := k[j*D+p.Head*hd : j*D+p.Head*hd+hd]
				var s float32
				for x, qv := range qi {
					s += qv * kj[x]
				}
				s *= scale
				sc[j-j0] = s
				m = max(m, s)
			}
			var l float32
			oi := pr.o[i*hd : i*hd+hd]
			for j := j0; j < j1; j++ {
				ex := float32(math.Exp(float64(sc[j-j0] - m)))
				l += ex
				vj := v[j*D+p.Head*hd : j*D+p.Head*hd+hd]
				for t := range oi {
					oi[t] += ex * vj[t]
				}
			}
			pr.m[i], pr.l[i] = m, l
		}
	}
}

// mergeCore: on way 0's core, merge the head's ways into the output.
func (e *exec) mergeCore(c int) {
	R, D, hd := e.d.dims.Rows, e.d.dims.Width, e.d.dims.HeadDim
	att := e.aq
	for _, p := range e.a.Parts[c] {
		if p.Way != 0 {
			continue
		}
		ps := &e.parts[p.Head]
		for i := 0; i < R; i++ {
			m := float32(math.Inf(-1))
			for w := range ps {
				if ps[w].used && ps[w].l[i] > 0 {
					m = max(m, ps[w].m[i])
				}
			}
			var l float32
			out := att[i*D+p.Head*hd : i*D+p.Head*hd+hd]
			clear(out)
			for w := range ps {
				pw := &ps[w]
				if !pw.used || pw.l[i] == 0 {
					continue
				}
				f := float32(math.Exp(float64(pw.m[i] - m)))
				l += pw.l[i] * f
				for t := range out {
					out[t] += pw.o[i*hd+t] * f
				}
			}
			for t := range out {
				out[t] /= l
			}
		}
	}
}

// tileRow accumulates ar[j] += Σ_k xr[k]·w[k][j] for one output row of a
// tile, k in increasing order. Four k are unrolled per pass; Go evaluates
// the sum left to right with a rounding per operation, so the result is
// bit-identical to the plain k loop.
func tileRow(ar, xr, w []float32) {
	ar = ar[:32]
	k := 0
	for ; k+4 <= len(xr); k += 4 {
		a0, a1, a2, a3 := xr[k], xr[k+1], xr[k+2], xr[k+3]
		w0, w1, w2, w3 := w[k*32:k*32+32], w[k*32+32:k*32+64], w[k*32+64:k*32+96], w[k*32+96:k*32+128]
		for j := range ar {
			ar[j] = ar[j] + a0*w0[j] + a1*w1[j] + a2*w2[j] + a3*w3[j]
		}
	}
	for ; k < len(xr); k++ {
		a, wr := xr[k], w[k*32:k*32+32]
		for j := range ar {
			ar[j] += a * wr[j]
		}
	}
}

func biasAt(raw []byte, f tile.Format, j int) float32 {
	if f == tile.Float32 {
		return math.Float32frombits(uint32(raw[4*j]) | uint32(raw[4*j+1])<<8 | uint32(raw[4*j+2])<<16 | uint32(raw[4*j+3])<<24)
	}
	return tile.FromBF16(uint16(raw[2*j]) | uint16(raw[2*j+1])<<8)
}

func silu(x []float32) []float32 {
	out := make([]float32, len(x))
	siluInto(out, x)
	return out
}

func siluInto(dst, x []float32) {
	for i, v := range x {
		dst[i] = v / (1 + float32(math.Exp(float64(-v))))
	}
}

// geluTanh is GELU with the tanh approximation, in fp32 semantics.
func geluTanh(x float32) float32 {
	const c = 0.7978845608028654 // √(2/π)
	return 0.5 * x * (1 + float32(math.Tanh(float64(c*(x+0.044715*x*x*x)))))
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }
