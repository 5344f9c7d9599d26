package image

import "fmt"

// NormLUT is the per-channel normalisation of uint8 samples, the
// transformers fast processor's fused rescale+normalise: V[c][x] =
// (float32(x) − Sub[c]) / Div[c] in IEEE single precision, with Sub[c] =
// float32(Mean[c]·float32(1/RescaleFactor)) and Div[c] likewise from Std
// (for the default 0.5/0.5: (x − 127.5) / 127.5). The SIMD patchify kernels
// evaluate the formula, the portable ones read V; both give the same bits.
// Read-only after NewNormLUT; safe for concurrent use.
type NormLUT struct {
	V        [3][256]float32
	Sub, Div [3]float32
	// rcp is float32(1/Div[c]); fma reports that the AVX2 kernel's
	// division-free form (a product by rcp refined by one FMA step)
	// reproduced every entry of V on this CPU, so it may replace the
	// division (normFMAExact).
	rcp [3]float32
	fma bool
}

// NewNormLUT builds the lookup table for c.
func NewNormLUT(c *ChainConfig) *NormLUT {
	var l NormLUT
	inv := float32(1 / c.RescaleFactor)
	for ch := 0; ch < 3; ch++ {
		l.Sub[ch] = c.Mean[ch] * inv
		l.Div[ch] = c.Std[ch] * inv
		for x := 0; x < 256; x++ {
			l.V[ch][x] = (float32(x) - l.Sub[ch]) / l.Div[ch]
		}
		l.rcp[ch] = 1 / l.Div[ch]
	}
	l.fma = normFMAExact(&l)
	return &l
}

// PatchifyRows returns the number of pixel_values rows a w×h frame yields
// (grid_t·grid_h·grid_w with grid_t = 1 for one image).
func (c *ChainConfig) PatchifyRows(w, h int) int {
	return (h / c.PatchSize) * (w / c.PatchSize)
}

// Patchify normalises the frame img (whose sides must be multiples of
// PatchSize·MergeSize) with lut and writes its pixel_values rows into dst,
// which must hold exactly PatchifyRows(img.W, img.H)·RowWidth() float32s.
// The frame is repeated TemporalPatchSize times (one image = one frame).
// Row order is (block_row, block_col, merge_row, merge_col), column order
// (channel, temporal, py, px): transformers' Qwen2-VL
// view(...).permute(0,3,6,4,7,2,1,5,8). It allocates nothing.
func (c *ChainConfig) Patchify(dst []float32, img *RGB, lut *NormLUT) (Grid, error) {
	p, m, tp := c.PatchSize, c.MergeSize, c.TemporalPatchSize
	f := p * m
	if img.W%f != 0 || img.H%f != 0 || img.W == 0 || img.H == 0 {
		return Grid{}, fmt.Errorf("image: patchify: frame %dx%d is not a positive multiple of %d", img.W, img.H, f)
	}
	gh, gw := img.H/p, img.W/p
	rw := c.RowWidth()
	if len(dst) != gh*gw*rw {
		return Grid{}, fmt.Errorf("image: patchify: dst holds %d values, frame %dx%d needs %d", len(dst), img.W, img.H, gh*gw*rw)
	}
	stride := img.W * 3
	row := 0
	for bh := 0; bh < gh/m; bh++ {
		for bw := 0; bw < gw/m; bw++ {
			for mh := 0; mh < m; mh++ {
				for mw := 0; mw < m; mw++ {
					out := dst[row*rw : (row+1)*rw]
					y0 := (bh*m + mh) * p
					x0 := (bw*m + mw) * p
					if p == 16 && tp == 2 && !forceScalar {
						if pix := img.Pix[y0*stride+x0*3:]; !patchifyFast(out, pix, stride, lut) {
							patchify16x2(out, pix, stride, lut)
						}
						row++
						continue
					}
					o := 0
					for ch := 0; ch < 3; ch++ {
						l := &lut.V[ch]
						start := o
						for py := 0; py < p; py++ {
							src := img.Pix[(y0+py)*stride+x0*3+ch:]
							seg := out[o : o+p]
							for px := range seg {
								seg[px] = l[src[3*px]]
							}
							o += p
						}
						// Temporal copies of the same frame.
						n := p * p
						for t := 1; t < tp; t++ {
							copy(out[o:o+n], out[start:start+n])
							o += n
						}
					}
					row++
				}
			}
		}
	}
	return Grid{T: 1, H: gh, W: gw}, nil
}

// patchify16x2 is Patchify's inner loop for the Qwen shape (16×16 patches,
// temporal_patch_size 2): it writes both temporal copies of each 16-value
// segment in one pass through fixed-size array views (no bounds checks, no
// read-back copy). pix starts at the patch's top-left pixel. Same values as
// the generic loop (TestPatchifyFastMatchesGeneric).
func patchify16x2(out []float32, pix []uint8, stride int, lut *NormLUT) {
	_ = out[3*2*256-1]
	_ = pix[15*stride+47]
	for ch := 0; ch < 3; ch++ {
		l := &lut.V[ch]
		base := ch * 512
		for py := 0; py < 16; py++ {
			s := (*[48]uint8)(pix[py*stride : py*stride+48])
			a := (*[16]float32)(out[base+py*16 : base+py*16+16])
			b := (*[16]float32)(out[base+256+py*16 : base+256+py*16+16])
			for px := 0; px < 16; px++ {
				v := l[s[3*px+ch]]
				a[px] = v
				b[px] = v
			}
		}
	}
}
