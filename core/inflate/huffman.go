package inflate

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Fast-loop slack: a 64-bit refill reads 8 bytes of src, and a match writes
// at most 258 bytes plus some over-copy past its end: the Go loop writes at
// most max(out+32, end+16) bytes, the assembly loop max(out+64, end+16),
// both below out+outSlack.
const (
	inSlack  = 8
	outSlack = 258 + 32
)

// huffman decodes the symbols of one fixed or dynamic block until its
// end-of-block code. The bit-buffer state lives in locals and is stored
// back on return.
func (d *Decoder) huffman(lt *[litTableSize]uint32, dt *[distTableSize]uint32) error {
	src, dst := d.src, d.dst
	bitbuf, nbits, in, out := d.bitbuf, d.nbits, d.in, d.out
	inLimit := len(src) - inSlack
	outLimit := len(dst) - outSlack

	// The assembly loop (amd64 with BMI2) does what the Go fast loop below
	// does and hands back at a limit or an unusual symbol.
	if status, ok, bb, nb, i, o := huffmanAsm(lt, dt, src, dst, bitbuf, nbits, in, out); ok {
		bitbuf, nbits, in, out = bb, nb, i, o
		switch status {
		case fastEOB:
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return nil
		case fastBadLit:
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return d.corrupt("invalid literal/length code")
		case fastBadDist:
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return d.corrupt("invalid distance code")
		case fastDistTooFar:
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return d.corrupt(fmt.Sprintf("distance beyond output start (%d bytes written)", out))
		}
	}

	// Fast loop: no end-of-input or end-of-output checks beyond the two
	// limits. At the top of each symbol at least 48 bits are buffered:
	// enough for literal/length code + extra (≤ 20) + distance code + extra
	// (≤ 28).
fast:
	for out <= outLimit {
		if nbits < 48 {
			if in > inLimit {
				break
			}
			bitbuf |= binary.LittleEndian.Uint64(src[in:]) << (nbits & 63)
			in += int((63 - nbits) >> 3)
			nbits |= 56
		}
		e := lt[bitbuf&(1<<litBits-1)]
		if e&flagSub != 0 {
			bitbuf >>= litBits
			nbits -= litBits
			e = lt[(e>>16&0x7fff)+uint32(bitbuf)&(1<<(e>>8&15)-1)]
		}
		n := e & 31
		v := bitbuf
		bitbuf >>= n
		nbits -= uint(n)
		if int32(e) < 0 {
			dst[out] = byte(e >> 16)
			out++
			continue
		}
		if e&(flagEOB|flagInvalid) != 0 {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			if e&flagEOB != 0 {
				return nil
			}
			return d.corrupt("invalid literal/length code")
		}
		length := int(e>>16&0x7fff) + int(v&(1<<n-1)>>(e>>8&15))

		e = dt[bitbuf&(1<<distBits-1)]
		if e&flagSub != 0 {
			bitbuf >>= distBits
			nbits -= distBits
			e = dt[(e>>16&0x7fff)+uint32(bitbuf)&(1<<(e>>8&15)-1)]
		}
		if e&flagInvalid != 0 {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return d.corrupt("invalid distance code")
		}
		n = e & 31
		dist := int(e>>16&0x7fff) + int(bitbuf&(1<<n-1)>>(e>>8&15))
		bitbuf >>= n
		nbits -= uint(n)
		if dist > out {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return d.corrupt(fmt.Sprintf("distance %d beyond output start (%d bytes written)", dist, out))
		}
		// Copy length bytes from out-dist, writing whole words; the words
		// may run up to 31 bytes past the match (inside dst: outSlack).
		// Bounds: 0 ≤ s = out−dist and end+31 < out+outSlack ≤ len(dst), so
		// every word access below lies inside dst; the accesses go through
		// unsafe pointers to skip the per-word bounds checks.
		end := out + length
		s := out - dist
		base := unsafe.Pointer(unsafe.SliceData(dst))
		switch {
		case dist >= 16:
			// Most matches are short: copy 32 bytes unconditionally.
			p, q := unsafe.Add(base, out), unsafe.Add(base, s)
			a0, a1 := *(*uint64)(q), *(*uint64)(unsafe.Add(q, 8))
			*(*uint64)(p), *(*uint64)(unsafe.Add(p, 8)) = a0, a1
			a0, a1 = *(*uint64)(unsafe.Add(q, 16)), *(*uint64)(unsafe.Add(q, 24))
			*(*uint64)(unsafe.Add(p, 16)), *(*uint64)(unsafe.Add(p, 24)) = a0, a1
			for i := 32; i < length; i += 16 {
				a0, a1 = *(*uint64)(unsafe.Add(q, i)), *(*uint64)(unsafe.Add(q, i+8))
				*(*uint64)(unsafe.Add(p, i)), *(*uint64)(unsafe.Add(p, i+8)) = a0, a1
			}
		case dist >= 8:
			for ; out < end; out, s = out+8, s+8 {
				*(*uint64)(unsafe.Add(base, out)) = *(*uint64)(unsafe.Add(base, s))
			}
		case dist == 1:
			w := uint64(dst[s]) * 0x0101010101010101
			for ; out < end; out += 16 {
				*(*uint64)(unsafe.Add(base, out)) = w
				*(*uint64)(unsafe.Add(base, out+8)) = w
			}
		default:
			// Period 2..7: build one word of the pattern, then copy words
			// from a multiple of the period that is at least 8 back.
			w := *(*uint64)(unsafe.Add(base, s)) & (1<<(8*uint(dist)) - 1)
			w |= w << (8 * uint(dist))
			if dist < 4 {
				w |= w << (16 * uint(dist) & 63)
			}
			*(*uint64)(unsafe.Add(base, out)) = w
			step := int(periodStep[dist&7])
			for p := out + 8; p < end; p += 8 {
				*(*uint64)(unsafe.Add(base, p)) = *(*uint64)(unsafe.Add(base, p-step))
			}
		}
		out = end
		continue fast
	}

	// Careful loop: every read and write is checked.
	for {
		for nbits <= 56 && in < len(src) {
			bitbuf |= uint64(src[in]) << nbits
			in++
			nbits += 8
		}
		e := lt[bitbuf&(1<<litBits-1)]
		if e&flagSub != 0 {
			if nbits < litBits {
				d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
				return d.eof("literal/length code")
			}
			bitbuf >>= litBits
			nbits -= litBits
			e = lt[(e>>16&0x7fff)+uint32(bitbuf)&(1<<(e>>8&15)-1)]
		}
		n := uint(e & 31)
		if e&flagInvalid != 0 || n > nbits {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			if e&flagInvalid != 0 && nbits >= 15 {
				return d.corrupt("invalid literal/length code")
			}
			if e&flagInvalid != 0 {
				// Not enough input to tell; either way the stream is bad.
				return d.corrupt("invalid or truncated literal/length code")
			}
			return d.eof("literal/length code")
		}
		v := bitbuf
		bitbuf >>= n
		nbits -= n
		if int32(e) < 0 {
			if out >= len(dst) {
				d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
				return fmt.Errorf("inflate: literal at output %d: %w", out, ErrOutputOverflow)
			}
			dst[out] = byte(e >> 16)
			out++
			continue
		}
		if e&flagEOB != 0 {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return nil
		}
		length := int(e>>16&0x7fff) + int(v&(1<<n-1)>>(e>>8&15))

		for nbits <= 56 && in < len(src) {
			bitbuf |= uint64(src[in]) << nbits
			in++
			nbits += 8
		}
		e = dt[bitbuf&(1<<distBits-1)]
		if e&flagSub != 0 {
			if nbits < distBits {
				d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
				return d.eof("distance code")
			}
			bitbuf >>= distBits
			nbits -= distBits
			e = dt[(e>>16&0x7fff)+uint32(bitbuf)&(1<<(e>>8&15)-1)]
		}
		n = uint(e & 31)
		if e&flagInvalid != 0 {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return d.corrupt("invalid distance code")
		}
		if n > nbits {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return d.eof("distance code")
		}
		dist := int(e>>16&0x7fff) + int(bitbuf&(1<<n-1)>>(e>>8&15))
		bitbuf >>= n
		nbits -= n
		if dist > out {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return d.corrupt(fmt.Sprintf("distance %d beyond output start (%d bytes written)", dist, out))
		}
		if length > len(dst)-out {
			d.bitbuf, d.nbits, d.in, d.out = bitbuf, nbits, in, out
			return fmt.Errorf("inflate: match of %d bytes at output %d: %w", length, out, ErrOutputOverflow)
		}
		if dist >= length {
			copy(dst[out:out+length], dst[out-dist:])
		} else {
			m := dst[out-dist : out+length]
			for i := dist; i < len(m); i++ {
				m[i] = m[i-dist]
			}
		}
		out += length
	}
}

// periodStep[d] for a match distance d in 2..7 is a multiple of d in
// [8, d+8]: copying words from that far back repeats the period-d pattern
// once the first 8 bytes are written.
var periodStep = [8]uint8{0, 8, 8, 9, 8, 10, 12, 14}
