// Package tile converts float32 and bfloat16 data to and from the 32×32 tile
// formats a Tenstorrent Tensix core reads: bf16 TILE layout, bfp8_b and
// bfp4_b block floats. The block-float packers are bit-exact with tt-metal's
// host packer (blockfloat_common.cpp, round to nearest even, plain max
// shared exponent, zero/denormal flush); the unpackers reproduce its host
// unpacker (bfloat8.cpp).
//
// A tile is 32×32 elements made of four 16×16 faces in row-major face order
// (face 0 = rows 0-15 × cols 0-15, face 1 = rows 0-15 × cols 16-31, face 2 =
// rows 16-31 × cols 0-15, face 3 = rows 16-31 × cols 16-31), each face
// row-major. The "packed row" r = face·16 + row-in-face (0..63) is the unit
// of one shared exponent in the block-float formats.
//
// Every function is pure and safe for concurrent use; callers own all
// buffers. Functions panic only on programmer errors (wrong buffer lengths),
// never on data.
package tile

import (
	"fmt"
	"math"
)

// Tile geometry.
const (
	H      = 32    // tile height (rows)
	W      = 32    // tile width (columns)
	FaceH  = 16    // face height
	FaceW  = 16    // face width
	Elems  = H * W // elements per tile
	Rows   = 64    // packed rows (shared exponents) per tile
	expSec = 64    // exponent section bytes (64 rows, already 16 B aligned)
)

// Format is a tile data format.
type Format uint8

// Tile data formats.
const (
	Float32 Format = iota // 4 bytes per element, TILE layout
	BF16                  // bfloat16, 2 bytes per element, TILE layout
	Bfp8b                 // 8-bit block float, shared 8-bit exponent per 16
	Bfp4b                 // 4-bit block float, shared 8-bit exponent per 16
)

// String returns tt-metal's lower-case ttnn dtype name.
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("format(%d)", uint8(f))
}

var formatNames = [...]string{Float32: "float32", BF16: "bfloat16", Bfp8b: "bfloat8_b", Bfp4b: "bfloat4_b"}

// Bytes is the size of one 32×32 tile in f, as tt-metal's Tile::get_tile_size
// gives it on Blackhole: 4096, 2048, 1088 (64 exponent bytes + 1024) and 576
// (64 + 512). The block-float sizes are multiples of the 64 B DRAM alignment,
// so tiles pack end to end without padding.
func (f Format) Bytes() int {
	switch f {
	case Float32:
		return 4 * Elems
	case BF16:
		return 2 * Elems
	case Bfp8b:
		return expSec + Elems
	case Bfp4b:
		return expSec + Elems/2
	}
	panic("tile: unknown format " + f.String())
}

// Index maps a (row, col) element of a tile to its position in TILE layout
// order (face-major, then row-major inside the face). For the block-float
// formats it is also the mantissa index, and Index/16 is the packed row.
func Index(r, c int) int {
	face := (r/FaceH)*2 + c/FaceW
	return face*FaceH*FaceW + (r%FaceH)*FaceW + c%FaceW
}

// Tilize copies the row-major matrix src [rows, cols] into dst as tiles in
// TILE layout, tiles ordered row-major over the tile grid. rows and cols are
// padded up to multiples of 32 with zeros; dst must hold
// TilesOf(rows, cols)·1024 values.
func Tilize(dst, src []float32, rows, cols int) {
	tr, tc := ceil32(rows), ceil32(cols)
	if len(src) < rows*cols || len(dst) != tr*tc*Elems {
		panic(fmt.Sprintf("tile: Tilize %dx%d: src %d dst %d", rows, cols, len(src), len(dst)))
	}
	var rm [Elems]float32 // one tile, row-major
	for ti := 0; ti < tr; ti++ {
		for tj := 0; tj < tc; tj++ {
			Extract(rm[:], src, rows, cols, ti, tj)
			t := dst[(ti*tc+tj)*Elems : (ti*tc+tj+1)*Elems]
			for i, v := range rm {
				t[Index(i/W, i%W)] = v
			}
		}
	}
}

// Untilize is the inverse of Tilize: it writes the unpadded row-major
// [rows, cols] matrix held in the tiles of src into dst.
func Untilize(dst, src []float32, rows, cols int) {
	tr, tc := ceil32(rows), ceil32(cols)
	if len(dst) < rows*cols || len(src) != tr*tc*Elems {
		panic(fmt.Sprintf("tile: Untilize %dx%d: src %d dst %d", rows, cols, len(src), len(dst)))
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			ti, tj := r/H, c/W
			dst[r*cols+c] = src[(ti*tc+tj)*Elems+Index(r%H, c%W)]
		}
	}
}

// TilesOf returns the tile-grid size of a [rows, cols] matrix (each side
// rounded up to 32).
func TilesOf(rows, cols int) (tileRows, tileCols int) { return ceil32(rows), ceil32(cols) }

func ceil32(n int) int { return (n + 31) / 32 }

// ToBF16 rounds f to bfloat16 bits with round-to-nearest-even; every NaN
// becomes the quiet NaN 0x7FC0 (tt-metal's bfloat16(float) since the
// rounding change; older tt-metal truncated).
func ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7FFFFFFF > 0x7F800000 {
		return 0x7FC0
	}
	return uint16((u + 0x7FFF + (u>>16)&1) >> 16)
}

// BF16Trunc truncates f to bfloat16 bits (tt-metal's bfloat16::truncate).
func BF16Trunc(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }

// FromBF16 widens bfloat16 bits to float32 exactly.
func FromBF16(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// RoundBF16 rounds every element of v to the nearest bfloat16 in place.
func RoundBF16(v []float32) {
	for i, f := range v {
		v[i] = FromBF16(ToBF16(f))
	}
}

// PackBF16 packs one row-major 32×32 tile src (1024 values) into dst
// (2048 bytes) in TILE layout, little-endian bfloat16, rounding to nearest
// even.
func PackBF16(dst []byte, src []float32) {
	if len(src) != Elems || len(dst) != BF16.Bytes() {
		panic("tile: PackBF16 needs 1024 values and 2048 bytes")
	}
	for r := 0; r < H; r++ {
		for c := 0; c < W; c++ {
			b := ToBF16(src[r*W+c])
			i := 2 * Index(r, c)
			dst[i], dst[i+1] = byte(b), byte(b>>8)
		}
	}
}

// UnpackBF16 is the inverse of PackBF16: dst receives the row-major tile.
func UnpackBF16(dst []float32, src []byte) {
	if len(dst) != Elems || len(src) != BF16.Bytes() {
		panic("tile: UnpackBF16 needs 2048 bytes and 1024 values")
	}
	for r := 0; r < H; r++ {
		for c := 0; c < W; c++ {
			i := 2 * Index(r, c)
			dst[r*W+c] = FromBF16(uint16(src[i]) | uint16(src[i+1])<<8)
		}
	}
}
