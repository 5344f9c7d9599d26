package inflate

import (
	"errors"
	"math/bits"
)

// Per-symbol entry templates (value, extra bits in bits 8-11, flags); build
// turns them into entries with entry().
var (
	litMeta  [288]uint32
	distMeta [32]uint32
	clenMeta [19]uint32

	fixedLit  [litTableSize]uint32
	fixedDist [distTableSize]uint32
)

var (
	lengthBase  = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase    = [30]uint16{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra   = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
)

func init() {
	for s := range litMeta {
		switch {
		case s < 256:
			litMeta[s] = flagLiteral | uint32(s)<<16
		case s == 256:
			litMeta[s] = flagEOB
		case s < 286:
			litMeta[s] = uint32(lengthBase[s-257])<<16 | uint32(lengthExtra[s-257])<<8
		default:
			litMeta[s] = flagInvalid
		}
	}
	for s := range distMeta {
		if s < 30 {
			distMeta[s] = uint32(distBase[s])<<16 | uint32(distExtra[s])<<8
		} else {
			distMeta[s] = flagInvalid
		}
	}
	for s := range clenMeta {
		clenMeta[s] = uint32(s) << 16
	}
	var l [288]uint8
	for s := range l {
		switch {
		case s < 144:
			l[s] = 8
		case s < 256:
			l[s] = 9
		case s < 280:
			l[s] = 7
		default:
			l[s] = 8
		}
	}
	if build(fixedLit[:], litBits, l[:], litMeta[:]) != nil {
		panic("inflate: fixed literal/length table")
	}
	for s := range 32 {
		l[s] = 5
	}
	if build(fixedDist[:], distBits, l[:32], distMeta[:]) != nil {
		panic("inflate: fixed distance table")
	}
}

var (
	errOversubscribed = errors.New("over-subscribed code lengths")
	errIncomplete     = errors.New("incomplete code lengths")
	errTableSize      = errors.New("code table overflow")
)

// build fills table with the decoding table of the canonical Huffman code
// given by lens (0 = symbol unused): a primary table of 1<<primary entries
// indexed by the next primary bits of input (LSB first), followed by
// sub-tables for longer codes. meta[sym] is the entry template of each
// symbol. Like compress/flate and zlib, build rejects over-subscribed codes
// and incomplete codes, except a single code of length 1 (its other bit
// pattern decodes as invalid) and the empty code (every lookup invalid:
// a block that uses it fails).
func build(table []uint32, primary uint, lens []uint8, meta []uint32) error {
	var count [16]int
	for _, l := range lens {
		count[l&15]++
	}
	count[0] = 0
	left := 1
	codes := 0
	for l := 1; l <= 15; l++ {
		left <<= 1
		left -= count[l]
		if left < 0 {
			return errOversubscribed
		}
		codes += count[l]
	}
	size := 1 << primary
	if left > 0 {
		if codes != 0 && !(codes == 1 && count[1] == 1) {
			return errIncomplete
		}
		for i := range table[:size] {
			table[i] = flagInvalid
		}
		if codes == 0 {
			return nil
		}
	}
	// Sort symbols by (length, symbol): canonical code order.
	var offs [17]int
	for l := 1; l <= 15; l++ {
		offs[l+1] = offs[l] + count[l]
	}
	var sorted [288]uint16
	for s, l := range lens {
		if l != 0 {
			sorted[offs[l]] = uint16(s)
			offs[l]++
		}
	}
	code, idx := 0, 0
	next := size // first free sub-table slot
	curPrefix, subStart := -1, 0
	mask := size - 1
	for l := 1; l <= 15; l++ {
		for c := 0; c < count[l]; c++ {
			sym := sorted[idx]
			idx++
			rev := int(bits.Reverse16(uint16(code)) >> (16 - l))
			code++
			if uint(l) <= primary {
				e := entry(meta[sym], uint32(l))
				for i := rev; i < size; i += 1 << l {
					table[i] = e
				}
				continue
			}
			prefix := rev & mask
			if prefix != curPrefix {
				// New sub-table: wide enough for the codes sharing this
				// prefix (they come next, in canonical order).
				curPrefix = prefix
				sub := uint(l) - primary
				room := 1<<sub - (count[l] - c)
				for room > 0 && primary+sub < 15 {
					sub++
					room = room<<1 - count[primary+sub]
				}
				if next+1<<sub > len(table) {
					return errTableSize
				}
				subStart = next
				next += 1 << sub
				table[prefix] = flagSub | uint32(subStart)<<16 | uint32(sub)<<8 | uint32(primary)
			}
			sub := int(table[prefix] >> 8 & 15)
			e := entry(meta[sym], uint32(uint(l)-primary))
			for i := rev >> primary; i < 1<<sub; i += 1 << (uint(l) - primary) {
				table[subStart+i] = e
			}
		}
		code <<= 1
	}
	return nil
}

// entry makes the table entry of a symbol with template m whose code has
// l bits at this table level: bits 0-4 hold l plus the symbol's extra bits
// (all consumed at once), bits 8-11 hold l (the extra-bits value is the
// consumed bits shifted right by l).
func entry(m, l uint32) uint32 {
	x := m >> 8 & 15
	return m&^(15<<8) | (l + x) | l<<8
}
