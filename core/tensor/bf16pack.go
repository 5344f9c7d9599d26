package tensor

// BF16Packer is implemented by Kernels that pack weights straight from a
// bf16 checkpoint's bits (uint16, the high half of the fp32 pattern), so a
// loader need not widen a whole tensor to fp32 first. The result is the
// same as widening exactly and calling PackLinear / PackKN. Every Kernels in
// this package implements it; use PackLinearBF16 / PackKNBF16 to call it on
// any Kernels.
type BF16Packer interface {
	PackLinearBF16(w []uint16, n, k int) Packed
	PackKNBF16(w []uint16, k, n int) Packed
}

// PackLinearBF16 packs the bf16 weight w ([n, k], nn.Linear layout) with k,
// directly when k implements BF16Packer, else by widening to fp32 first.
func PackLinearBF16(k Kernels, w []uint16, n, kk int) Packed {
	if p, ok := k.(BF16Packer); ok {
		return p.PackLinearBF16(w, n, kk)
	}
	return k.PackLinear(widenAll(w, n*kk), n, kk)
}

// PackKNBF16 packs the bf16 weight w ([k, n]) with k, directly when k
// implements BF16Packer, else by widening to fp32 first.
func PackKNBF16(k Kernels, w []uint16, kk, n int) Packed {
	if p, ok := k.(BF16Packer); ok {
		return p.PackKNBF16(w, kk, n)
	}
	return k.PackKN(widenAll(w, n*kk), kk, n)
}

func widenAll(w []uint16, n int) []float32 {
	if len(w) < n {
		n = len(w) // the packer reports the short slice
	}
	f := make([]float32, n)
	widenBF16Go(f, w[:n])
	return f
}

// PackLinearBF16 widens w and packs it like PackLinear.
func (p portableKernels) PackLinearBF16(w []uint16, n, k int) Packed {
	checkPack("PackLinearBF16", len(w), n, k)
	return p.PackLinear(widenAll(w, n*k), n, k)
}

// PackKNBF16 widens w and packs it like PackKN.
func (p portableKernels) PackKNBF16(w []uint16, k, n int) Packed {
	checkPack("PackKNBF16", len(w), n, k)
	return p.PackKN(widenAll(w, n*k), k, n)
}

// PackLinearBF16 packs w ([n, k] bf16 bits); bf16-storage variants keep the
// bits as they are, the others widen into fp32 panels.
func (bk *blockedKernels) PackLinearBF16(w []uint16, n, k int) Packed {
	return bk.packBF16("PackLinearBF16", w, n, k, false)
}

// PackKNBF16 packs w ([k, n] bf16 bits) like PackLinearBF16.
func (bk *blockedKernels) PackKNBF16(w []uint16, k, n int) Packed {
	return bk.packBF16("PackKNBF16", w, n, k, true)
}

// packBF16 packs w ([n, k], or [k, n] when kn, bf16 bits) as
// PackLinearBF16 says.
func (bk *blockedKernels) packBF16(op string, w []uint16, n, k int, kn bool) Packed {
	checkPack(op, len(w), n, k)
	if !bk.bf16w {
		return bk.pack(op, widenAll(w, n*k), n, k, kn)
	}
	bp := bk.newPackedBF16(n, k)
	packLayout(bp.h, w, n, k, bk.nr, kn)
	return bp
}

func (bk *blockedKernels) newPackedBF16(n, k int) *blockedPacked {
	panels := (n + bk.nr - 1) / bk.nr
	return &blockedPacked{n: n, k: k, nr: bk.nr, panels: panels, h: alignedUint16s(panels * k * bk.nr), owner: bk}
}

var (
	_ BF16Packer  = portableKernels{}
	_ BF16Packer  = (*blockedKernels)(nil)
	_ FusedMatMul = portableKernels{}
	_ FusedMatMul = (*blockedKernels)(nil)
)
