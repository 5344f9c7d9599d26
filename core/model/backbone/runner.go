package backbone

import (
	"fmt"
	"math"
	"slices"

	"github.com/gr00tgw/gr00tgw/core/model/internal/par"
	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// Runner executes the backbone for inputs within one Layout. It owns every
// activation buffer (allocated once in NewRunner) and a worker pool; it is
// not safe for concurrent use. Outputs are views into its buffers, valid
// until the next call.
type Runner struct {
	m         *Model
	l         Layout
	pool      *par.Pool
	interrupt func() error // see SetInterrupt

	rows    rowJob
	rope    ropeJob
	att     tensor.Attention // vision and text attention (scratch grows to the larger)
	attArgs tensor.AttentionArgs
	segs    []segment
	// ropeGrids are the grids the vision rotary tables were last built for:
	// the tables are rebuilt only when the grids change.
	ropeGrids [][3]int

	// vision, [MaxPatches, ·]
	vx, vn, vqkv, vattn, vtmp, vmlp []float32
	vcos, vsin                      []float32 // [MaxPatches, head_dim]
	vmerged                         []float32 // [MaxPatches/4, 4·hidden]
	vmid                            []float32 // [MaxPatches/4, 4·hidden]
	embeds                          []float32 // [MaxPatches/4, out]
	deep                            [][]float32
	deepView                        [][]float32

	// text, [MaxSeq, ·]
	tx, tn, tq, tk, tv, tattn, ttmp, tgate, tup []float32
	tcos, tsin                                  []float32 // [MaxSeq, head_dim]
	keyMask                                     []int32
	imgPos                                      []int32
}

// VisionOut is the vision tower's result: Merged image embeddings
// [Merged, out_hidden] in image-pad token order and one deepstack feature
// per deepstack index, each [Merged, out_hidden]. Views into the Runner.
type VisionOut struct {
	Embeds    []float32
	Deepstack [][]float32
	Merged    int
}

// NewRunner allocates the buffers for l and starts a pool of threads
// workers (0 = GOMAXPROCS).
func (m *Model) NewRunner(l Layout, threads int) (*Runner, error) {
	v, t := m.cfg.Backbone.Vision, m.cfg.Backbone.Text
	mm := v.SpatialMergeSize * v.SpatialMergeSize
	if l.MaxPatches <= 0 || l.MaxImages <= 0 || l.MaxSeq <= 0 || l.MaxPatches%mm != 0 {
		return nil, fmt.Errorf("backbone: layout %+v: MaxPatches, MaxImages, MaxSeq must be positive and MaxPatches a multiple of %d", l, mm)
	}
	if l.MaxFrames <= 0 {
		l.MaxFrames = l.MaxImages
	}
	r := &Runner{m: m, l: l, pool: par.New(threads)}
	n, h := l.MaxPatches, v.HiddenSize
	f := func(k int) []float32 { return make([]float32, k) }
	r.vx, r.vn, r.vattn, r.vtmp = f(n*h), f(n*h), f(n*h), f(n*h)
	r.vqkv = f(n * 3 * h)
	r.vmlp = f(n * v.IntermediateSize)
	r.vcos, r.vsin = f(n*v.HeadDim()), f(n*v.HeadDim())
	nm := n / mm
	r.vmerged, r.vmid = f(nm*v.MergeDim()), f(nm*v.MergeDim())
	r.embeds = f(nm * v.OutHiddenSize)
	r.deep = make([][]float32, len(v.DeepstackVisualIndexes))
	r.deepView = make([][]float32, len(r.deep))
	for i := range r.deep {
		r.deep[i] = f(nm * v.OutHiddenSize)
	}
	r.segs = make([]segment, 0, max(l.MaxFrames, 1))

	s, th := l.MaxSeq, t.HiddenSize
	r.tx, r.tn, r.ttmp = f(s*th), f(s*th), f(s*th)
	r.tq, r.tattn = f(s*t.NumAttentionHeads*t.HeadDim), f(s*t.NumAttentionHeads*t.HeadDim)
	r.tk, r.tv = f(s*t.NumKeyValueHeads*t.HeadDim), f(s*t.NumKeyValueHeads*t.HeadDim)
	r.tgate, r.tup = f(s*t.IntermediateSize), f(s*t.IntermediateSize)
	r.tcos, r.tsin = f(s*t.HeadDim), f(s*t.HeadDim)
	r.keyMask = make([]int32, s)
	r.imgPos = make([]int32, 0, s)

	r.ropeGrids = make([][3]int, 0, l.MaxImages)
	return r, nil
}

// Layout returns the runner's layout.
func (r *Runner) Layout() Layout { return r.l }

// SetInterrupt installs f (nil: none), polled before every vision block
// and text layer: a non-nil error stops Vision or LLM with it, so that a
// cancelled request gives the device back within one block. The runner is
// not safe for concurrent use, and neither is f's installation.
func (r *Runner) SetInterrupt(f func() error) { r.interrupt = f }

func (r *Runner) interrupted() error {
	if r.interrupt == nil {
		return nil
	}
	return r.interrupt()
}

// Close stops the runner's workers.
func (r *Runner) Close() { r.pool.Close() }

func (r *Runner) mm(y, x []float32, m int, l linear) {
	r.m.k.MatMul(y, x, m, l.w, l.b)
}

// Vision runs the vision tower on pixel rows [rows, cols] (cols = patch dim)
// of the images described by grids ([t, h, w] patch grids, model order).
func (r *Runner) Vision(pix []float32, rows, cols int, grids [][3]int, tap TapFunc) (VisionOut, error) {
	v := r.m.cfg.Backbone.Vision
	ms := v.SpatialMergeSize
	if cols != v.PatchDim() {
		return VisionOut{}, fmt.Errorf("%w: pixel_values has %d columns, want %d", ErrInput, cols, v.PatchDim())
	}
	if len(grids) == 0 || len(grids) > r.l.MaxImages {
		return VisionOut{}, fmt.Errorf("%w: %d images, layout allows 1..%d", ErrInput, len(grids), r.l.MaxImages)
	}
	total, frames := 0, 0
	for i, g := range grids {
		if g[0] <= 0 || g[1] <= 0 || g[2] <= 0 || g[0] > 1<<12 || g[1] > 1<<12 || g[2] > 1<<12 || g[1]%ms != 0 || g[2]%ms != 0 {
			return VisionOut{}, fmt.Errorf("%w: image %d grid %v: want t, h, w in [1, 4096] and h, w multiples of %d", ErrInput, i, g, ms)
		}
		total += g[0] * g[1] * g[2]
		frames += g[0]
	}
	if total != rows {
		return VisionOut{}, fmt.Errorf("%w: grids %v hold %d patches, pixel_values has %d rows", ErrInput, grids, total, rows)
	}
	if rows > r.l.MaxPatches || frames > cap(r.segs) {
		return VisionOut{}, fmt.Errorf("%w: %d patches in %d frames exceed the layout (%d patches, %d frames)", ErrInput, rows, frames, r.l.MaxPatches, cap(r.segs))
	}
	if len(pix) < rows*cols {
		return VisionOut{}, fmt.Errorf("%w: pixel_values has %d values, [%d, %d] needs %d", ErrInput, len(pix), rows, cols, rows*cols)
	}
	n, h := rows, v.HiddenSize

	// Patch embedding.
	x := r.vx[:n*h]
	r.mm(x, pix[:n*cols], n, r.m.patch)
	if tap != nil {
		tap("vision_patch_embed", []int{n, h}, x)
	}
	// Position embedding (into vn), rotary tables, attention segments.
	pos := r.vn[:n*h]
	row := 0
	for _, g := range grids {
		r.posEmbed(pos[row*h:], g)
		row += g[0] * g[1] * g[2]
	}
	r.prepareVision(grids)
	if tap != nil {
		tap("vision_pos_embed", []int{n, h}, pos)
	}
	r.rows.run(r.pool, opAdd, x, pos, nil, nil, n, h, 0)

	nm := n / (ms * ms)
	md := v.MergeDim()
	for bi := range r.m.blocks {
		if err := r.interrupted(); err != nil {
			return VisionOut{}, err
		}
		r.visionBlock(bi, x, n)
		if tap != nil {
			tap(fmt.Sprintf("vision_block_%d", bi), []int{n, h}, x)
		}
		if k := r.m.isTap[bi]; k >= 0 {
			dm := &r.m.deepstack[k]
			in := r.vmerged[:nm*md]
			// Post-shuffle norm: LayerNorm over the 4·hidden concatenation.
			r.rows.run(r.pool, opLayerNorm, x, in, dm.normW, dm.normB, nm, md, 1e-6)
			r.mergerMLP(dm, r.deep[k][:nm*v.OutHiddenSize], in, nm)
			r.deepView[k] = r.deep[k][:nm*v.OutHiddenSize]
			if tap != nil {
				tap(fmt.Sprintf("vision_deepstack_%d", k), []int{nm, v.OutHiddenSize}, r.deepView[k])
			}
		}
	}
	// Final merger: LayerNorm per patch, then regroup (a no-op view).
	in := r.vmerged[:nm*md]
	r.rows.run(r.pool, opLayerNorm, x, in, r.m.merger.normW, r.m.merger.normB, n, h, 1e-6)
	emb := r.embeds[:nm*v.OutHiddenSize]
	r.mergerMLP(&r.m.merger, emb, in, nm)
	if tap != nil {
		tap("vision_merger", []int{nm, v.OutHiddenSize}, emb)
	}
	return VisionOut{Embeds: emb, Deepstack: r.deepView, Merged: nm}, nil
}

// mergerMLP: out = fc2(gelu_erf(fc1(in))) over nm merged rows.
func (r *Runner) mergerMLP(mg *merger, out, in []float32, nm int) {
	md := r.m.cfg.Backbone.Vision.MergeDim()
	mid := r.vmid[:nm*md]
	tensor.MatMulAct(r.m.k, mid, in, nm, mg.fc1.w, mg.fc1.b, tensor.ActGELUErf)
	r.mm(out, mid, nm, mg.fc2)
}

// linspace reproduces torch.linspace(0, end, n) in float32 on CPU (scalar
// path: the first half counts up from 0, the second down from end).
func linspace(i, n int, end float32) float32 {
	if n == 1 {
		return 0
	}
	step := end / float32(n-1)
	if i < n/2 {
		return step * float32(i)
	}
	return end - step*float32(n-i-1)
}

// posEmbed writes the bilinearly interpolated learned position embedding of
// one image (grid g) into dst in merge-block row order, repeated over t.
func (r *Runner) posEmbed(dst []float32, g [3]int) {
	v := r.m.cfg.Backbone.Vision
	side := v.GridSide()
	last := float32(side - 1)
	h, w, hid, ms := g[1], g[2], v.HiddenSize, v.SpatialMergeSize
	tab := r.m.posTable
	for i := 0; i < h; i++ {
		hv := linspace(i, h, last)
		hf := int(hv)
		hc := min(hf+1, side-1)
		dh := hv - float32(hf)
		for j := 0; j < w; j++ {
			wv := linspace(j, w, last)
			wf := int(wv)
			wc := min(wf+1, side-1)
			dw := wv - float32(wf)
			w00 := (1 - dh) * (1 - dw)
			w01 := (1 - dh) * dw
			w10 := dh * (1 - dw)
			w11 := dh * dw
			r00 := tab[(hf*side+wf)*hid:][:hid]
			r01 := tab[(hf*side+wc)*hid:][:hid]
			r10 := tab[(hc*side+wf)*hid:][:hid]
			r11 := tab[(hc*side+wc)*hid:][:hid]
			// raster (i, j) → merge-block order (bh, bw, mh, mw)
			idx := ((i/ms)*(w/ms)+j/ms)*ms*ms + (i%ms)*ms + j%ms
			for f := 0; f < g[0]; f++ {
				o := dst[(f*h*w+idx)*hid:][:hid]
				for c := range o {
					o[c] = r00[c]*w00 + r01[c]*w01 + r10[c]*w10 + r11[c]*w11
				}
			}
		}
	}
}

// visionRope fills the cos/sin rows of one image starting at patch row0:
// angles [row·inv_freq, col·inv_freq] duplicated to head_dim.
func (r *Runner) visionRope(row0 int, g [3]int) {
	v := r.m.cfg.Backbone.Vision
	hd, ms := v.HeadDim(), v.SpatialMergeSize
	inv := r.m.visInvFreq
	nf := len(inv) // head_dim/4
	p := row0
	for f := 0; f < g[0]; f++ {
		for bh := 0; bh < g[1]/ms; bh++ {
			for bw := 0; bw < g[2]/ms; bw++ {
				for mh := 0; mh < ms; mh++ {
					for mw := 0; mw < ms; mw++ {
						rr, cc := float32(bh*ms+mh), float32(bw*ms+mw)
						cs, sn := r.vcos[p*hd:][:hd], r.vsin[p*hd:][:hd]
						for k := 0; k < nf; k++ {
							a := float64(rr * inv[k])
							b := float64(cc * inv[k])
							ca, sa := float32(math.Cos(a)), float32(math.Sin(a))
							cb, sb := float32(math.Cos(b)), float32(math.Sin(b))
							cs[k], sn[k] = ca, sa
							cs[nf+k], sn[nf+k] = cb, sb
							cs[2*nf+k], sn[2*nf+k] = ca, sa
							cs[3*nf+k], sn[3*nf+k] = cb, sb
						}
						p++
					}
				}
			}
		}
	}
}

// prepareVision builds the attention segments (one per frame) and, when
// the grids differ from the last call's, the rotary tables of grids.
func (r *Runner) prepareVision(grids [][3]int) {
	r.segs = r.segs[:0]
	row := 0
	for _, g := range grids {
		for f := 0; f < g[0]; f++ {
			r.segs = append(r.segs, segment{start: row + f*g[1]*g[2], n: g[1] * g[2]})
		}
		row += g[0] * g[1] * g[2]
	}
	if slices.Equal(r.ropeGrids, grids) {
		return
	}
	r.ropeGrids = r.ropeGrids[:0]
	row = 0
	for _, g := range grids {
		r.visionRope(row, g)
		r.ropeGrids = append(r.ropeGrids, g)
		row += g[0] * g[1] * g[2]
	}
}

// visionBlock runs vision block bi in place on the n patch rows of x, with
// the segments and rotary tables of prepareVision:
// x += proj(attn(rope(qkv(LN1(x))))); x += fc2(gelu_tanh(fc1(LN2(x)))).
func (r *Runner) visionBlock(bi int, x []float32, n int) {
	v := r.m.cfg.Backbone.Vision
	h, hd := v.HiddenSize, v.HeadDim()
	b := &r.m.blocks[bi]
	xn := r.vn[:n*h]
	r.rows.run(r.pool, opLayerNorm, x, xn, b.norm1W, b.norm1B, n, h, 1e-6)
	qkv := r.vqkv[:n*3*h]
	r.mm(qkv, xn, n, b.qkv)
	// q and k are adjacent column ranges [0, 2h): rotate them as 2·heads heads.
	r.rope.run(r.pool, qkv, n, 3*h, 0, 2*v.NumHeads, hd, r.vcos, r.vsin)
	scale := float32(1 / math.Sqrt(float64(hd)))
	for _, sg := range r.segs {
		o := sg.start * 3 * h
		r.attArgs = tensor.AttentionArgs{
			Q: qkv[o:], K: qkv[o:], V: qkv[o:], Out: r.vattn[sg.start*h:],
			QStride: 3 * h, KStride: 3 * h, VStride: 3 * h, OutStride: h,
			QOff: 0, KOff: h, VOff: 2 * h,
			NQ: sg.n, NK: sg.n, Heads: v.NumHeads, KVHeads: v.NumHeads, HeadDim: hd, Scale: scale,
		}
		r.att.Run(&r.attArgs)
	}
	r.attArgs = tensor.AttentionArgs{}
	tmp := r.vtmp[:n*h]
	r.mm(tmp, r.vattn[:n*h], n, b.proj)
	r.rows.run(r.pool, opAdd, x, tmp, nil, nil, n, h, 0)
	r.rows.run(r.pool, opLayerNorm, x, xn, b.norm2W, b.norm2B, n, h, 1e-6)
	mlp := r.vmlp[:n*v.IntermediateSize]
	tensor.MatMulAct(r.m.k, mlp, xn, n, b.fc1.w, b.fc1.b, tensor.ActGELUTanh)
	r.mm(tmp, mlp, n, b.fc2)
	r.rows.run(r.pool, opAdd, x, tmp, nil, nil, n, h, 0)
}

// VisionBlock runs only vision block bi, in place, on x [rows, hidden]: the
// hidden states of the patches of the images described by grids (as in
// Vision; x is typically the output of block bi−1). It is the unit the
// real-size benchmarks time against PyTorch; the rotary tables are built
// on the first call for a set of grids and reused while the grids repeat
// (Vision does the same), so a warm call costs exactly one block. It
// allocates nothing and is not safe for concurrent use with other calls
// on the Runner.
func (r *Runner) VisionBlock(bi int, x []float32, rows int, grids [][3]int) error {
	v := r.m.cfg.Backbone.Vision
	if bi < 0 || bi >= len(r.m.blocks) {
		return fmt.Errorf("%w: vision block %d outside [0, %d)", ErrInput, bi, len(r.m.blocks))
	}
	total, frames := 0, 0
	for i, g := range grids {
		if g[0] <= 0 || g[1] <= 0 || g[2] <= 0 || g[1]%v.SpatialMergeSize != 0 || g[2]%v.SpatialMergeSize != 0 {
			return fmt.Errorf("%w: image %d grid %v: want positive t, h, w with h, w multiples of %d", ErrInput, i, g, v.SpatialMergeSize)
		}
		total += g[0] * g[1] * g[2]
		frames += g[0]
	}
	switch {
	case len(grids) == 0 || len(grids) > r.l.MaxImages:
		return fmt.Errorf("%w: %d images, layout allows 1..%d", ErrInput, len(grids), r.l.MaxImages)
	case total != rows:
		return fmt.Errorf("%w: grids %v hold %d patches, x has %d rows", ErrInput, grids, total, rows)
	case rows > r.l.MaxPatches || frames > cap(r.segs):
		return fmt.Errorf("%w: %d patches in %d frames exceed the layout (%d patches, %d frames)", ErrInput, rows, frames, r.l.MaxPatches, cap(r.segs))
	case len(x) < rows*v.HiddenSize:
		return fmt.Errorf("%w: x has %d values, [%d, %d] needs %d", ErrInput, len(x), rows, v.HiddenSize, rows*v.HiddenSize)
	}
	r.prepareVision(grids)
	r.visionBlock(bi, x[:rows*v.HiddenSize], rows)
	return nil
}
