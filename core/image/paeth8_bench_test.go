package image

import (
	"strings"
	"testing"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// caseARaw inflates case-A frame i and returns its filtered scanlines
// (with pngRawSlack readable bytes after them) and the width and height.
func caseARaw(b *testing.B, i int) (raw []uint8, w, h int) {
	data := caseAPNGs(b)[i]
	var fd pngFast
	var f RGB
	if !fd.decode(&f, data) {
		b.Fatal("case-A frame not handled by the fast path")
	}
	w, h = f.W, f.H
	raw = append([]uint8(nil), fd.raw[:h*(3*w+1)+pngRawSlack]...)
	return raw, w, h
}

// unfilterRGBInPlaceOld is the in-place route of pngFast (four-/two-row
// AVX2/SSE2 wavefronts, then a copy of the rows into pix), kept here to
// compare with unfilterRGBOut in one binary.
func unfilterRGBInPlaceOld(pix, raw, zero []uint8, w, h int) bool {
	rb, stride := 3*w, 3*w+1
	row := func(y int) []uint8 { return raw[y*stride+1 : (y+1)*stride] }
	for y := 0; y < h; y++ {
		cur, prev := row(y), zero
		if y > 0 {
			prev = row(y - 1)
		}
		f := raw[y*stride]
		if y+3 < h && f == 4 && raw[(y+1)*stride] == 4 && raw[(y+2)*stride] == 4 && raw[(y+3)*stride] == 4 &&
			paeth4Fast(cur, row(y+1), row(y+2), row(y+3), prev, 3) {
			y += 3
			continue
		}
		if f == 4 && y+1 < h && raw[(y+1)*stride] == 4 && paeth2Fast(cur, row(y+1), prev, 3) {
			y++
			continue
		}
		if !unfilter(f, cur, prev, 3) {
			return false
		}
	}
	for y := 0; y < h; y++ {
		copy(pix[y*rb:(y+1)*rb], row(y))
	}
	return true
}

// BenchmarkUnfilterCaseA: unfiltering one case-A frame (94 % Paeth rows)
// into an RGB buffer. "copy-raw" is the cost of restoring the filtered
// scanlines, which the in-place variants pay on top of their work here
// (and which the decoder does not: it inflates afresh); subtract it.
// "out-avx2-x16x8" is the wide route the decoder takes (sixteen- and
// eight-row AVX2 kernels), "out-avx2-x8" the eight-row one alone.
func BenchmarkUnfilterCaseA(b *testing.B) {
	raw, w, h := caseARaw(b, 0)
	work := make([]uint8, len(raw))
	pix := make([]uint8, 3*w*h)
	zero := make([]uint8, 3*w+pngRawSlack)
	defer func() { forceScalar, forceNoPaeth16AVX2 = false, false }()
	for _, k := range []struct {
		name string
		run  func()
	}{
		{"copy-raw", func() { copy(work, raw) }},
		{"inplace-scalar+copy", func() {
			copy(work, raw)
			forceScalar = true
			unfilterRGBInPlaceOld(pix, work, zero, w, h)
			forceScalar = false
		}},
		{"inplace-avx2x4+copy", func() { copy(work, raw); unfilterRGBInPlaceOld(pix, work, zero, w, h) }},
		{"out-avx2-x8", func() {
			if !paeth8Enabled() {
				b.Skip("no AVX2")
			}
			forceNoPaeth16AVX2 = true
			unfilterRGBOut(pix, raw, zero, w, h)
			forceNoPaeth16AVX2 = false
		}},
		{"out-avx2-x16x8", func() {
			if !paeth8Enabled() {
				b.Skip("no AVX2")
			}
			unfilterRGBOut(pix, raw, zero, w, h)
		}},
	} {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(3 * w * h))
			defer benchcpu.Report(b, benchcpu.Now())
			for b.Loop() {
				k.run()
			}
		})
	}
}

// BenchmarkPaethKernels: eight 320-pixel Paeth rows of case-A frame 1
// (rows 20..27) with the one-row SSE2, two-row SSE2, four-row AVX2 (all in
// place, on a fresh copy) and eight-row AVX2 (out of place) kernels;
// the sixteen-row AVX2 kernel does rows 20..35 (SetBytes
// counts 16 rows: compare MB/s, or halve its ns/op).
func BenchmarkPaethKernels(b *testing.B) {
	raw, w, _ := caseARaw(b, 1)
	rb, stride := 3*w, 3*w+1
	const y0 = 20
	src := raw[y0*stride:]
	rows := make([]uint8, 9*rb+pngRawSlack) // prev + 8 rows, packed
	pix := make([]uint8, 16*rb+pngRawSlack)
	fresh := func() {
		for k := 0; k < 8; k++ {
			copy(rows[(k+1)*rb:(k+2)*rb], src[k*stride+1:(k+1)*stride])
		}
	}
	r := func(k int) []uint8 { return rows[k*rb : (k+1)*rb] }
	for _, k := range []struct {
		name string
		run  func()
	}{
		{"copy-rows", fresh},
		{"x1-sse2", func() {
			fresh()
			for k := 1; k <= 8; k++ {
				if !paethFast(r(k), r(k-1), 3) {
					paeth(r(k), r(k-1), 3)
				}
			}
		}},
		{"x2-sse2", func() {
			fresh()
			for k := 1; k <= 8; k += 2 {
				paeth2Fast(r(k), r(k+1), r(k-1), 3)
			}
		}},
		{"x4-avx2", func() {
			fresh()
			paeth4Fast(r(1), r(2), r(3), r(4), r(0), 3)
			paeth4Fast(r(5), r(6), r(7), r(8), r(4), 3)
		}},
		{"x8-avx2-out", func() {
			if !paeth8Out(pix, rb, src[1:], stride, rows[:rb+pngRawSlack], w) {
				b.Skip("no AVX2")
			}
		}},
		{"x16-avx2-out", func() {
			if !paeth16Out(pix, rb, src[1:], stride, rows[:rb+pngRawSlack], w) {
				b.Skip("no AVX2")
			}
		}},
	} {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(8 * rb))
			if strings.HasPrefix(k.name, "x16") {
				b.SetBytes(int64(16 * rb))
			}
			defer benchcpu.Report(b, benchcpu.Now())
			for b.Loop() {
				k.run()
			}
		})
	}
}

// BenchmarkDecodePNGPaeth8: BenchmarkDecodePNG320x180 with the wide AVX2
// kernels on ("avx2-x16x8", unfiltering straight into dst) and off
// ("avx2x4", the in-place route), plus the inflate alone, so
// that the unfiltering share can be read off.
func BenchmarkDecodePNGPaeth8(b *testing.B) {
	data := caseAPNGs(b)[0]
	defer func() { forceNoPaeth8 = false }()
	for _, off := range []bool{true, false} {
		name := "avx2-x16x8"
		if off {
			name = "avx2x4"
		}
		b.Run(name, func(b *testing.B) {
			forceNoPaeth8 = off
			var f RGB
			b.ReportAllocs()
			defer benchcpu.Report(b, benchcpu.Now())
			for b.Loop() {
				if err := Decode(&f, data, DefaultLimits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("inflate-only", func(b *testing.B) {
		var fd pngFast
		var f RGB
		if !fd.decode(&f, data) {
			b.Fatal("not handled")
		}
		stream := fd.idat[0]
		out := fd.raw[:f.H*(3*f.W+1)]
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		for b.Loop() {
			if _, err := fd.inf.Zlib(out, stream); err != nil {
				b.Fatal(err)
			}
		}
	})
}
