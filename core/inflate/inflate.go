// Package inflate is a one-shot zlib (RFC 1950) and raw DEFLATE (RFC 1951)
// decoder for streams whose decompressed size is known in advance, such as
// the IDAT stream of a PNG image. The whole compressed stream is a []byte
// and the whole output goes into a caller-provided []byte that doubles as
// the LZ77 window, so there is no io.Reader, no separate dictionary buffer
// and no copying out of a window.
//
// The decoder is strict: a stream must decompress to exactly len(dst)
// bytes, must end exactly at the end of src (no trailing bytes), and every
// malformation RFC 1950/1951 or compress/zlib reject is an error wrapping
// one of the sentinel errors below. It never panics and never touches
// memory outside src and dst.
package inflate

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by Decoder wraps exactly one of
// them (test with errors.Is); the wrapping message names the input offset.
var (
	// ErrHeader: the 2-byte zlib header is malformed (CM ≠ 8, CINFO > 7,
	// FCHECK wrong).
	ErrHeader = errors.New("inflate: invalid zlib header")
	// ErrDictionary: the zlib header asks for a preset dictionary (FDICT),
	// which is not supported.
	ErrDictionary = errors.New("inflate: preset dictionary not supported")
	// ErrCorrupt: the DEFLATE data is malformed (bad block type, stored
	// length mismatch, over-subscribed or incomplete code, invalid symbol,
	// distance beyond the start of the output, ...).
	ErrCorrupt = errors.New("inflate: corrupt deflate data")
	// ErrUnexpectedEOF: src ends before the stream does.
	ErrUnexpectedEOF = errors.New("inflate: unexpected end of input")
	// ErrOutputOverflow: the stream decompresses to more than len(dst)
	// bytes.
	ErrOutputOverflow = errors.New("inflate: output longer than destination")
	// ErrOutputShort: the stream ends before filling dst.
	ErrOutputShort = errors.New("inflate: output shorter than destination")
	// ErrChecksum: the zlib Adler-32 trailer does not match the output.
	ErrChecksum = errors.New("inflate: adler-32 checksum mismatch")
	// ErrTrailingData: src holds bytes after the end of the stream (after
	// the Adler-32 trailer for zlib, after the byte holding the last bit of
	// the final block for raw DEFLATE).
	ErrTrailingData = errors.New("inflate: trailing data after stream")
)

// Table geometry. A lookup takes litBits (distBits) bits of the bit buffer;
// longer codes continue in a sub-table. The sizes bound the worst case:
// every code longer than the primary width starts at most one sub-table of
// at most 2^(15-primary) entries.
const (
	litBits       = 11
	distBits      = 8
	clenBits      = 7
	litTableSize  = 1<<litBits + 288<<(15-litBits)
	distTableSize = 1<<distBits + 30<<(15-distBits)
	clenTableSize = 1 << clenBits
)

// A table entry is a uint32:
//
//	bits 0-4   bits to consume: code length plus the extra bits that follow
//	           it (length/distance), or litBits/distBits for a sub-table
//	           pointer; inside a sub-table the code length counts only the
//	           bits after the primary ones
//	bits 8-11  code length (extra-bits value = consumed bits >> this), or
//	           sub-table width for a pointer
//	bits 13-15 flagInvalid, flagSub, flagEOB
//	bits 16-30 value: literal byte, length/distance base, sub-table start,
//	           code-length symbol
//	bit  31    flagLiteral
const (
	flagLiteral = 1 << 31
	flagEOB     = 1 << 15
	flagSub     = 1 << 14
	flagInvalid = 1 << 13
)

// Decoder decodes complete zlib or raw DEFLATE streams. The zero value is
// ready to use; a Decoder keeps its Huffman tables between calls so that
// decoding does not allocate. Not safe for concurrent use: use one Decoder
// per goroutine (or a sync.Pool).
type Decoder struct {
	src, dst []byte
	bitbuf   uint64 // next bits of src, LSB first
	nbits    uint   // valid bits in bitbuf; bits above may hold copies of src[in]
	in       int    // next src byte not yet in bitbuf
	out      int    // bytes written to dst

	lit  [litTableSize]uint32
	dist [distTableSize]uint32
	clen [clenTableSize]uint32
	lens [286 + 30]uint8
}

// Zlib decodes the zlib stream src into dst, which must be exactly the
// decompressed size. It returns the number of bytes written to dst (len(dst)
// on success). The Adler-32 trailer is verified, and src must end right
// after it. On error, dst holds partial output.
func (d *Decoder) Zlib(dst, src []byte) (n int, err error) {
	if len(src) < 2 {
		return 0, fmt.Errorf("inflate: zlib header: %w", ErrUnexpectedEOF)
	}
	cmf, flg := src[0], src[1]
	if cmf&0x0f != 8 || cmf>>4 > 7 || (uint(cmf)<<8|uint(flg))%31 != 0 {
		return 0, fmt.Errorf("inflate: zlib header %#02x %#02x: %w", cmf, flg, ErrHeader)
	}
	if flg&0x20 != 0 {
		return 0, fmt.Errorf("inflate: zlib header: %w", ErrDictionary)
	}
	end, err := d.decode(dst, src, 2)
	if err != nil {
		return d.out, err
	}
	if len(src)-end < 4 {
		return d.out, fmt.Errorf("inflate: adler-32 trailer at byte %d: %w", end, ErrUnexpectedEOF)
	}
	want := binary.BigEndian.Uint32(src[end:])
	if got := Adler32(dst); got != want {
		return d.out, fmt.Errorf("inflate: adler-32 %#08x, trailer says %#08x: %w", got, want, ErrChecksum)
	}
	if end+4 != len(src) {
		return d.out, fmt.Errorf("inflate: %d bytes after the adler-32 trailer: %w", len(src)-end-4, ErrTrailingData)
	}
	return d.out, nil
}

// Raw decodes the raw DEFLATE stream src into dst, which must be exactly the
// decompressed size; src must end with the byte that holds the last bit of
// the final block. It returns the number of bytes written to dst.
func (d *Decoder) Raw(dst, src []byte) (n int, err error) {
	end, err := d.decode(dst, src, 0)
	if err != nil {
		return d.out, err
	}
	if end != len(src) {
		return d.out, fmt.Errorf("inflate: %d bytes after the final block: %w", len(src)-end, ErrTrailingData)
	}
	return d.out, nil
}

// decode runs the blocks of the DEFLATE stream that starts at src[start]
// and returns the offset of the first byte after the final block.
func (d *Decoder) decode(dst, src []byte, start int) (end int, err error) {
	d.src, d.dst = src, dst
	d.bitbuf, d.nbits, d.in, d.out = 0, 0, start, 0
	defer func() { d.src, d.dst = nil, nil }()
	for {
		if err := d.need(3); err != nil {
			return 0, err
		}
		hdr := d.bitbuf & 7
		d.consume(3)
		switch hdr >> 1 {
		case 0:
			err = d.stored()
		case 1:
			err = d.huffman(&fixedLit, &fixedDist)
		case 2:
			if err = d.dynamic(); err == nil {
				err = d.huffman(&d.lit, &d.dist)
			}
		default:
			err = d.corrupt("block type 3")
		}
		if err != nil {
			return 0, err
		}
		if hdr&1 != 0 {
			break
		}
	}
	if d.out != len(dst) {
		return 0, fmt.Errorf("inflate: stream ends after %d of %d bytes: %w", d.out, len(dst), ErrOutputShort)
	}
	// Drop the partial byte; whole bytes still in the bit buffer are unread.
	return d.in - int(d.nbits>>3), nil
}

// pos is the input offset (in bytes) of the next unread bit.
func (d *Decoder) pos() int { return d.in - int(d.nbits>>3) }

func (d *Decoder) corrupt(what string) error {
	return fmt.Errorf("inflate: %s at input byte %d: %w", what, d.pos(), ErrCorrupt)
}

func (d *Decoder) eof(what string) error {
	return fmt.Errorf("inflate: %s at input byte %d: %w", what, d.pos(), ErrUnexpectedEOF)
}

// refill tops up the bit buffer byte by byte (safe anywhere in src).
func (d *Decoder) refill() {
	for d.nbits <= 56 && d.in < len(d.src) {
		d.bitbuf |= uint64(d.src[d.in]) << d.nbits
		d.in++
		d.nbits += 8
	}
}

// need makes at least n ≤ 57 bits available.
func (d *Decoder) need(n uint) error {
	if d.nbits < n {
		d.refill()
		if d.nbits < n {
			return d.eof("block data")
		}
	}
	return nil
}

func (d *Decoder) consume(n uint) {
	d.bitbuf >>= n & 63
	d.nbits -= n
}

// stored copies a stored block.
func (d *Decoder) stored() error {
	// Go to the byte boundary and empty the bit buffer back into src.
	d.in -= int(d.nbits >> 3)
	d.bitbuf, d.nbits = 0, 0
	if len(d.src)-d.in < 4 {
		return d.eof("stored block header")
	}
	n := int(binary.LittleEndian.Uint16(d.src[d.in:]))
	nn := int(binary.LittleEndian.Uint16(d.src[d.in+2:]))
	if n != ^nn&0xffff {
		return d.corrupt("stored block length check")
	}
	d.in += 4
	if len(d.dst)-d.out < n {
		return fmt.Errorf("inflate: stored block of %d bytes at output %d: %w", n, d.out, ErrOutputOverflow)
	}
	if len(d.src)-d.in < n {
		return d.eof("stored block")
	}
	copy(d.dst[d.out:], d.src[d.in:d.in+n])
	d.in += n
	d.out += n
	return nil
}

// codeLengthOrder is the order of the code-length code lengths (RFC 1951
// §3.2.7).
var codeLengthOrder = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

// dynamic reads a dynamic block header and builds d.lit and d.dist.
func (d *Decoder) dynamic() error {
	if err := d.need(14); err != nil {
		return err
	}
	nlit := int(d.bitbuf&31) + 257
	ndist := int(d.bitbuf>>5&31) + 1
	nclen := int(d.bitbuf>>10&15) + 4
	d.consume(14)
	if nlit > 286 || ndist > 30 {
		return d.corrupt(fmt.Sprintf("dynamic header with %d literal/length and %d distance codes", nlit, ndist))
	}
	var cl [19]uint8
	for i := 0; i < nclen; i++ {
		if err := d.need(3); err != nil {
			return err
		}
		cl[codeLengthOrder[i]] = uint8(d.bitbuf & 7)
		d.consume(3)
	}
	if err := build(d.clen[:], clenBits, cl[:], clenMeta[:]); err != nil {
		return d.corrupt("code length code: " + err.Error())
	}
	n := nlit + ndist
	lens := d.lens[:n]
	for i := 0; i < n; {
		d.refill()
		e := d.clen[d.bitbuf&(clenTableSize-1)]
		l := uint(e & 31)
		if e&flagInvalid != 0 {
			if d.nbits < clenBits {
				return d.eof("code lengths")
			}
			return d.corrupt("invalid code length code")
		}
		if l > d.nbits {
			return d.eof("code lengths")
		}
		d.consume(l)
		sym := e >> 16 & 0x7fff
		if sym < 16 {
			lens[i] = uint8(sym)
			i++
			continue
		}
		var rep int
		var val uint8
		switch sym {
		case 16:
			if i == 0 {
				return d.corrupt("repeat of no code length")
			}
			if d.nbits < 2 {
				return d.eof("code lengths")
			}
			rep, val = 3+int(d.bitbuf&3), lens[i-1]
			d.consume(2)
		case 17:
			if d.nbits < 3 {
				return d.eof("code lengths")
			}
			rep = 3 + int(d.bitbuf&7)
			d.consume(3)
		default:
			if d.nbits < 7 {
				return d.eof("code lengths")
			}
			rep = 11 + int(d.bitbuf&127)
			d.consume(7)
		}
		if rep > n-i {
			return d.corrupt("code length repeat past the end")
		}
		for j := range rep {
			lens[i+j] = val
		}
		i += rep
	}
	if lens[256] == 0 {
		return d.corrupt("missing end-of-block code")
	}
	if err := build(d.lit[:], litBits, lens[:nlit], litMeta[:]); err != nil {
		return d.corrupt("literal/length code: " + err.Error())
	}
	if err := build(d.dist[:], distBits, lens[nlit:], distMeta[:]); err != nil {
		return d.corrupt("distance code: " + err.Error())
	}
	return nil
}
