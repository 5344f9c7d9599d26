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
// concurrent use: Forward allocates its own activations (callers wanting no
// allocation per call can reuse a Scratch via ForwardScratch).
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

// schedule returns the schedule for the given key counts; the weights'
// layout does not depend on them, only the prologue's row tiles and the
// attention split do.
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
	d.scheds[k] = s
	return s, nil
}

// CrossKV holds the cross-attention keys and values of one request (the
// prologue's output), per cross block: [keys, Width] row-major.
type CrossKV struct {
	TextKeys, ImageKeys int
	K, V                map[int][]float32 // by block index
}

// PrepareCross runs the prologue: the K/V projections of every cross block
// over the VL features vl [vlRows, CrossDim]. Text blocks (i mod 4 = 0) use
// the valid non-image tokens (¬image ∧ valid), image blocks the valid image
// tokens, in sequence order; nil valid means all tokens are valid.
func (d *DiT) PrepareCross(vl []float32, vlRows int, image, valid []bool) (*CrossKV, error) {
	cd := d.dims.CrossDim
	if len(vl) != vlRows*cd || len(image) != vlRows || (valid != nil && len(valid) != vlRows) {
		return nil, fmt.Errorf("%w: vl %d values for %d rows × %d, image mask %d", ErrShape, len(vl), vlRows, cd, len(image))
	}
	var text, img []float32
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
	nt, ni := len(text)/cd, len(img)/cd
	if nt == 0 || ni == 0 {
		return nil, fmt.Errorf("%w: %d text and %d image keys; both sets must be non-empty", ErrShape, nt, ni)
	}
	s, err := d.schedule(nt, ni)
	if err != nil {
		return nil, err
	}
	kv := &CrossKV{TextKeys: nt, ImageKeys: ni, K: map[int][]float32{}, V: map[int][]float32{}}
	for _, mm := range s.Prologue {
		in := text
		if schedule.Kind(mm.Block) == schedule.CrossImage {
			in = img
		}
		out := make([]float32, mm.M*mm.N)
		d.matmul(mm, in, out, nil)
		if mm.Name[len(mm.Name)-1] == 'k' {
			kv.K[mm.Block] = out
		} else {
			kv.V[mm.Block] = out
		}
	}
	return kv, nil
}

// Forward runs the DiT for one Euler step: dst [Rows, OutDim] =
// proj_out_2(output layer(blocks(x))), x [Rows, Width] the DiT input
// (concat(state_features, action_features)), temb [Width] the timestep
// embedding of this step, kv from PrepareCross. x is not modified.
func (d *DiT) Forward(dst, x, temb []float32, kv *CrossKV) error {
	D := d.dims.Width
	R := d.dims.Rows
	if len(x) != R*D || len(temb) != D || len(dst) != R*d.dims.OutDim || kv == nil {
		return fmt.Errorf("%w: x %d (want %d), temb %d (want %d), dst %d (want %d)", ErrShape, len(x), R*D, len(temb), D, len(dst), R*d.dims.OutDim)
	}
	s, err := d.schedule(kv.TextKeys, kv.ImageKeys)
	if err != nil {
		return err
	}
	z := append([]float32(nil), x...)
	st := silu(temb)
	var (
		mod = map[string][]float32{}
		n   = make([]float32, R*D)
		q   = make([]float32, R*D)
		k   = make([]float32, R*D)
		v   = make([]float32, R*D)
		att = make([]float32, R*D)
		h   = make([]float32, R*d.dims.FF)
	)
	for _, op := range s.Ops {
		switch op.Kind {
		case schedule.OpMatmul:
			mm := op.MM
			var in, out []float32
			switch {
			case mm.M == 1: // AdaLN / output modulation from silu(temb)
				in, out = st, make([]float32, mm.N)
				mod[mm.Name] = out
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
				d.matmul(mm, in, nil, out)
			} else {
				d.matmul(mm, in, out, nil)
			}
		case schedule.OpLayerNorm:
			var scale, shift []float32
			if op.Mod != "" {
				m := mod[op.Mod]
				if op.ShiftFirst {
					shift, scale = m[:D], m[D:]
				} else {
					scale, shift = m[:D], m[D:]
				}
			}
			d.layerNorm(s, z, n, op.Eps, scale, shift)
		case schedule.OpAttention:
			a := op.Attn
			keys, kk, vv := R, k, v
			if a.Kind != schedule.Self {
				keys, kk, vv = kv.TextKeys, kv.K[a.Block], kv.V[a.Block]
				if a.Kind == schedule.CrossImage {
					keys = kv.ImageKeys
				}
			}
			d.attention(a, q, kk, vv, keys, att)
		default:
			return fmt.Errorf("emu: unexpected op kind %d", op.Kind)
		}
	}
	return nil
}

// Euler applies x ← x + dt·v over the action chunk [Rows−1, ActionDim]
// tile by tile, as the schedule's Euler op distributes it.
func (d *DiT) Euler(x, v []float32, dt float32) error {
	s := d.plan.Sched
	A, R := s.ActionDim, d.dims.Rows-1
	if len(x) != R*A || len(v) != R*A {
		return fmt.Errorf("%w: euler x %d v %d, want %d", ErrShape, len(x), len(v), R*A)
	}
	d.parallel(func(c int) {
		for _, t := range s.Euler[c] {
			for i := t.M * 32; i < min(t.M*32+32, R); i++ {
				for j := t.N * 32; j < min(t.N*32+32, A); j++ {
					x[i*A+j] += dt * v[i*A+j]
				}
			}
		}
	})
	return nil
}

// parallel runs f for every compute core, on d.workers goroutines.
func (d *DiT) parallel(f func(core int)) {
	if d.workers == 1 {
		for c := 0; c < schedule.Cores; c++ {
			f(c)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int, schedule.Cores)
	for c := 0; c < schedule.Cores; c++ {
		next <- c
	}
	close(next)
	for w := 0; w < d.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				f(c)
			}
		}()
	}
	wg.Wait()
}

// matmul computes mm over the row-major input x [M, K]: into out [M, N]
// (overwritten) or, when res is non-nil, added into res [M, N]. Each core
// computes its output tiles: acc = Σ_kt x(mt,kt)·Wᵀ(kt,nt) in fp32, then
// + bias, then the activation.
func (d *DiT) matmul(mm *schedule.Matmul, x, out, res []float32) {
	pl := d.plan
	sg := pl.WeightSegment(mm)
	biasF := pl.Policy.Bias
	M, K, N := mm.M, mm.K, mm.N
	d.parallel(func(c int) {
		var acc, w [tile.Elems]float32
		for _, t := range mm.Tiles[c] {
			clear(acc[:])
			r0, r1 := t.M*32, min(t.M*32+32, M)
			c0, c1 := t.N*32, min(t.N*32+32, N)
			for kt := 0; kt < mm.Kt(); kt++ {
				off, size := pl.WeightTileOffset(mm, kt, t.N)
				tile.Unpack(sg.Format, w[:], d.data[off:off+int64(size)])
				k0, k1 := kt*32, min(kt*32+32, K)
				for i := r0; i < r1; i++ {
					tileRow(acc[(i-r0)*32:(i-r0)*32+32], x[i*K+k0:i*K+k1], w[:])
				}
			}
			boff, bsize := pl.BiasOffset(mm, t.N)
			braw := d.data[boff : boff+int64(bsize)]
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
	})
}

// layerNorm writes n = LN(z)·(1+scale) + shift (no modulation when scale is
// nil), two-pass, distributed over the residual-stream tiles.
func (d *DiT) layerNorm(s *schedule.Schedule, z, n []float32, eps float32, scale, shift []float32) {
	R, D := d.dims.Rows, d.dims.Width
	part := make([]float32, schedule.Cores*R)
	sumPass := func(mean []float32) {
		clear(part)
		d.parallel(func(c int) {
			for _, t := range s.Elem[c] {
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
					part[c*R+i] += acc
				}
			}
		})
	}
	reduce := func() []float32 { // sync core: in core order
		out := make([]float32, R)
		for c := 0; c < schedule.Cores; c++ {
			for i := 0; i < R; i++ {
				out[i] += part[c*R+i]
			}
		}
		for i := range out {
			out[i] /= float32(D)
		}
		return out
	}
	sumPass(nil)
	mean := reduce()
	sumPass(mean)
	vr := reduce()
	rstd := make([]float32, R)
	for i, v := range vr {
		rstd[i] = float32(1 / math.Sqrt(float64(v+eps)))
	}
	d.parallel(func(c int) {
		for _, t := range s.Elem[c] {
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
	})
}

// attention computes att[:, head] = softmax(q·kᵀ/√hd)·v per head, each head's
// keys split into the schedule's ways; way 0 merges.
func (d *DiT) attention(a *schedule.Attention, q, k, v []float32, keys int, att []float32) {
	R, D, hd := d.dims.Rows, d.dims.Width, d.dims.HeadDim
	scale := float32(1 / math.Sqrt(float64(hd)))
	type partial struct {
		m, l []float32 // [R]
		o    []float32 // [R, hd]
	}
	parts := make([][]partial, d.dims.Heads)
	ways := 1
	for _, ps := range a.Parts {
		for _, p := range ps {
			ways = max(ways, p.Ways)
		}
	}
	for h := range parts {
		parts[h] = make([]partial, ways)
	}
	d.parallel(func(c int) {
		for _, p := range a.Parts[c] {
			pr := partial{m: make([]float32, R), l: make([]float32, R), o: make([]float32, R*hd)}
			j0, j1 := p.K0*32, min(p.K1*32, keys)
			sc := make([]float32, max(j1-j0, 0))
			for i := 0; i < R; i++ {
				qi := q[i*D+p.Head*hd : i*D+p.Head*hd+hd]
				m := float32(math.Inf(-1))
				for j := j0; j < j1; j++ {
					kj := k[j*D+p.Head*hd : j*D+p.Head*hd+hd]
					var s float32
					for e, qv := range qi {
						s += qv * kj[e]
					}
					s *= scale
					sc[j-j0] = s
					m = max(m, s)
				}
				var l float32
				oi := pr.o[i*hd : i*hd+hd]
				for j := j0; j < j1; j++ {
					e := float32(math.Exp(float64(sc[j-j0] - m)))
					l += e
					vj := v[j*D+p.Head*hd : j*D+p.Head*hd+hd]
					for t := range oi {
						oi[t] += e * vj[t]
					}
				}
				pr.m[i], pr.l[i] = m, l
			}
			parts[p.Head][p.Way] = pr
		}
	})
	// merge (way 0's core), after the barrier
	d.parallel(func(c int) {
		for _, p := range a.Parts[c] {
			if p.Way != 0 {
				continue
			}
			ps := parts[p.Head]
			for i := 0; i < R; i++ {
				m := float32(math.Inf(-1))
				for _, w := range ps {
					if w.l != nil && w.l[i] > 0 {
						m = max(m, w.m[i])
					}
				}
				var l float32
				out := att[i*D+p.Head*hd : i*D+p.Head*hd+hd]
				clear(out)
				for _, w := range ps {
					if w.l == nil || w.l[i] == 0 {
						continue
					}
					f := float32(math.Exp(float64(w.m[i] - m)))
					l += w.l[i] * f
					for t := range out {
						out[t] += w.o[i*hd+t] * f
					}
				}
				for t := range out {
					out[t] /= l
				}
			}
		}
	})
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
	for i, v := range x {
		out[i] = v / (1 + float32(math.Exp(float64(-v))))
	}
	return out
}

// geluTanh is GELU with the tanh approximation, in fp32 semantics.
func geluTanh(x float32) float32 {
	const c = 0.7978845608028654 // √(2/π)
	return 0.5 * x * (1 + float32(math.Tanh(float64(c*(x+0.044715*x*x*x)))))
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }
