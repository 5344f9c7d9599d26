package inflate

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// zlibBytes compresses p with compress/zlib at level (flate constants).
func zlibBytes(tb testing.TB, p []byte, level int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := zlib.NewWriterLevel(&buf, level)
	require.NoError(tb, err)
	_, err = w.Write(p)
	require.NoError(tb, err)
	require.NoError(tb, w.Close())
	return buf.Bytes()
}

// rawBytes compresses p with compress/flate at level.
func rawBytes(tb testing.TB, p []byte, level int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, level)
	require.NoError(tb, err)
	_, err = w.Write(p)
	require.NoError(tb, err)
	require.NoError(tb, w.Close())
	return buf.Bytes()
}

// corpus returns named inputs of varied structure.
func corpus(tb testing.TB) map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	out := map[string][]byte{
		"empty": {},
		"one":   {42},
	}
	for _, n := range []int{1, 7, 100, 1000, 70000} {
		r := make([]byte, n)
		for i := range r {
			r[i] = byte(rng.Uint32())
		}
		out[fmt.Sprintf("random-%d", n)] = r
		t := make([]byte, n) // small alphabet: skewed Huffman codes
		for i := range t {
			t[i] = "aaaaaaaabbbbccd\n"[rng.IntN(16)]
		}
		out[fmt.Sprintf("text-%d", n)] = t
	}
	run := bytes.Repeat([]byte{7}, 100000)
	run = append(run, bytes.Repeat([]byte{1, 2}, 5000)...)
	for p := 3; p <= 17; p++ {
		for i := 0; i < 3000; i++ {
			run = append(run, byte(i%p), byte(p))
		}
	}
	out["runs"] = run
	// Short periods (RGB repeats and friends) between random bytes, so
	// that they are coded as matches at distances 2..7.
	var per []byte
	for i := 0; i < 400; i++ {
		d := 2 + i%6
		pat := []byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}[:d]
		for range 3 + rng.IntN(60) {
			per = append(per, pat...)
		}
		per = append(per, byte(rng.Uint32()), byte(rng.Uint32()))
	}
	out["periods"] = per
	// RGB-like: a soft gradient image with noise, PNG-filtered (Sub).
	w, h := 320, 180
	img := make([]byte, 0, h*(1+3*w))
	for y := 0; y < h; y++ {
		img = append(img, 1)
		for x := 0; x < w; x++ {
			n := byte(rng.IntN(3))
			img = append(img, byte(x/40)+n, byte(y/30), n)
		}
	}
	out["rgb-rows"] = img
	// Long-distance matches (32 KiB window).
	blk := make([]byte, 32768)
	for i := range blk {
		blk[i] = byte(rng.Uint32())
	}
	out["far"] = append(append(append([]byte(nil), blk...), blk...), blk[:1000]...)
	return out
}

var levels = []int{flate.NoCompression, flate.BestSpeed, 5, flate.BestCompression, flate.HuffmanOnly}

func TestZlibMatchesStdlib(t *testing.T) {
	var d Decoder
	for name, p := range corpus(t) {
		for _, lvl := range levels {
			z := zlibBytes(t, p, lvl)
			got := make([]byte, len(p))
			n, err := d.Zlib(got, z)
			require.NoError(t, err, "%s level %d", name, lvl)
			require.Equal(t, len(p), n)
			require.True(t, bytes.Equal(p, got), "%s level %d", name, lvl)

			// Wrong expected sizes.
			big := make([]byte, len(p)+1)
			_, err = d.Zlib(big, z)
			require.ErrorIs(t, err, ErrOutputShort, "%s level %d", name, lvl)
			if len(p) > 0 {
				_, err = d.Zlib(got[:len(p)-1], z)
				require.ErrorIs(t, err, ErrOutputOverflow, "%s level %d", name, lvl)
			}
			// Trailing garbage and truncation.
			_, err = d.Zlib(got, append(z[:len(z):len(z)], 0))
			require.ErrorIs(t, err, ErrTrailingData)
			_, err = d.Zlib(got, z[:len(z)-1])
			require.ErrorIs(t, err, ErrUnexpectedEOF, "%s level %d", name, lvl)

			r := rawBytes(t, p, lvl)
			n, err = d.Raw(got, r)
			require.NoError(t, err, "raw %s level %d", name, lvl)
			require.Equal(t, len(p), n)
			require.True(t, bytes.Equal(p, got), "raw %s level %d", name, lvl)
		}
	}
}

// caseAIDAT returns the joined IDAT payloads (zlib streams) of the case-A
// PNG frames and their decompressed sizes.
func caseAIDAT(tb testing.TB) (streams [][]byte, sizes []int) {
	tb.Helper()
	names, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "n17-tiny", "caseA", "frame_*.png"))
	sort.Strings(names)
	if len(names) != 4 {
		tb.Fatalf("want 4 case-A PNGs, got %d", len(names))
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		require.NoError(tb, err)
		var z []byte
		var w, h, bpp int
		for p := data[8:]; len(p) >= 12; {
			n := int(binary.BigEndian.Uint32(p))
			typ, body := string(p[4:8]), p[8:8+n]
			switch typ {
			case "IHDR":
				w, h = int(binary.BigEndian.Uint32(body)), int(binary.BigEndian.Uint32(body[4:]))
				bpp = map[byte]int{2: 3, 6: 4}[body[9]]
			case "IDAT":
				z = append(z, body...)
			}
			p = p[12+n:]
		}
		streams = append(streams, z)
		sizes = append(sizes, h*(1+w*bpp))
	}
	return streams, sizes
}

func TestCaseAIDAT(t *testing.T) {
	streams, sizes := caseAIDAT(t)
	var d Decoder
	for i, z := range streams {
		want, err := io.ReadAll(must(zlib.NewReader(bytes.NewReader(z))))
		require.NoError(t, err)
		require.Len(t, want, sizes[i])
		got := make([]byte, sizes[i])
		_, err = d.Zlib(got, z)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "frame %d", i)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestEdgeStreams: hand-made streams, each with its expected outcome.
func TestEdgeStreams(t *testing.T) {
	hdr := []byte{0x78, 0x9c}
	// zlibWrap adds the header and the Adler-32 of want to a raw stream.
	zlibWrap := func(raw, want []byte) []byte {
		z := append(append([]byte(nil), hdr...), raw...)
		return binary.BigEndian.AppendUint32(z, adler32.Checksum(want))
	}
	fixedABC := rawBytes(t, []byte("abcabcabcabc"), flate.BestSpeed)
	dist300Out := append(bytes.Repeat([]byte{'a'}, 303), bytes.Repeat([]byte{'b'}, 300)...)
	as300 := make([]uint16, 300)
	for i := range as300 {
		as300[i] = 'a'
	}
	tests := []struct {
		name    string
		src     []byte
		size    int
		want    []byte
		wantErr error
	}{
		{"empty-input", nil, 0, nil, ErrUnexpectedEOF},
		{"one-byte", []byte{0x78}, 0, nil, ErrUnexpectedEOF},
		{"cm-7", []byte{0x77, 0x9c - 0x77%31, 3, 0}, 0, nil, ErrHeader},
		{"cinfo-8", []byte{0x88, 0x98, 3, 0}, 0, nil, ErrHeader},
		{"fcheck", []byte{0x78, 0x9d, 3, 0, 0, 0, 0, 1}, 0, nil, ErrHeader},
		{"fdict", []byte{0x78, 0xbb, 0, 0, 0, 1, 3, 0}, 0, nil, ErrDictionary},
		{"empty-fixed", zlibWrap([]byte{3, 0}, nil), 0, []byte{}, nil},
		{"empty-stored", zlibWrap([]byte{1, 0, 0, 0xff, 0xff}, nil), 0, []byte{}, nil},
		{"stored-hi", zlibWrap([]byte{1, 2, 0, 0xfd, 0xff, 'h', 'i'}, []byte("hi")), 2, []byte("hi"), nil},
		{"stored-nlen", zlibWrap([]byte{1, 2, 0, 0xfd, 0xfe, 'h', 'i'}, []byte("hi")), 2, nil, ErrCorrupt},
		{"stored-short", append(hdr, 1, 2, 0, 0xfd, 0xff, 'h'), 2, nil, ErrUnexpectedEOF},
		{"block-type-3", zlibWrap([]byte{7, 0}, nil), 0, nil, ErrCorrupt},
		{"no-final-block", append(hdr, 0, 0, 0, 0xff, 0xff), 0, nil, ErrUnexpectedEOF},
		{"bad-adler", append(append(hdr, 3, 0), 0, 0, 0, 2), 0, nil, ErrChecksum},
		{"missing-adler", append(hdr, 3, 0, 0, 0, 1), 0, nil, ErrUnexpectedEOF},
		{"fixed-abc", zlibWrap(fixedABC, []byte("abcabcabcabc")), 12, []byte("abcabcabcabc"), nil},
		// Fixed block: literal 'a' then length 3 distance 2 (too far).
		{"distance-too-far", zlibWrap(fixedBits(t, "a", 3, 2), nil), 4, nil, ErrCorrupt},
		// Fixed block: distance code 30 is invalid.
		{"distance-code-30", zlibWrap(fixedRaw(t, []uint16{'a'}, 257, 30), nil), 4, nil, ErrCorrupt},
		// Fixed block: literal/length symbol 286 is invalid.
		{"litlen-286", zlibWrap(fixedRaw(t, nil, 286, -1), nil), 4, nil, ErrCorrupt},
		// The same three errors after 300 literals, where the fast loops
		// (Go and assembly) see them.
		{"distance-too-far-fast", zlibWrap(fixedRaw(t, as300, 257, 20), nil), 2000, nil, ErrCorrupt},
		{"distance-code-30-fast", zlibWrap(fixedRaw(t, as300, 257, 30), nil), 2000, nil, ErrCorrupt},
		{"litlen-286-fast", zlibWrap(fixedRaw(t, as300, 286, -1), nil), 2000, nil, ErrCorrupt},
		// Valid match right at the end of the 32 KiB window, in the fast
		// loops: 300 literals, then length 3 from distance 300 (code 16,
		// base 257, 7 extra bits = 43).
		{"distance-exact-fast", zlibWrap(fixedDist300(), dist300Out), 603, dist300Out, nil},
		// Dynamic header with HLIT = 287 (> 286).
		{"hlit-287", zlibWrap([]byte{0x05 | 30<<3, 0, 0, 0}, nil), 0, nil, ErrCorrupt},
		// Dynamic header whose code-length code is over-subscribed
		// (four codes of length 1).
		{"clen-oversubscribed", zlibWrap(dynHeader(0, 0, 4, []uint8{1, 1, 1, 1}), nil), 0, nil, ErrCorrupt},
		// ... and incomplete (two codes of length 2).
		{"clen-incomplete", zlibWrap(dynHeader(0, 0, 4, []uint8{2, 2, 0, 0}), nil), 0, nil, ErrCorrupt},
		// Repeat code 16 first.
		{"repeat-first", zlibWrap(dynHeader(0, 0, 4, []uint8{1, 1, 0, 0}), nil), 0, nil, ErrCorrupt},
	}
	var d Decoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, tt.size)
			n, err := d.Zlib(dst, tt.src)
			// compress/zlib must agree on ok-ness.
			ref, refErr := zlibStd(tt.src)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Error(t, refErr, "compress/zlib accepts it")
				return
			}
			require.NoError(t, err)
			require.NoError(t, refErr)
			require.Equal(t, tt.size, n)
			require.Equal(t, tt.want, dst)
			require.Equal(t, tt.want, ref)
		})
	}
}

func zlibStd(src []byte) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(r)
	if out == nil {
		out = []byte{}
	}
	return out, err
}

// bitWriter packs values LSB first.
type bitWriter struct {
	out  []byte
	acc  uint64
	nacc uint
}

func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.nacc
	w.nacc += n
	for w.nacc >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nacc -= 8
	}
}

// huff writes a Huffman code (MSB first).
func (w *bitWriter) huff(code uint64, n uint) {
	var r uint64
	for i := uint(0); i < n; i++ {
		r |= (code >> i & 1) << (n - 1 - i)
	}
	w.bits(r, n)
}

func (w *bitWriter) flush() []byte {
	if w.nacc > 0 {
		w.out = append(w.out, byte(w.acc))
	}
	return w.out
}

// fixedLitCode writes literal/length symbol s with the fixed code.
func (w *bitWriter) fixedLitCode(s uint16) {
	switch {
	case s < 144:
		w.huff(0x30+uint64(s), 8)
	case s < 256:
		w.huff(0x190+uint64(s-144), 9)
	case s < 280:
		w.huff(uint64(s-256), 7)
	default:
		w.huff(0xc0+uint64(s-280), 8)
	}
}

// fixedRaw writes a final fixed block: the literals, then symbol sym, then
// distance code dcode (if ≥ 0, with zero extra bits), then end-of-block.
func fixedRaw(t *testing.T, lits []uint16, sym uint16, dcode int) []byte {
	var w bitWriter
	w.bits(1, 1)
	w.bits(1, 2)
	for _, l := range lits {
		w.fixedLitCode(l)
	}
	w.fixedLitCode(sym)
	if dcode >= 0 {
		w.huff(uint64(dcode), 5)
		if dcode >= 4 && dcode < 30 {
			w.bits(0, uint(distExtra[dcode]))
		}
	}
	w.fixedLitCode(256)
	return w.flush()
}

// fixedBits: final fixed block with literals lits then a match of length
// 3..10 at distance 1..4.
func fixedBits(t *testing.T, lits string, length, dist int) []byte {
	var w bitWriter
	w.bits(1, 1)
	w.bits(1, 2)
	for _, c := range []byte(lits) {
		w.fixedLitCode(uint16(c))
	}
	w.fixedLitCode(uint16(257 + length - 3))
	w.huff(uint64(dist-1), 5)
	w.fixedLitCode(256)
	return w.flush()
}

// fixedDist300: final fixed block with 300 literals 'a' and a length-3
// match at distance 300, then 300 literals 'b'.
func fixedDist300() []byte {
	var w bitWriter
	w.bits(1, 1)
	w.bits(1, 2)
	for range 300 {
		w.fixedLitCode('a')
	}
	w.fixedLitCode(257)
	w.huff(16, 5)
	w.bits(300-257, 7)
	for range 300 {
		w.fixedLitCode('b')
	}
	w.fixedLitCode(256)
	return w.flush()
}

// dynHeader: final dynamic block header with HLIT, HDIST, HCLEN fields and
// the given code-length code lengths (in transmission order), followed by
// a zero byte of symbols.
func dynHeader(hlit, hdist, hclen int, cl []uint8) []byte {
	var w bitWriter
	w.bits(1, 1)
	w.bits(2, 2)
	w.bits(uint64(hlit), 5)
	w.bits(uint64(hdist), 5)
	w.bits(uint64(hclen-4), 4)
	for _, l := range cl[:hclen] {
		w.bits(uint64(l), 3)
	}
	w.bits(0, 16)
	return w.flush()
}

// TestGoLoop reruns the decoding tests on the portable Go loop (the
// assembly loop is used by default where the CPU allows).
func TestGoLoop(t *testing.T) {
	asm := useFastAsm
	useFastAsm = false
	defer func() { useFastAsm = asm }()
	t.Run("stdlib", TestZlibMatchesStdlib)
	t.Run("caseA", TestCaseAIDAT)
	t.Run("edge", TestEdgeStreams)
}

func TestBuildRejects(t *testing.T) {
	var tbl [litTableSize]uint32
	require.ErrorIs(t, build(tbl[:], litBits, []uint8{1, 1, 1}, litMeta[:]), errOversubscribed)
	require.ErrorIs(t, build(tbl[:], litBits, []uint8{1, 2}, litMeta[:]), errIncomplete)
	require.ErrorIs(t, build(tbl[:], litBits, []uint8{2}, litMeta[:]), errIncomplete)
	require.NoError(t, build(tbl[:], litBits, []uint8{0, 1}, litMeta[:]))
	require.NoError(t, build(tbl[:], litBits, []uint8{0, 0}, litMeta[:]))
	// Maximal-depth code: lengths 1, 2, ..., 15, 15 (uses sub-tables).
	l := make([]uint8, 16)
	for i := range 15 {
		l[i] = uint8(i + 1)
	}
	l[15] = 15
	require.NoError(t, build(tbl[:], litBits, l, litMeta[:]))
}

func TestAdler32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := make([]byte, 300000)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	ff := bytes.Repeat([]byte{0xff}, 100000)
	simd := useAdlerSIMD
	defer func() { useAdlerSIMD = simd }()
	for _, useSIMD := range []bool{false, simd} {
		useAdlerSIMD = useSIMD
		for _, n := range []int{0, 1, 31, 32, 63, 64, 65, 100, 5552, 5553, 16384, 16415, 16416, 70000, 300000} {
			require.Equal(t, adler32.Checksum(p[:n]), Adler32(p[:n]), "simd %v n %d", useSIMD, n)
			if n <= len(ff) {
				require.Equal(t, adler32.Checksum(ff[:n]), Adler32(ff[:n]), "simd %v 0xff n %d", useSIMD, n)
			}
			h := adler32.New()
			h.Write(p[:n/3])
			a := UpdateAdler32(Adler32(p[:n/3]), p[n/3:n])
			h.Write(p[n/3 : n])
			require.Equal(t, h.Sum32(), a)
		}
	}
	// Kernel vs its scalar definition.
	for _, n := range []int{32, 64, 4096, adlerBlock} {
		s1, p1, w1 := adlerKernelGo(ff[:n])
		s2, p2, w2 := adlerKernel(ff[:n])
		require.Equal(t, [3]uint64{s1, p1, w1}, [3]uint64{s2, p2, w2}, "n %d", n)
	}
}

func TestZeroAllocs(t *testing.T) {
	streams, sizes := caseAIDAT(t)
	var d Decoder
	dst := make([]byte, sizes[0])
	_, _ = d.Zlib(dst, streams[0])
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := d.Zlib(dst, streams[0]); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// FuzzZlib: same ok-ness and output as compress/zlib for the size
// compress/zlib produces (and failure for a size one off).
func FuzzZlib(f *testing.F) {
	for _, p := range [][]byte{nil, []byte("hello hello hello"), bytes.Repeat([]byte{1, 2, 3}, 100)} {
		for _, lvl := range levels {
			f.Add(zlibBytes(f, p, lvl))
		}
	}
	f.Add([]byte{0x78, 0x9c, 3, 0, 0, 0, 0, 1})
	// Seeds long enough for the fast loops (≥ 290 bytes of output).
	c := corpus(f)
	for _, name := range []string{"text-1000", "rgb-rows"} {
		p := c[name]
		if len(p) > 3000 {
			p = p[:3000]
		}
		for _, lvl := range []int{flate.BestSpeed, flate.BestCompression, flate.HuffmanOnly} {
			f.Add(zlibBytes(f, p, lvl))
		}
	}
	var d Decoder
	f.Fuzz(func(t *testing.T, src []byte) {
		br := bytes.NewReader(src)
		var want []byte
		var refErr error
		if r, err := zlib.NewReader(br); err != nil {
			refErr = err
		} else {
			want, refErr = io.ReadAll(io.LimitReader(r, 1<<20))
			if len(want) == 1<<20 {
				return // too big to compare cheaply
			}
		}
		trailing := br.Len()
		got := make([]byte, len(want))
		n, err := d.Zlib(got, src)
		if n > len(got) {
			t.Fatalf("n %d > len(dst) %d", n, len(got))
		}
		if refErr != nil {
			if err == nil {
				t.Fatalf("compress/zlib fails (%v), Zlib accepts", refErr)
			}
			if useFastAsm {
				useFastAsm = false
				_, err := d.Zlib(got, src)
				useFastAsm = true
				if err == nil {
					t.Fatalf("compress/zlib fails (%v), Go loop accepts", refErr)
				}
			}
			return
		}
		if trailing > 0 {
			if !errors.Is(err, ErrTrailingData) {
				t.Fatalf("%d trailing bytes: err %v", trailing, err)
			}
			src = src[:len(src)-trailing]
			_, err = d.Zlib(got, src)
		}
		if err != nil {
			t.Fatalf("compress/zlib accepts, Zlib fails: %v", err)
		}
		if !bytes.Equal(want, got) {
			t.Fatal("output differs")
		}
		if useFastAsm {
			useFastAsm = false
			clear(got)
			_, err := d.Zlib(got, src)
			useFastAsm = true
			if err != nil || !bytes.Equal(want, got) {
				t.Fatalf("Go loop: %v", err)
			}
		}
		if _, err := d.Zlib(make([]byte, len(want)+1), src); !errors.Is(err, ErrOutputShort) {
			t.Fatalf("size+1: %v", err)
		}
		if len(want) > 0 {
			if _, err := d.Zlib(got[:len(want)-1], src); !errors.Is(err, ErrOutputOverflow) {
				t.Fatalf("size-1: %v", err)
			}
		}
	})
}

// FuzzAdler32: both kernels agree with hash/adler32.
func FuzzAdler32(f *testing.F) {
	f.Add([]byte("hello"), uint32(1))
	f.Add(bytes.Repeat([]byte{0xff}, 5000), uint32(0xfff0fff0))
	f.Fuzz(func(t *testing.T, p []byte, seed uint32) {
		if Adler32(p) != adler32.Checksum(p) {
			t.Fatal("Adler32 differs")
		}
		s1, s2 := seed&0xffff%adlerMod, seed>>16%adlerMod
		a := s2<<16 | s1
		if UpdateAdler32(a, p) != adlerGeneric(s1, s2, p) {
			t.Fatal("SIMD and generic differ")
		}
	})
}

// TestRandomStreams: random mixes of literals, runs, short periods and
// far copies at random levels, through Zlib (assembly and Go loops) and
// compared with the input.
func TestRandomStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var d Decoder
	n := 60
	if testing.Short() {
		n = 15
	}
	for i := range n {
		var p []byte
		for len(p) < 2000+rng.IntN(60000) {
			switch rng.IntN(4) {
			case 0:
				for range rng.IntN(100) {
					p = append(p, byte(rng.IntN(1+rng.IntN(256))))
				}
			case 1:
				p = append(p, bytes.Repeat([]byte{byte(rng.Uint32())}, 1+rng.IntN(600))...)
			case 2:
				pat := make([]byte, 2+rng.IntN(20))
				for j := range pat {
					pat[j] = byte(rng.Uint32())
				}
				for range 1 + rng.IntN(30) {
					p = append(p, pat...)
				}
			default:
				if len(p) > 10 {
					from := rng.IntN(len(p) - 1)
					p = append(p, p[from:min(len(p), from+3+rng.IntN(300))]...)
				}
			}
		}
		lvl := levels[rng.IntN(len(levels))]
		z := zlibBytes(t, p, lvl)
		for _, asm := range []bool{useFastAsm, false} {
			saved := useFastAsm
			useFastAsm = asm
			got := make([]byte, len(p))
			_, err := d.Zlib(got, z)
			useFastAsm = saved
			require.NoError(t, err, "stream %d level %d asm %v", i, lvl, asm)
			require.True(t, bytes.Equal(p, got), "stream %d level %d asm %v", i, lvl, asm)
		}
	}
}
