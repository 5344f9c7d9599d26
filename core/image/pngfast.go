package image

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/zlib"
)

// pngFast decodes the PNG shape camera frames arrive in — 8-bit truecolour
// (colour type 2) or truecolour+alpha (6), not interlaced — straight into an
// RGB buffer: the unfiltered scanlines of colour type 2 already are RGB
// rows, so no intermediate image is built and the inflater's memory is
// reused across calls. Any other shape, and anything irregular (bad CRC,
// PLTE/tRNS chunks, IDAT split by other chunks, zlib or checksum trouble,
// missing IEND), makes it report "not handled" so the caller falls back to
// image/png, which then defines the error. Differential-tested against
// image/png by TestPNGFastMatchesStdlib and FuzzPNGFast. Inflate uses
// klauspost/compress (same format and checks as compress/zlib, faster on a
// *bytes.Reader and allocation-free).
type pngFast struct {
	zr     io.ReadCloser // zlib reader, reset per image
	idat   [][]byte      // IDAT payloads in order
	joined []byte        // concatenated IDAT payloads when there are several
	br     bytes.Reader  // the zlib stream; a *bytes.Reader gets the inflater's fastest path
	zero   []uint8       // the all-zero "previous row" of the first scanline
	row    []uint8       // scanline scratch for colour type 6
	prev   []uint8
	filt   []uint8 // filter type byte of each scanline (colour type 2)
	fbyte  [1]byte
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

// decode returns handled=false when the stdlib decoder must take over.
func (d *pngFast) decode(dst *RGB, data []byte) (handled bool) {
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
	d.br.Reset(stream)
	if d.zr == nil {
		zr, err := zlib.NewReader(&d.br)
		if err != nil {
			return false
		}
		d.zr = zr
	} else if err := d.zr.(zlib.Resetter).Reset(&d.br, nil); err != nil {
		return false
	}
	bpp := 3
	if ctype == 6 {
		bpp = 4
	}
	rowBytes := w * bpp
	dst.setSize(w, h)
	if cap(d.zero) < rowBytes {
		d.zero = make([]uint8, rowBytes)
	}
	d.zero = d.zero[:rowBytes]
	clear(d.zero)
	var cur, prev []uint8
	if ctype == 6 {
		if cap(d.row) < rowBytes {
			d.row = make([]uint8, rowBytes)
			d.prev = make([]uint8, rowBytes)
		}
		cur, prev = d.row[:rowBytes], d.prev[:rowBytes]
		clear(prev)
	}
	if ctype == 2 {
		// Inflate every scanline into place first (filter bytes aside), then
		// unfilter, so that runs of four (AVX2) or two (SSE2) Paeth rows can
		// be unfiltered together by the wavefront kernels.
		if cap(d.filt) < h {
			d.filt = make([]uint8, h)
		}
		filt := d.filt[:h]
		for y := 0; y < h; y++ {
			if _, err := io.ReadFull(d.zr, filt[y:y+1]); err != nil {
				return false
			}
			if _, err := io.ReadFull(d.zr, dst.Pix[y*rowBytes:(y+1)*rowBytes]); err != nil {
				return false
			}
		}
		for y := 0; y < h; y++ {
			cur = dst.Pix[y*rowBytes : (y+1)*rowBytes]
			if y == 0 {
				prev = d.zero
			} else {
				prev = dst.Pix[(y-1)*rowBytes : y*rowBytes]
			}
			if y+3 < h && filt[y] == 4 && filt[y+1] == 4 && filt[y+2] == 4 && filt[y+3] == 4 &&
				paeth4Fast(cur, dst.Pix[(y+1)*rowBytes:(y+2)*rowBytes], dst.Pix[(y+2)*rowBytes:(y+3)*rowBytes],
					dst.Pix[(y+3)*rowBytes:(y+4)*rowBytes], prev, bpp) {
				y += 3
				continue
			}
			if filt[y] == 4 && y+1 < h && filt[y+1] == 4 &&
				paeth2Fast(cur, dst.Pix[(y+1)*rowBytes:(y+2)*rowBytes], prev, bpp) {
				y++
				continue
			}
			if !unfilter(filt[y], cur, prev, bpp) {
				return false
			}
		}
	}
	for y := 0; y < h && ctype == 6; y++ {
		if _, err := io.ReadFull(d.zr, d.fbyte[:]); err != nil {
			return false
		}
		if _, err := io.ReadFull(d.zr, cur); err != nil {
			return false
		}
		if !unfilter(d.fbyte[0], cur, prev, bpp) {
			return false
		}
		o := dst.Pix[y*w*3 : (y+1)*w*3]
		for x := 0; x < w; x++ {
			o[3*x], o[3*x+1], o[3*x+2] = cur[4*x], cur[4*x+1], cur[4*x+2]
		}
		cur, prev = prev, cur
	}
	// The stream must end here (this also verifies the Adler-32 checksum).
	if n, err := d.zr.Read(d.fbyte[:]); n != 0 || err != io.EOF {
		return false
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
