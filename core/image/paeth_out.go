package image

import "encoding/binary"

// forceNoPaeth8 switches the eight- and sixteen-row Paeth kernels off, so
// the PNG fast path takes the in-place route with the four-row AVX2 and
// two-row SSE2 kernels (tests and benchmarks compare both).
var forceNoPaeth8 = false

// pngRawSlack is the number of readable bytes the PNG fast path keeps past
// the inflated scanlines and past its all-zero first "previous row": the
// Paeth kernels load 4 bytes for a 3-byte pixel.
const pngRawSlack = 16

// unfilterRGBOut unfilters the h filtered scanlines of a colour-type-2
// (3 bytes per pixel) image straight into pix (h rows of 3w bytes), the
// unfiltered rows never going back into raw. raw holds the scanlines
// (filter byte + 3w bytes each) and at least one readable byte after them;
// zero is the all-zero row above row 0, at least 3w+1 bytes long.
//
// Runs of Paeth rows go through the wide kernels: 9–16 rows through
// paeth16Out, up to eight through paeth8Out (a sixteen-row step costs
// little more than an eight-row one: both are bound by the same serial
// chain). A run shorter than the kernel still takes it when enough rows
// remain in the image: the rows after the run receive garbage that their
// own (later) unfiltering overwrites. At the bottom of the image, where too
// few rows are left, the kernel redoes the last 16 or 8 rows when they are
// all Paeth rows (recomputing an already final Paeth row gives the same
// bytes); otherwise the rows are copied and unfiltered in place by the
// four-, two- and one-row kernels. Up rows are added out of place
// (upOut); None, Sub and Average rows are copied and unfiltered in place
// in pix. It reports false on an unknown filter type.
func unfilterRGBOut(pix, raw, zero []uint8, w, h int) bool {
	rb := 3 * w
	stride := rb + 1
	// block unfilters rows [y0, y0+rows) with the wide kernels.
	block := func(rows, y0 int) bool {
		p := zero
		if y0 > 0 {
			p = pix[(y0-1)*rb:]
		}
		if rows == 16 {
			return paeth16Out(pix[y0*rb:], rb, raw[y0*stride+1:], stride, p, w)
		}
		return paeth8Out(pix[y0*rb:], rb, raw[y0*stride+1:], stride, p, w)
	}
	for y := 0; y < h; {
		prev := zero
		if y > 0 {
			prev = pix[(y-1)*rb:]
		}
		f := raw[y*stride]
		if f == 4 {
			n := 1 // Paeth rows from y, at most 16
			for n < 16 && y+n < h && raw[(y+n)*stride] == 4 {
				n++
			}
			switch {
			case n > 8 && y+16 <= h && block(16, y):
				y += n
				continue
			case n > 8 && y+n == h && h >= 16 && allPaeth(raw, stride, h-16, y) && block(16, h-16):
				return true
			case y+8 <= h && block(8, y):
				y += min(n, 8)
				continue
			case y+n == h && h >= 8 && allPaeth(raw, stride, h-8, y) && block(8, h-8):
				return true
			}
		}
		out := pix[y*rb : (y+1)*rb]
		prev = prev[:rb]
		if f == 2 {
			upOut(out, raw[y*stride+1:(y+1)*stride], prev)
			y++
			continue
		}
		copy(out, raw[y*stride+1:(y+1)*stride])
		if f == 4 && y+3 < h && allPaeth(raw, stride, y, y+4) {
			for k := 1; k < 4; k++ {
				copy(pix[(y+k)*rb:(y+k+1)*rb], raw[(y+k)*stride+1:(y+k+1)*stride])
			}
			if paeth4Fast(out, pix[(y+1)*rb:(y+2)*rb], pix[(y+2)*rb:(y+3)*rb], pix[(y+3)*rb:(y+4)*rb], prev, 3) {
				y += 4
				continue
			}
		}
		if f == 4 && y+1 < h && raw[(y+1)*stride] == 4 {
			next := pix[(y+1)*rb : (y+2)*rb]
			copy(next, raw[(y+1)*stride+1:(y+2)*stride])
			if paeth2Fast(out, next, prev, 3) {
				y += 2
				continue
			}
		}
		if !unfilter(f, out, prev, 3) {
			return false
		}
		y++
	}
	return true
}

// allPaeth reports whether scanlines [from, to) of raw are Paeth-filtered.
func allPaeth(raw []uint8, stride, from, to int) bool {
	for y := from; y < to; y++ {
		if raw[y*stride] != 4 {
			return false
		}
	}
	return true
}

// upOut reverses the Up filter out of place: out[i] = cur[i] + prev[i]
// (mod 256), eight bytes at a time (SWAR: the low seven bits of every
// byte are added without carries into the next byte, the top bit by xor).
func upOut(out, cur, prev []uint8) {
	n := len(out)
	cur, prev = cur[:n], prev[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		x := binary.LittleEndian.Uint64(cur[i:])
		y := binary.LittleEndian.Uint64(prev[i:])
		const lo7, hi1 = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080
		binary.LittleEndian.PutUint64(out[i:], ((x&lo7)+(y&lo7))^((x^y)&hi1))
	}
	for ; i < n; i++ {
		out[i] = cur[i] + prev[i]
	}
}
