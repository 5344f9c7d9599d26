package tile

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func f32(u uint32) float32 { return math.Float32frombits(u) }

func ownExp(f float32) uint8 { return uint8(math.Float32bits(f) >> 23) }

// tt-metal's test_blockfloat_common.cpp single values with the
// shared exponent set to the value's own exponent.
func TestBfp8SingleValuesTTMetal(t *testing.T) {
	cases := []struct {
		in   float32
		code uint8
		out  float32
	}{
		{64.75, 0x41, 65.0},
		{65.25, 0x41, 65.0},
		{64.5, 0x40, 64.0},
		{65.5, 0x42, 66.0},
		// §7.2 single values.
		{127.75, 0x7F, 127.0},
		{1.0078125, 0x40, 1.0},
		{1.015625, 0x41, 1.015625},
		{1.0234375, 0x42, 1.03125},
	}
	for _, c := range cases {
		for _, sgn := range []float32{1, -1} {
			in, out, code := sgn*c.in, sgn*c.out, c.code
			if sgn < 0 {
				code |= 0x80
			}
			s := ownExp(c.in)
			got := EncodeBfp(math.Float32bits(in), s, Bfp8Mag)
			assert.Equalf(t, code, got, "encode %v", in)
			assert.Equalf(t, out, DecodeBfp(got, s, Bfp8Mag), "decode %v", in)
		}
	}
	assert.Equal(t, uint8(0x85), ownExp(64.75))
}

// Derived from tt-metal's scalar packer (convert_u32_to_bfp,
// tt_metal/impl/data_format/blockfloat_common.cpp): one row of 16 with
// S = 0x81.
func TestBfp8RowS81(t *testing.T) {
	in := []float32{4.0, 1.0, -1.5, 0.1, 0, f32(0x80000000), 1e-40, 1.0 / 32, 1.0 / 64, 1.0 / 128, 3.75, -3.9, 0.33, 1.999, 2.0, -4.0}
	codes := []uint8{0x40, 0x10, 0x98, 0x02, 0, 0, 0, 0, 0, 0, 0x3C, 0xBE, 0x05, 0x20, 0x20, 0xC0}
	outs := []float32{4, 1, -1.5, 0.125, 0, 0, 0, 0, 0, 0, 3.75, -3.875, 0.3125, 2, 2, -4}
	s := SharedExp(in)
	require.Equal(t, uint8(0x81), s)
	for i, x := range in {
		c := EncodeBfp(math.Float32bits(x), s, Bfp8Mag)
		assert.Equalf(t, codes[i], c, "element %d (%v)", i, x)
		d := DecodeBfp(c, s, Bfp8Mag)
		assert.Equalf(t, math.Float32bits(outs[i]), math.Float32bits(d), "decode %d", i)
	}
}

// The lost sticky bit: bits shifted out below the shared exponent never
// reach the rounding decision (convert_u32_to_bfp).
func TestBfp8LostStickyBit(t *testing.T) {
	for _, c := range []struct {
		bits uint32
		want uint8
	}{
		{0x3F820001, 0x20}, // 1 + 2^-6 + 2^-23: sticky bit shifted out → tie → even
		{0x3F820008, 0x21}, // 1 + 2^-6 + 2^-20: survives the shift → rounds up
		{0x3F820000, 0x20}, // 1 + 2^-6: exact tie → even
	} {
		row := make([]float32, 16)
		row[0] = 2.0
		for i := 1; i < 16; i++ {
			row[i] = f32(c.bits)
		}
		s := SharedExp(row)
		require.Equal(t, uint8(0x80), s)
		assert.Equal(t, uint8(0x40), EncodeBfp(math.Float32bits(row[0]), s, Bfp8Mag))
		assert.Equalf(t, c.want, EncodeBfp(c.bits, s, Bfp8Mag), "bits %#x", c.bits)
	}
}

// Special values (derived from convert_u32_to_bfp) and a table of further
// edge cases.
func TestBfp8EdgeCases(t *testing.T) {
	inf, nan := float32(math.Inf(1)), f32(0x7FC00000)
	type tc struct {
		name  string
		row   []float32
		s     uint8
		codes []uint8
		outs  []uint32 // decoded bits
	}
	cases := []tc{
		{"inf", []float32{inf, 1.0, 0}, 0xFF, []uint8{0x40, 0, 0}, []uint32{0x7F800000, 0, 0}},
		{"nan", []float32{nan, 1.0}, 0xFF, []uint8{0x60, 0}, []uint32{0x7FC00000, 0}},
		{"-inf", []float32{-inf, 2.0}, 0xFF, []uint8{0xC0, 0}, []uint32{0xFF800000, 0}},
		{"all zero", []float32{0, f32(0x80000000)}, 0, []uint8{0, 0}, []uint32{0, 0}},
		{"denormals only", []float32{1e-40, -1e-39}, 0, []uint8{0, 0}, []uint32{0, 0}},
		{"smallest normal", []float32{f32(0x00800000)}, 1, []uint8{0x40}, []uint32{0x00800000}},
		{"max finite", []float32{math.MaxFloat32, -math.MaxFloat32}, 0xFE, []uint8{0x7F, 0xFF}, []uint32{0x7F7E0000, 0xFF7E0000}},
		{"gap 32 shifts all out", []float32{f32(0x50000000), f32(0x40000000)}, 0xA0, []uint8{0x40, 0}, []uint32{0x50000000, 0}},
		{"gap 7: half LSB tie to 0", []float32{128, 1}, 0x86, []uint8{0x40, 0x00}, []uint32{0x43000000, 0}},
		{"gap 6: exactly one LSB", []float32{64, 1}, 0x85, []uint8{0x40, 0x01}, []uint32{0x42800000, 0x3F800000}},
		{"gap 7 above half", []float32{128, 1.5}, 0x86, []uint8{0x40, 0x01}, []uint32{0x43000000, 0x40000000}},
		{"negative rounds to zero has no sign", []float32{64, -0.25}, 0x85, []uint8{0x40, 0x00}, []uint32{0x42800000, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := SharedExp(c.row)
			require.Equal(t, c.s, s)
			for i, x := range c.row {
				code := EncodeBfp(math.Float32bits(x), s, Bfp8Mag)
				assert.Equalf(t, c.codes[i], code, "code %d", i)
				assert.Equalf(t, c.outs[i], math.Float32bits(DecodeBfp(code, s, Bfp8Mag)), "decode %d", i)
			}
		})
	}
}

// Unpack (unpack_bfp8_tiles_into_float_vec) with S = 127 and the S = 6
// host flush.
func TestBfp8Decode(t *testing.T) {
	for code, want := range map[uint8]float32{
		0x01: 0.015625, 0x20: 0.5, 0x3F: 0.984375, 0x40: 1.0, 0x7F: 1.984375, 0x81: -0.015625, 0xFF: -1.984375,
	} {
		assert.Equalf(t, want, DecodeBfp(code, 127, Bfp8Mag), "code %#x", code)
	}
	assert.Equal(t, uint32(0), math.Float32bits(DecodeBfp(0x01, 6, Bfp8Mag)), "S=6 code 1 flushes")
	assert.Equal(t, uint32(0x80000000), math.Float32bits(DecodeBfp(0x80, 127, Bfp8Mag)), "0x80 keeps its sign")
	// shift == S: exponent field 0, the host keeps the (denormal) bits.
	assert.Equal(t, uint32(0x00400000), math.Float32bits(DecodeBfp(0x03, 5, Bfp8Mag)))
	// exact m·2^(S−133) for every code in the ordinary range
	for s := 20; s < 250; s += 23 {
		for c := 0; c < 256; c++ {
			m := float64(c & 0x7F)
			if c&0x80 != 0 {
				m = -m
			}
			want := float32(math.Ldexp(m, s-133))
			got := DecodeBfp(uint8(c), uint8(s), Bfp8Mag)
			if m == 0 {
				assert.Zero(t, got)
				continue
			}
			require.Equalf(t, want, got, "S=%d code=%#x", s, c)
		}
	}
}

// Whole-tile vectors (derived from convert_u32_to_bfp).
func TestBfp8WholeTiles(t *testing.T) {
	ones := make([]float32, Elems)
	for i := range ones {
		ones[i] = 1
	}
	b := make([]byte, Bfp8b.Bytes())
	PackBfp8b(b, ones, Options{})
	for i := 0; i < 64; i++ {
		require.Equal(t, byte(0x7F), b[i])
	}
	for i := 64; i < 1088; i++ {
		require.Equal(t, byte(0x40), b[i])
	}

	ar := make([]float32, Elems)
	for r := 0; r < 32; r++ {
		for c := 0; c < 32; c++ {
			ar[r*32+c] = float32(32*r + c)
		}
	}
	PackBfp8b(b, ar, Options{})
	wantExp := "82848585868686868787878787878787" + "83848585868686868787878787878787" +
		"8888888888888888888888888888888888888888888888888888888888888888"
	assert.Equal(t, wantExp, hex.EncodeToString(b[:64]))
	assert.Equal(t, "00081018202830384048505860687078", hex.EncodeToString(b[64:80]))
	assert.Equal(t, "4044484c5054585c6064686c7074787c", hex.EncodeToString(b[64+16*16:64+16*17]))
	assert.Equal(t, "40404040404141414141414142424242", hex.EncodeToString(b[64+16*32:64+16*33]))
	sum := sha256.Sum256(b)
	assert.Equal(t, "52eac8dacb1afd2a1296ef370632a12e8ba22b619cfdf1d226040d1daab9db2d", hex.EncodeToString(sum[:]))
}

// Worked mapping of the tile byte layout (64 exponent bytes, then the
// mantissas face by face, faces in row-major order).
func TestLayoutMapping(t *testing.T) {
	for _, c := range []struct{ r, c, exp, man int }{{0, 16, 16, 320}, {16, 0, 32, 576}, {17, 20, 49, 852}} {
		i := Index(c.r, c.c)
		assert.Equal(t, c.exp, i/16)
		assert.Equal(t, c.man, 64+i)
		src := make([]float32, Elems)
		src[c.r*32+c.c] = 1
		b := make([]byte, Bfp8b.Bytes())
		PackBfp8b(b, src, Options{})
		assert.Equal(t, byte(0x7F), b[c.exp])
		assert.Equal(t, byte(0x40), b[c.man])
	}
}

func randTile(rng *rand.Rand, minExp, maxExp int) []float32 {
	t := make([]float32, Elems)
	for i := range t {
		e := minExp + rng.IntN(maxExp-minExp+1)
		u := uint32(e)<<23 | rng.Uint32()&0x807FFFFF
		if rng.IntN(50) == 0 {
			u = rng.Uint32() & 0x80000000
		}
		t[i] = f32(u)
	}
	return t
}

// Round trips: every element's error is bounded by its row's quantum
// q = 2^(S−133): ≤ q/2 (+ the dropped sticky bits, < q·2^-16) unless the
// magnitude saturated, and ≤ q always.
func TestBfpRoundTripBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range []struct {
		fmt Format
		mag uint
	}{{Bfp8b, Bfp8Mag}, {Bfp4b, Bfp4Mag}} {
		b := make([]byte, f.fmt.Bytes())
		out := make([]float32, Elems)
		for n := 0; n < 300; n++ {
			lo := 40 + rng.IntN(150)
			src := randTile(rng, lo, lo+rng.IntN(12))
			Pack(f.fmt, b, src, Options{})
			Unpack(f.fmt, out, b)
			for r := 0; r < Rows; r++ {
				s := int(b[r])
				base := rowBase(r)
				require.Equal(t, SharedExp(src[base:base+16]), uint8(s))
				q := math.Ldexp(1, s-127-int(f.mag-1))
				for j := 0; j < 16; j++ {
					x, y := float64(src[base+j]), float64(out[base+j])
					err := math.Abs(x - y)
					if err > q {
						t.Fatalf("%s tile %d row %d elem %d: %v→%v q=%v", f.fmt, n, r, j, x, y, q)
					}
					if math.Abs(y) < float64(uint(1)<<f.mag-1)*q && err > q*(0.5+1.0/65536) { // not saturated
						t.Fatalf("%s %v→%v: error %v above q/2", f.fmt, x, y, err)
					}
				}
			}
		}
	}
}

// Packing from a bf16 value equals packing its exact fp32 expansion, and the
// decoded bfp8 value is always exactly representable in bf16.
func TestBfp8DecodedIsBF16Exact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	src := randTile(rng, 100, 140)
	b := make([]byte, Bfp8b.Bytes())
	out := make([]float32, Elems)
	PackBfp8b(b, src, Options{})
	UnpackBfp8b(out, b)
	for _, v := range out {
		require.Equal(t, v, FromBF16(ToBF16(v)))
	}
}

func TestLowerExponentSearch(t *testing.T) {
	// 15 values just under 1 and one 2.0: Emax=128 quantises the 0.99s
	// to 1/32 steps; Emax-1 saturates 2.0 to 1.984375 but halves every other
	// error.
	row := make([]float32, Elems)
	for i := range row {
		row[i] = 0.99
	}
	row[0] = 2
	b0 := make([]byte, Bfp8b.Bytes())
	b1 := make([]byte, Bfp8b.Bytes())
	PackBfp8b(b0, row, Options{})
	PackBfp8b(b1, row, Options{LowerExponent: true})
	assert.Equal(t, byte(0x80), b0[0])
	assert.Equal(t, byte(0x7F), b1[0], "row 0 prefers Emax-1")
	assert.Equal(t, byte(0x7F), b1[64], "2.0 saturates under Emax-1")
	assert.Equal(t, byte(0x7E), b1[1], "rows without a larger value keep Emax")
	// Inf rows and tiny exponents never search.
	assert.False(t, preferLower([]uint32{0x7F800000}, 255, Bfp8Mag))
	assert.False(t, preferLower([]uint32{0x03800000}, 7, Bfp8Mag))
}

func TestBF16(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3F800000, 0x3F80},
		{0x3F808000, 0x3F80}, // tie → even (down)
		{0x3F818000, 0x3F82}, // tie → even (up)
		{0x3F808001, 0x3F81},
		{0x7F7FFFFF, 0x7F80}, // rounds to Inf
		{0x7F800000, 0x7F80},
		{0xFF800000, 0xFF80},
		{0x7FC00001, 0x7FC0},
		{0xFF800001, 0x7FC0}, // any NaN → canonical quiet NaN
		{0x80000000, 0x8000},
		{0x00000001, 0x0000},
	} {
		assert.Equalf(t, c.want, ToBF16(f32(c.in)), "%#x", c.in)
	}
	assert.Equal(t, uint16(0x3F80), BF16Trunc(f32(0x3F80FFFF)))
}

func TestTilizeRoundTripAndBF16Tile(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	rows, cols := 41, 70
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = FromBF16(ToBF16(rng.Float32()*4 - 2))
	}
	tr, tc := TilesOf(rows, cols)
	require.Equal(t, 2, tr)
	require.Equal(t, 3, tc)
	tiled := make([]float32, tr*tc*Elems)
	Tilize(tiled, src, rows, cols)
	back := make([]float32, rows*cols)
	Untilize(back, tiled, rows, cols)
	require.Equal(t, src, back)
	// face offsets of the docs' formula
	assert.Equal(t, src[0*cols+17], tiled[256+1])
	assert.Equal(t, src[16*cols+0], tiled[512])
	assert.Equal(t, src[17*cols+20], tiled[768+16+4])
	// padding is zero
	assert.Zero(t, tiled[(1*tc+0)*Elems+Index(31, 0)])

	for _, f := range []Format{Float32, BF16} {
		p := PackMatrix(f, src, rows, cols, Options{})
		require.Len(t, p, tr*tc*f.Bytes())
		require.Equal(t, src, UnpackMatrix(f, p, rows, cols), f.String())
	}
	// bf16 tile bytes: element (0,16) sits at face 1 = +0x200
	p := PackMatrix(BF16, src, rows, cols, Options{})
	b := ToBF16(src[16])
	assert.Equal(t, []byte{byte(b), byte(b >> 8)}, p[0x200:0x202])
}

func TestFormatBytes(t *testing.T) {
	assert.Equal(t, 4096, Float32.Bytes())
	assert.Equal(t, 2048, BF16.Bytes())
	assert.Equal(t, 1088, Bfp8b.Bytes())
	assert.Equal(t, 576, Bfp4b.Bytes())
	for f, want := range map[Format]string{Float32: "float32", BF16: "bfloat16", Bfp8b: "bfloat8_b", Bfp4b: "bfloat4_b", 4: "format(4)"} {
		assert.Equal(t, want, f.String())
	}
}

// FuzzBfp8Row checks the scalar converter against an independent float64
// model: the code's value is the significand truncated at the shared
// exponent, then rounded half-to-even to 7 bits, then saturated.
func FuzzBfp8Row(f *testing.F) {
	f.Add(uint32(0x42818000), uint32(0x3F800000), uint8(0))
	f.Add(uint32(0x7F800000), uint32(0x3F800000), uint8(3))
	f.Add(uint32(0x00000001), uint32(0x80000000), uint8(1))
	f.Fuzz(func(t *testing.T, a, b uint32, extra uint8) {
		row := []float32{f32(a), f32(b)}
		s := SharedExp(row)
		for _, u := range []uint32{a, b} {
			c := EncodeBfp(u, s, Bfp8Mag)
			e := u >> 23 & 0xFF
			if e == 0 {
				require.Zero(t, c)
				continue
			}
			if e == 255 || s == 255 {
				continue // Inf/NaN rows are covered by the edge table
			}
			// model: aligned integer significand, floor at 2^-17 units
			sig := uint64(u&0x7FFFFF | 0x800000)
			d := uint64(s) - uint64(e)
			if d >= 40 {
				sig = 0
			} else {
				sig >>= d
			}
			q := sig >> 17
			rem := sig & 0x1FFFF
			if rem > 0x10000 || (rem == 0x10000 && q&1 == 1) {
				q++
			}
			if q > 127 {
				q = 127
			}
			want := uint8(q)
			if q != 0 {
				want |= uint8(u>>31) << 7
			}
			require.Equalf(t, want, c, "u=%#x s=%#x", u, s)
			if s > 6 {
				v := DecodeBfp(c, s, Bfp8Mag)
				m := float64(q)
				if u>>31 == 1 {
					m = -m
				}
				require.Equal(t, float32(math.Ldexp(m, int(s)-133)), v)
			}
		}
		_ = extra
	})
}

// FuzzUnpackTile: decoding arbitrary bytes never panics and repacking a
// decoded tile whose exponents are ordinary reproduces the codes' values.
func FuzzUnpackTile(f *testing.F) {
	seed := make([]byte, Bfp8b.Bytes())
	for i := range seed {
		seed[i] = byte(i * 7)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := make([]byte, Bfp8b.Bytes())
		copy(b, data)
		out := make([]float32, Elems)
		UnpackBfp8b(out, b)
		for r := 0; r < Rows; r++ {
			if b[r] < 8 || b[r] == 255 {
				return
			}
		}
		b2 := make([]byte, Bfp8b.Bytes())
		PackBfp8b(b2, out, Options{})
		out2 := make([]float32, Elems)
		UnpackBfp8b(out2, b2)
		require.Equal(t, out, out2)
	})
}

func BenchmarkPackBfp8b(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	src := randTile(rng, 110, 130)
	dst := make([]byte, Bfp8b.Bytes())
	b.ReportAllocs()
	b.SetBytes(Elems * 4)
	for i := 0; i < b.N; i++ {
		PackBfp8b(dst, src, Options{})
	}
}

func BenchmarkUnpackBfp8b(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	src := randTile(rng, 110, 130)
	t := make([]byte, Bfp8b.Bytes())
	PackBfp8b(t, src, Options{})
	dst := make([]float32, Elems)
	b.ReportAllocs()
	b.SetBytes(Elems * 4)
	for i := 0; i < b.N; i++ {
		UnpackBfp8b(dst, t)
	}
}

func TestBfp4(t *testing.T) {
	for _, c := range []struct {
		in   float32
		code uint8
		out  float32
	}{
		{1.0, 0x4, 1.0}, {1.25, 0x5, 1.25}, {1.125, 0x4, 1.0}, {1.375, 0x6, 1.5},
		{1.875, 0x7, 1.75}, {-1.5, 0xE, -1.5},
	} {
		s := ownExp(c.in)
		code := EncodeBfp(math.Float32bits(c.in), s, Bfp4Mag)
		assert.Equalf(t, c.code, code, "%v", c.in)
		assert.Equalf(t, c.out, DecodeBfp(code, s, Bfp4Mag), "%v", c.in)
	}
	// nibble order: element 0 in the low nibble
	src := make([]float32, Elems)
	src[0], src[1] = 1.0, -0.5
	b := make([]byte, Bfp4b.Bytes())
	PackBfp4b(b, src, Options{})
	assert.Equal(t, byte(0x7F), b[0])
	assert.Equal(t, byte(0xA4), b[64]) // hi = sign|2 (−0.5), lo = 4 (1.0)
	out := make([]float32, Elems)
	UnpackBfp4b(out, b)
	assert.Equal(t, []float32{1, -0.5}, out[:2])
}

// The fast unpack path equals DecodeBfp for every exponent and code.
func TestUnpackFastPathExact(t *testing.T) {
	b := make([]byte, Bfp8b.Bytes())
	out := make([]float32, Elems)
	for s := 0; s < 256; s++ {
		for r := 0; r < Rows; r++ {
			b[r] = byte(s)
		}
		for i := 0; i < 1024; i++ {
			b[64+i] = byte(i) // every code appears
		}
		UnpackBfp8b(out, b)
		for r := 0; r < Rows; r++ {
			for j := 0; j < 16; j++ {
				want := DecodeBfp(b[64+16*r+j], byte(s), Bfp8Mag)
				got := out[rowBase(r)+j]
				if math.Float32bits(want) != math.Float32bits(got) {
					t.Fatalf("S=%d code=%#x: %v, want %v", s, b[64+16*r+j], got, want)
				}
			}
		}
	}
}
