package image

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/gr00tgw/gr00tgw/core/inflate"
)

// pngFast decodes the PNG shape camera frames arrive in — 8-bit truecolour
// (colour type 2) or truecolour+alpha (6), not interlaced — straight into an
// RGB buffer: the unfiltered scanlines of colour type 2 already are RGB
// rows, so no intermediate image is built and the inflater's memory is
// reused across calls. Any other shape, and anything irregular (bad CRC,
// PLTE/tRNS chunks, IDAT split by other chunks, zlib or checksum trouble,
// missing IEND), makes it report "not handled" so the caller falls back to
// image/png, which then defines the error. Differential-tested against
// image/png by TestPNGFastMatchesStdlib and FuzzPNGFast. The IDAT stream
// is inflated in one call by core/inflate (strict: exact size, Adler-32,
// no trailing bytes — anything else goes to image/png) into a reused
// buffer of filtered scanlines, which are then unfiltered and packed.
type pngFast struct {
	inf    inflate.Decoder // one-shot zlib decoder, tables reused
	idat   [][]byte        // IDAT payloads in order
	joined []byte          // concatenated IDAT payloads when there are several
	raw    []uint8         // inflated scanlines: h × (filter byte + row)
	zero   []uint8         // the all-zero "previous row" of the first scanline
}

var pngSig = []byte("\x89PNG\r\n\x1a\n")

// pngHeaderSize returns the size from a PNG's IHDR when the signature and
// the IHDR chunk (with its CRC) are well formed, without allocating.
func pngHeaderSize(data []byte) (w, h int, ok bool) {
	if len(data) < 33 || !bytes.HasPrefix(data, pngSig) {
		return 0, 0, false
	}
	c := data[8:33]
	if binary.BigEndian.Uint32(c[:4]) != 13 || string(c[4:8]) != "IHDR" ||
		crc32.ChecksumIEEE(c[4:21]) != binary.BigEndian.Uint32(c[21:25]) {
		return 0, 0, false
	}
	w, h = int(binary.BigEndian.Uint32(c[8:12])), int(binary.BigEndian.Uint32(c[12:16]))
	if w < 1 || h < 1 || w > 0x7fffffff || h > 0x7fffffff {
		return 0, 0, false
	}
	return w, h, true
}

// pngKeepRaw is the largest inflate buffer a pngFast keeps between calls
// (pooled decoders should not pin the buffer of one huge frame; camera
// frames need well under 1 MiB).
const pngKeepRaw = 8 << 20

// decode returns handled=false when the stdlib decoder must take over.
func (d *pngFast) decode(dst *RGB, data []byte) (handled bool) {
	handled = d.decodeRaw(dst, data)
	if cap(d.raw) > pngKeepRaw {
		d.raw = nil
	}
	return handled
}

// decodeRaw is decode without the buffer-retention policy.
func (d *pngFast) decodeRaw(dst *RGB, data []byte) (handled bool) {
	if !bytes.HasPrefix(data, pngSig) {
		return false
	}
	p := data[len(pngSig):]
	var w, h, ctype int
	d.idat = d.idat[:0]
	seenIHDR, seenIEND, idatDone := false, false, false
	for !seenIEND {
		if len(p) < 12 {
			return false
		}
		n := binary.BigEndian.Uint32(p[:4])
		if n > 0x7fffffff || int(n) > len(p)-12 {
			return false
		}
		typ := string(p[4:8])
		body := p[8 : 8+n]
		if crc32.ChecksumIEEE(p[4:8+n]) != binary.BigEndian.Uint32(p[8+n:]) {
			return false
		}
		p = p[12+n:]
		if !seenIHDR && typ != "IHDR" {
			return false
		}
		switch typ {
		case "IHDR":
			if seenIHDR || n != 13 {
				return false
			}
			seenIHDR = true
			w = int(binary.BigEndian.Uint32(body[0:4]))
			h = int(binary.BigEndian.Uint32(body[4:8]))
			depth, ct, comp, filt, inter := body[8], body[9], body[10], body[11], body[12]
			if w < 1 || h < 1 || w > 1<<16 || h > 1<<16 || depth != 8 || (ct != 2 && ct != 6) || comp != 0 || filt != 0 || inter != 0 {
				return false
			}
			ctype = int(ct)
		case "IDAT":
			if idatDone {
				return false
			}
			d.idat = append(d.idat, body)
		case "IEND":
			if n != 0 || len(d.idat) == 0 {
				return false
			}
			seenIEND = true
		case "PLTE", "tRNS":
			return false
		default:
			if len(d.idat) > 0 {
				idatDone = true
			}
		}
	}
	stream := d.idat[0]
	if len(d.idat) > 1 {
		d.joined = d.joined[:0]
		for _, b := range d.idat {
			d.joined = append(d.joined, b...)
		}
		stream = d.joined
	}
	bpp := 3
	if ctype == 6 {
		bpp = 4
	}
	rowBytes := w * bpp
	stride := 1 + rowBytes
	// Inflate the whole stream at once into the filtered scanlines (filter
	// byte + row); the decoder checks the exact size and the Adler-32.
	// DEFLATE expands at most 1032:1 (a 258-byte match in 2 bits), so a
	// stream too short for the image is rejected before allocating.
	if uint64(h)*uint64(stride) > 1032*uint64(len(stream))+1032 {
		return false
	}
	if cap(d.raw) < h*stride+pngRawSlack {
		d.raw = make([]uint8, h*stride+pngRawSlack)
	}
	raw := d.raw[:h*stride]
	if _, err := d.inf.Zlib(raw, stream); err != nil {
		return false
	}
	if cap(d.zero) < rowBytes+pngRawSlack {
		d.zero = make([]uint8, rowBytes+pngRawSlack)
	}
	d.zero = d.zero[:rowBytes+pngRawSlack]
	clear(d.zero)
	if ctype == 2 && paeth8Enabled() {
		// Unfilter straight into dst (8/16-row AVX2 Paeth kernels).
		dst.setSize(w, h)
		return unfilterRGBOut(dst.Pix, d.raw[:h*stride+pngRawSlack], d.zero, w, h)
	}
	// Unfilter in place (runs of four (AVX2) or two (SSE2) Paeth rows go
	// through the wavefront kernels), then pack the rows into dst:
	// truecolour rows are copied, RGBA rows lose their alpha. (Copying
	// first and unfiltering in dst.Pix measured the same.)
	row := func(y int) []uint8 { return raw[y*stride+1 : (y+1)*stride] }
	for y := 0; y < h; y++ {
		cur, prev := row(y), d.zero
		if y > 0 {
			prev = row(y - 1)
		}
		f := raw[y*stride]
		if y+3 < h && f == 4 && raw[(y+1)*stride] == 4 && raw[(y+2)*stride] == 4 && raw[(y+3)*stride] == 4 &&
			paeth4Fast(cur, row(y+1), row(y+2), row(y+3), prev, bpp) {
			y += 3
			continue
		}
		if f == 4 && y+1 < h && raw[(y+1)*stride] == 4 &&
			paeth2Fast(cur, row(y+1), prev, bpp) {
			y++
			continue
		}
		if !unfilter(f, cur, prev, bpp) {
			return false
		}
	}
	dst.setSize(w, h)
	if ctype == 2 {
		for y := 0; y < h; y++ {
			copy(dst.Pix[y*rowBytes:(y+1)*rowBytes], row(y))
		}
		return true
	}
	for y := 0; y < h; y++ {
		cur := row(y)
		o := dst.Pix[y*w*3 : (y+1)*w*3]
		for x := 0; x < w; x++ {
			o[3*x], o[3*x+1], o[3*x+2] = cur[4*x], cur[4*x+1], cur[4*x+2]
		}
	}
	return true
}

// unfilter reverses PNG filtering of one scanline in place.
func unfilter(f byte, cur, prev []uint8, bpp int) bool {
	prev = prev[:len(cur)]
	switch f {
	case 0:
	case 1: // Sub
		for i := bpp; i < len(cur); i++ {
			cur[i] += cur[i-bpp]
		}
	case 2: // Up
		for i, p := range prev {
			cur[i] += p
		}
	case 3: // Average
		for i := 0; i < bpp; i++ {
			cur[i] += prev[i] / 2
		}
		for i := bpp; i < len(cur); i++ {
			cur[i] += uint8((int(cur[i-bpp]) + int(prev[i])) / 2)
		}
	case 4: // Paeth
		if !paethFast(cur, prev, bpp) {
			paeth(cur, prev, bpp)
		}
	default:
		return false
	}
	return true
}

// paeth reverses the Paeth filter channel by channel, keeping the left (a)
// and upper-left (c) samples in registers (the structure of image/png's
// filterPaeth). A branch-free selection was measured slower on camera
// frames, whose branches predict well.
func paeth(cur, prev []uint8, bpp int) {
	prev = prev[:len(cur)]
	for i := 0; i < bpp; i++ {
		a, c := 0, 0
		for j := i; j < len(cur); j += bpp {
			b := int(prev[j])
			pa := b - c
			pb := a - c
			pc := pa + pb
			pa = (pa ^ (pa >> 63)) - (pa >> 63)
			pb = (pb ^ (pb >> 63)) - (pb >> 63)
			pc = (pc ^ (pc >> 63)) - (pc >> 63)
			if pa <= pb && pa <= pc {
				// predictor a
			} else if pb <= pc {
				a = b
			} else {
				a = c
			}
			a = (a + int(cur[j])) & 0xff
			cur[j] = uint8(a)
			c = b
		}
	}
}

// paethPredict is the PNG Paeth predictor of one sample (a left, b up,
// c upper-left; ties favour a, then b).
func paethPredict(a, b, c uint8) uint8 {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := p-int(a), p-int(b), p-int(c)
	if pa < 0 {
		pa = -pa
	}
	if pb < 0 {
		pb = -pb
	}
	if pc < 0 {
		pc = -pc
	}
	if pa <= pb && pa <= pc {
		return a
	}
	if pb <= pc {
		return b
	}
	return c
}

// paethPixels reverses the Paeth filter of pixels [from, to) of a 3-byte
// scanline whose pixels before from are already unfiltered (up = the
// unfiltered row above).
func paethPixels(cur, up []uint8, from, to int) {
	for j := 3 * from; j < 3*to; j++ {
		var a, c uint8
		if j >= 3 {
			a, c = cur[j-3], up[j-3]
		}
		cur[j] += paethPredict(a, up[j], c)
	}
}
