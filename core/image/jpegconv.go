package image

import (
	goimage "image"
)

// libjpeg-compatible YCbCr → RGB for Go's decoded JPEG planes.
//
// Go's image/jpeg hands back chroma at its stored (subsampled) resolution
// and color.YCbCrToRGB upsamples by replication; libjpeg(-turbo), which
// PIL and OpenCV use, upsamples 4:2:2 and 4:2:0 chroma with its "fancy"
// triangle filter (jdsample.c h2v1/h2v2_fancy_upsample; edge rows are
// replicated) and converts with its own fixed-point tables (jdcolor.c).
// Reproducing both removes the large edge differences; what remains is the
// IDCT (Go's differs from libjpeg's islow by ±1 on some samples), so JPEG
// decoding is close to, not bit-identical with, PIL/cv2.

const (
	jScaleBits = 16
	jOneHalf   = 1 << (jScaleBits - 1)
)

func jfix(x float64) int32 { return int32(x*(1<<jScaleBits) + 0.5) }

var jCrR, jCbB, jCrG, jCbG [256]int32

func init() {
	for i := 0; i < 256; i++ {
		x := int32(i - 128)
		jCrR[i] = (jfix(1.40200)*x + jOneHalf) >> jScaleBits
		jCbB[i] = (jfix(1.77200)*x + jOneHalf) >> jScaleBits
		jCrG[i] = -jfix(0.71414) * x
		jCbG[i] = -jfix(0.34414)*x + jOneHalf
	}
}

func clamp255(v int32) uint8 {
	if uint32(v) > 255 {
		return uint8(^(v >> 31) & 255)
	}
	return uint8(v)
}

// upsampleRow fills out (length ≥ w) with one full-resolution chroma row
// for output row y from plane p (stride, cw×ch samples), libjpeg-style.
func upsampleRow(out []int32, p []uint8, stride, cw, ch, y, w int, ratio goimage.YCbCrSubsampleRatio) {
	switch ratio {
	case goimage.YCbCrSubsampleRatio422: // h2v1
		row := p[y*stride : y*stride+cw]
		for x := 0; x < w; x++ {
			c := x / 2
			v := int32(row[c])
			switch {
			case cw == 1:
				out[x] = v
			case x%2 == 0 && c == 0:
				out[x] = v
			case x%2 == 0:
				out[x] = (v*3 + int32(row[c-1]) + 1) >> 2
			case c == cw-1:
				out[x] = v
			default:
				out[x] = (v*3 + int32(row[c+1]) + 2) >> 2
			}
		}
	case goimage.YCbCrSubsampleRatio420: // h2v2
		r0 := y / 2
		r1 := r0 - 1 // row above for even output rows
		if y%2 == 1 {
			r1 = r0 + 1
		}
		r1 = max(0, min(r1, ch-1)) // libjpeg replicates the edge rows
		near := p[r0*stride : r0*stride+cw]
		far := p[r1*stride : r1*stride+cw]
		sum := func(c int) int32 { return int32(near[c])*3 + int32(far[c]) }
		for x := 0; x < w; x++ {
			c := x / 2
			this := sum(c)
			switch {
			case cw == 1:
				out[x] = (this*4 + 8 - int32(x%2)) >> 4
			case x%2 == 0 && c == 0:
				out[x] = (this*4 + 8) >> 4
			case x%2 == 0:
				out[x] = (this*3 + sum(c-1) + 8) >> 4
			case c == cw-1:
				out[x] = (this*4 + 7) >> 4
			default:
				out[x] = (this*3 + sum(c+1) + 7) >> 4
			}
		}
	default: // 4:4:4
		row := p[y*stride : y*stride+w]
		for x, v := range row {
			out[x] = int32(v)
		}
	}
}

// ycbcrToRGBLibjpeg converts m into dst the way libjpeg does for the
// subsample ratios it upsamples with the fancy filter (4:4:4, 4:2:2,
// 4:2:0); it reports false for other ratios.
func ycbcrToRGBLibjpeg(dst *RGB, m *goimage.YCbCr) bool {
	switch m.SubsampleRatio {
	case goimage.YCbCrSubsampleRatio444, goimage.YCbCrSubsampleRatio422, goimage.YCbCrSubsampleRatio420:
	default:
		return false
	}
	b := m.Rect
	if b.Min.X != 0 || b.Min.Y != 0 {
		return false
	}
	w, h := b.Dx(), b.Dy()
	cw, ch := (w+1)/2, (h+1)/2
	switch m.SubsampleRatio {
	case goimage.YCbCrSubsampleRatio444:
		cw, ch = w, h
	case goimage.YCbCrSubsampleRatio422:
		ch = h
	}
	dst.setSize(w, h)
	cb := make([]int32, w)
	cr := make([]int32, w)
	for y := 0; y < h; y++ {
		upsampleRow(cb, m.Cb, m.CStride, cw, ch, y, w, m.SubsampleRatio)
		upsampleRow(cr, m.Cr, m.CStride, cw, ch, y, w, m.SubsampleRatio)
		yr := m.Y[y*m.YStride : y*m.YStride+w]
		d := dst.Pix[y*w*3 : (y+1)*w*3]
		for x, yv := range yr {
			Y := int32(yv)
			b, r := cb[x], cr[x]
			d[3*x] = clamp255(Y + jCrR[r])
			d[3*x+1] = clamp255(Y + ((jCbG[b] + jCrG[r]) >> jScaleBits))
			d[3*x+2] = clamp255(Y + jCbB[b])
		}
	}
	return true
}
