package backbone

import (
	"github.com/gr00tgw/gr00tgw/core/model/internal/par"
	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// The row-wise kernels of the backbone (norms, residual adds, SwiGLU gate,
// rotary), run on the runner's worker pool over preallocated buffers. GEMMs
// with their fused activations and the attention run on core/tensor.

// rowOp names an elementwise or per-row operation of rowJob.
type rowOp int

const (
	opLayerNorm rowOp = iota // y = LN(x)·w + b over cols, eps
	opRMSNorm                // y = x·rsqrt(mean(x²)+eps)·w over cols
	opSiLUMul                // x = silu(x)·y in place (gate ⊙ up)
	opAdd                    // x += y
)

// rowJob applies one rowOp to rows [0, rows) of width cols, in chunks.
type rowJob struct {
	op         rowOp
	x, y, w, b []float32
	rows, cols int
	eps        float32
	chunk      int
}

const rowChunkElems = 16384

// Run applies the op to the rows of chunk part.
func (j *rowJob) Run(part, _ int) {
	r0 := part * j.chunk
	r1 := min(r0+j.chunk, j.rows)
	c := j.cols
	switch j.op {
	case opLayerNorm:
		for r := r0; r < r1; r++ {
			layerNormRow(j.y[r*c:r*c+c], j.x[r*c:r*c+c], j.w, j.b, j.eps)
		}
	case opRMSNorm:
		for r := r0; r < r1; r++ {
			rmsNormRow(j.y[r*c:r*c+c], j.x[r*c:r*c+c], j.w, j.eps)
		}
	case opSiLUMul:
		tensor.SiLUMul(j.x[r0*c:r1*c], j.y[r0*c:r1*c])
	case opAdd:
		vaxpy(j.x[r0*c:r1*c], 1, j.y[r0*c:r1*c])
	}
}

// run executes op over rows×cols on pool p.
func (j *rowJob) run(p *par.Pool, op rowOp, x, y, w, b []float32, rows, cols int, eps float32) {
	*j = rowJob{op: op, x: x, y: y, w: w, b: b, rows: rows, cols: cols, eps: eps}
	j.chunk = max(1, rowChunkElems/max(cols, 1))
	p.For(j, (rows+j.chunk-1)/j.chunk)
	*j = rowJob{}
}

// layerNormRow: y = (x − mean)/sqrt(var + eps)·w + b, statistics in float64
// (tensor.MeanInvStd).
func layerNormRow(y, x, w, b []float32, eps float32) {
	m, r := tensor.MeanInvStd(x, float64(eps))
	y = y[:len(x)]
	w = w[:len(x)]
	b = b[:len(x)]
	for i, v := range x {
		y[i] = (v-m)*r*w[i] + b[i]
	}
}

// rmsNormRow: y = w·(x·rsqrt(mean(x²) + eps)), the mean square in float64
// (tensor.InvRMS).
func rmsNormRow(y, x, w []float32, eps float32) {
	r := tensor.InvRMS(x, float64(eps))
	y = y[:len(x)]
	w = w[:len(x)]
	for i, v := range x {
		y[i] = w[i] * (v * r)
	}
}

// axpy: y += a·x.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// segment is a run of rows that attend to each other (one image frame).
type segment struct{ start, n int }

// ropeJob rotates heads of x in place, rows in chunks: head h of row i at
// column off + h·hd; x' = x·cos + rotate_half(x)·sin with rotate_half(x) =
// [−x[hd/2:], x[:hd/2]] and cos/sin rows [rows, hd].
type ropeJob struct {
	x, cos, sin           []float32
	rows, stride, off, hd int
	heads, chunk          int
}

// Run rotates the rows of chunk part.
func (j *ropeJob) Run(part, _ int) {
	hd, half := j.hd, j.hd/2
	for i := part * j.chunk; i < min((part+1)*j.chunk, j.rows); i++ {
		c, s := j.cos[i*hd:][:hd], j.sin[i*hd:][:hd]
		for h := 0; h < j.heads; h++ {
			q := j.x[i*j.stride+j.off+h*hd:][:hd]
			for d := 0; d < half; d++ {
				a, b := q[d], q[d+half]
				q[d] = a*c[d] - b*s[d]
				q[d+half] = b*c[d+half] + a*s[d+half]
			}
		}
	}
}

// run rotates heads [0, heads) at off of rows [0, rows) of x on pool p.
func (j *ropeJob) run(p *par.Pool, x []float32, rows, stride, off, heads, hd int, cos, sin []float32) {
	*j = ropeJob{x: x, cos: cos, sin: sin, rows: rows, stride: stride, off: off, hd: hd, heads: heads}
	j.chunk = max(1, rowChunkElems/max(heads*hd, 1))
	p.For(j, (rows+j.chunk-1)/j.chunk)
	*j = ropeJob{}
}
