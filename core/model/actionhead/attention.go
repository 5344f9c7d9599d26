package actionhead

import (
	"math"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// mha computes multi-head scaled-dot-product attention without a mask,
// out[i, h] = softmax(q[i,h]·k[:,h]ᵀ/√hd) · v[:,h], for nq queries and nk
// keys, on core/tensor's packed GEMM micro-kernels. q, k, v and out are
// row-major with row stride heads·hd. at keeps its scratch between calls
// (warm calls allocate nothing); args is caller-owned so that the call does
// not allocate either. Both belong to one plan: not safe for concurrent
// use.
func mha(at *tensor.Attention, args *tensor.AttentionArgs, out, q, k, v []float32, nq, nk, heads, hd int) {
	ld := heads * hd
	*args = tensor.AttentionArgs{
		Q: q, K: k, V: v, Out: out,
		QStride: ld, KStride: ld, VStride: ld, OutStride: ld,
		NQ: nq, NK: nk, Heads: heads, KVHeads: heads, HeadDim: hd,
		Scale: float32(1 / math.Sqrt(float64(hd))),
	}
	at.Run(args)
	*args = tensor.AttentionArgs{}
}
