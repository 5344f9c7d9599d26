package tile

import (
	"fmt"
	"math"
)

// Magnitude bits of the block-float element codes (sign excluded, explicit
// leading one included): bfp8_b stores sign + 7, bfp4_b sign + 3.
const (
	Bfp8Mag = 7
	Bfp4Mag = 3
)

// Options tune the block-float packers. The zero value is tt-metal's default
// host packer.
type Options struct {
	// LowerExponent enables the optional "Emax or Emax−1" search of newer
	// tt-metal (bfp_exponent_search.hpp): per packed row, Emax−1 is used when
	// its squared error, computed in float64, is strictly lower. The search is
	// skipped when Emax ≤ the magnitude bits or Emax = 255. No default
	// tt-metal path was found to enable it; weights packed with it still
	// decode with the standard unpacker.
	LowerExponent bool
}

// SharedExp is the shared exponent tt-metal's packer gives a row of 16
// values: the maximum raw fp32 exponent field. Zeros and denormals count as
// 0; Inf and NaN count as 255.
func SharedExp(row []float32) uint8 {
	var m uint32
	for _, f := range row {
		if e := math.Float32bits(f) >> 23 & 0xFF; e > m {
			m = e
		}
	}
	return uint8(m)
}

// EncodeBfp converts the fp32 bits u into a block-float element code with
// magBits magnitude bits (7 for bfp8_b, 3 for bfp4_b) under the shared
// exponent shared, exactly as tt-metal's convert_u32_to_bfp<…, false>:
// zeros and denormals become 0; the 24-bit significand (hidden one made
// explicit) is shifted right by shared − e, dropping the shifted-out bits (no
// sticky bit), then rounded to nearest even at bit 24 − magBits and saturated
// at 2^magBits − 1 (no exponent bump). A zero magnitude never carries the
// sign. Inf encodes as magnitude 2^(magBits−1), NaN keeps its top fraction
// bits.
func EncodeBfp(u uint32, shared uint8, magBits uint) uint8 {
	e := u >> 23 & 0xFF
	if e == 0 {
		return 0
	}
	m := u&0x7FFFFF | 0x800000
	if s := uint32(shared); s > e {
		if d := s - e; d >= 32 {
			m = 0
		} else {
			m >>= d
		}
	}
	// round half to even at bit shift: adding tie−1 plus the guard bit (the
	// new LSB) carries exactly when the dropped bits exceed the tie, or equal
	// it with an odd guard
	shift := 24 - magBits
	m = (m + (1<<(shift-1) - 1) + (m>>shift)&1) >> shift
	if max := uint32(1)<<magBits - 1; m > max {
		m = max
	}
	if m == 0 {
		return 0
	}
	return uint8(u>>31)<<magBits | uint8(m)
}

// DecodeBfp converts a block-float element code with magBits magnitude bits
// under shared exponent shared back to float32, as tt-metal's host unpacker
// does: magnitude 0 gives ±0 (the sign bit is kept); otherwise the magnitude
// is normalised (shift left until its top bit is set), the exponent becomes
// shared − shift and the remaining bits form the fraction. When shift >
// shared the value is flushed to +0 (the SIMD unpacker's denormal flush).
// For ordinary exponents the result is m·2^(shared−127−(magBits−1)) exactly;
// shared = 255 with magnitude 2^(magBits−1) gives ±Inf.
func DecodeBfp(code, shared uint8, magBits uint) float32 {
	sign := uint32(code>>magBits) & 1
	m := uint32(code) & (1<<magBits - 1)
	if m == 0 {
		return math.Float32frombits(sign << 31)
	}
	top := uint32(1) << (magBits - 1)
	shift := uint32(0)
	for m&top == 0 {
		m <<= 1
		shift++
	}
	if shift > uint32(shared) {
		return 0
	}
	frac := (m << 1) & (1<<magBits - 1) // drop the leading one
	exp := uint32(shared) - shift
	return math.Float32frombits(sign<<31 | exp<<23 | frac<<(23-magBits))
}

// encodeSat is EncodeBfp, except that a value whose own exponent exceeds
// the shared one (possible only under Options.LowerExponent) saturates to the
// largest magnitude, as the exponent search scores it.
func encodeSat(u uint32, shared uint8, magBits uint) uint8 {
	if u>>23&0xFF > uint32(shared) {
		return uint8(u>>31)<<magBits | uint8(1)<<magBits - 1
	}
	return EncodeBfp(u, shared, magBits)
}

// rowExp returns the shared exponent of one packed row under opt.
func rowExp(row []uint32, magBits uint, opt Options) uint8 {
	var emax uint32
	for _, u := range row {
		if e := u >> 23 & 0xFF; e > emax {
			emax = e
		}
	}
	s := uint8(emax)
	if opt.LowerExponent && preferLower(row, s, magBits) {
		s--
	}
	return s
}

// preferLower reports whether Emax−1 gives a strictly lower squared error
// than Emax for row (float64 arithmetic; values whose own exponent exceeds
// Emax−1 saturate for the lower candidate).
func preferLower(row []uint32, emax uint8, magBits uint) bool {
	if uint(emax) <= magBits || emax == 255 {
		return false
	}
	mask := uint8(1)<<magBits - 1
	lower := emax - 1
	scale := math.Ldexp(1, int(emax)-127-int(magBits-1))
	var e0, e1 float64
	for _, u := range row {
		c0 := EncodeBfp(u, emax, magBits)
		c1 := encodeSat(u, lower, magBits)
		in := float64(math.Float32frombits(u))
		q0 := float64(c0&mask) * scale
		if c0>>magBits != 0 {
			q0 = -q0
		}
		q1 := float64(c1&mask) * scale * 0.5
		if c1>>magBits != 0 {
			q1 = -q1
		}
		e0 += (in - q0) * (in - q0)
		e1 += (in - q1) * (in - q1)
	}
	return e1 < e0
}

// PackBfp8b packs one row-major 32×32 tile src (1024 values) into dst
// (1088 bytes): 64 shared-exponent bytes (one per packed row, byte r = row
// r) followed by 1024 element codes, packed row r at bytes 64+16r … 64+16r+15.
func PackBfp8b(dst []byte, src []float32, opt Options) {
	if len(src) != Elems || len(dst) != Bfp8b.Bytes() {
		panic(fmt.Sprintf("tile: PackBfp8b needs 1024 values and 1088 bytes, got %d and %d", len(src), len(dst)))
	}
	var row [16]uint32
	for r := 0; r < Rows; r++ {
		gatherRow(&row, src, r)
		s := rowExp(row[:], Bfp8Mag, opt)
		dst[r] = s
		out := dst[expSec+16*r : expSec+16*r+16]
		for j, u := range row {
			out[j] = encodeSat(u, s, Bfp8Mag)
		}
	}
}

// UnpackBfp8b decodes one bfp8_b tile src (1088 bytes) into the row-major
// 32×32 tile dst (1024 values).
func UnpackBfp8b(dst []float32, src []byte) {
	if len(dst) != Elems || len(src) != Bfp8b.Bytes() {
		panic(fmt.Sprintf("tile: UnpackBfp8b needs 1088 bytes and 1024 values, got %d and %d", len(src), len(dst)))
	}
	for r := 0; r < Rows; r++ {
		s := src[r]
		in := src[expSec+16*r : expSec+16*r+16]
		out := dst[rowBase(r):][:16]
		if s >= 7 && s < 255 {
			// ordinary exponents: the value is exactly m·2^(S−133), a
			// normal float32 or zero (DecodeBfp's result, faster)
			scale := math.Float32frombits(uint32(s-6) << 23)
			for j, c := range in {
				v := float32(c&0x7F) * scale
				if c&0x80 != 0 {
					v = -v
				}
				out[j] = v
			}
			continue
		}
		for j, c := range in {
			out[j] = DecodeBfp(c, s, Bfp8Mag)
		}
	}
}

// PackBfp4b packs one row-major 32×32 tile into dst (576 bytes): 64 exponent
// bytes, then 512 bytes of 4-bit codes, element 0 of each pair in the low
// nibble.
func PackBfp4b(dst []byte, src []float32, opt Options) {
	if len(src) != Elems || len(dst) != Bfp4b.Bytes() {
		panic(fmt.Sprintf("tile: PackBfp4b needs 1024 values and 576 bytes, got %d and %d", len(src), len(dst)))
	}
	var row [16]uint32
	for r := 0; r < Rows; r++ {
		gatherRow(&row, src, r)
		s := rowExp(row[:], Bfp4Mag, opt)
		dst[r] = s
		out := dst[expSec+8*r : expSec+8*r+8]
		for j := 0; j < 8; j++ {
			lo := encodeSat(row[2*j], s, Bfp4Mag)
			hi := encodeSat(row[2*j+1], s, Bfp4Mag)
			out[j] = lo | hi<<4
		}
	}
}

// UnpackBfp4b decodes one bfp4_b tile (576 bytes) into a row-major 32×32
// tile.
func UnpackBfp4b(dst []float32, src []byte) {
	if len(dst) != Elems || len(src) != Bfp4b.Bytes() {
		panic(fmt.Sprintf("tile: UnpackBfp4b needs 576 bytes and 1024 values, got %d and %d", len(src), len(dst)))
	}
	for r := 0; r < Rows; r++ {
		s := src[r]
		in := src[expSec+8*r : expSec+8*r+8]
		base := rowBase(r)
		for j, b := range in {
			dst[base+2*j] = DecodeBfp(b&0xF, s, Bfp4Mag)
			dst[base+2*j+1] = DecodeBfp(b>>4, s, Bfp4Mag)
		}
	}
}

// rowBase is the row-major index of the first element of packed row r.
func rowBase(r int) int {
	face, i := r/FaceH, r%FaceH
	return ((face/2)*FaceH+i)*W + (face%2)*FaceW
}

func gatherRow(row *[16]uint32, src []float32, r int) {
	base := rowBase(r)
	for j := range row {
		row[j] = math.Float32bits(src[base+j])
	}
}

// Pack packs one row-major 32×32 tile src into dst in format f (len(dst) =
// f.Bytes()). Float32 tiles are stored little-endian in TILE layout.
func Pack(f Format, dst []byte, src []float32, opt Options) {
	switch f {
	case Float32:
		if len(src) != Elems || len(dst) != Float32.Bytes() {
			panic("tile: Pack float32 needs 1024 values and 4096 bytes")
		}
		for r := 0; r < H; r++ {
			for c := 0; c < W; c++ {
				u := math.Float32bits(src[r*W+c])
				i := 4 * Index(r, c)
				dst[i], dst[i+1], dst[i+2], dst[i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			}
		}
	case BF16:
		PackBF16(dst, src)
	case Bfp8b:
		PackBfp8b(dst, src, opt)
	case Bfp4b:
		PackBfp4b(dst, src, opt)
	default:
		panic("tile: unknown format " + f.String())
	}
}

// Unpack decodes one tile of format f into the row-major 32×32 tile dst.
func Unpack(f Format, dst []float32, src []byte) {
	switch f {
	case Float32:
		if len(dst) != Elems || len(src) != Float32.Bytes() {
			panic("tile: Unpack float32 needs 4096 bytes and 1024 values")
		}
		for r := 0; r < H; r++ {
			for c := 0; c < W; c++ {
				i := 4 * Index(r, c)
				dst[r*W+c] = math.Float32frombits(uint32(src[i]) | uint32(src[i+1])<<8 | uint32(src[i+2])<<16 | uint32(src[i+3])<<24)
			}
		}
	case BF16:
		UnpackBF16(dst, src)
	case Bfp8b:
		UnpackBfp8b(dst, src)
	case Bfp4b:
		UnpackBfp4b(dst, src)
	default:
		panic("tile: unknown format " + f.String())
	}
}

// PackMatrix packs the row-major matrix src [rows, cols] into tiles of
// format f, tiles row-major over the tile grid, padding both sides to
// multiples of 32 with zeros. It returns the packed bytes
// (tileRows·tileCols·f.Bytes()). This is tt-metal's multi-tile layout of a
// 2-D tensor in TILE layout.
func PackMatrix(f Format, src []float32, rows, cols int, opt Options) []byte {
	tr, tc := TilesOf(rows, cols)
	out := make([]byte, tr*tc*f.Bytes())
	var t [Elems]float32
	for ti := 0; ti < tr; ti++ {
		for tj := 0; tj < tc; tj++ {
			Extract(t[:], src, rows, cols, ti, tj)
			k := (ti*tc + tj) * f.Bytes()
			Pack(f, out[k:k+f.Bytes()], t[:], opt)
		}
	}
	return out
}

// UnpackMatrix decodes tiles produced by PackMatrix back into a row-major
// [rows, cols] matrix (padding dropped).
func UnpackMatrix(f Format, src []byte, rows, cols int) []float32 {
	tr, tc := TilesOf(rows, cols)
	if len(src) != tr*tc*f.Bytes() {
		panic(fmt.Sprintf("tile: UnpackMatrix %dx%d %s: %d bytes, want %d", rows, cols, f, len(src), tr*tc*f.Bytes()))
	}
	dst := make([]float32, rows*cols)
	var t [Elems]float32
	for ti := 0; ti < tr; ti++ {
		for tj := 0; tj < tc; tj++ {
			k := (ti*tc + tj) * f.Bytes()
			Unpack(f, t[:], src[k:k+f.Bytes()])
			for r := 0; r < H && ti*H+r < rows; r++ {
				for c := 0; c < W && tj*W+c < cols; c++ {
					dst[(ti*H+r)*cols+tj*W+c] = t[r*W+c]
				}
			}
		}
	}
	return dst
}

// Extract copies tile (ti, tj) of the row-major matrix src [rows, cols] into
// the row-major 32×32 tile dst, zero-padding past the matrix edge.
func Extract(dst, src []float32, rows, cols, ti, tj int) {
	for r := 0; r < H; r++ {
		gr := ti*H + r
		for c := 0; c < W; c++ {
			gc := tj*W + c
			v := float32(0)
			if gr < rows && gc < cols {
				v = src[gr*cols+gc]
			}
			dst[r*W+c] = v
		}
	}
}
