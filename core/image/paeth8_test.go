package image

import (
	goimage "image"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// paethRowsScalar is the reference for a block of filtered rows: it
// unfilters rows of 3n bytes (raw scanlines with their filter bytes, stride
// 3n+1) below prev into out, one row at a time with the scalar code.
func unfilterRowsScalar(t *testing.T, out, raw, prev []uint8, n, h int) {
	t.Helper()
	rb, stride := 3*n, 3*n+1
	for y := 0; y < h; y++ {
		row := out[y*rb : (y+1)*rb]
		copy(row, raw[y*stride+1:(y+1)*stride])
		p := prev[:rb]
		if y > 0 {
			p = out[(y-1)*rb : y*rb]
		}
		f := raw[y*stride]
		if f == 4 {
			paeth(row, p, 3)
			continue
		}
		require.True(t, unfilter(f, row, p, 3))
	}
}

// fillRows fills buf with random bytes (smooth=false) or with content whose
// unfiltered rows are smooth, so that the predictors tie often.
func fillRows(buf []uint8, next func() uint8, smooth bool, rep int) {
	base := next()
	for i := range buf {
		if smooth {
			buf[i] = next() & (uint8(rep) & 7)
			if i%17 == 0 {
				buf[i] = base + uint8(i/5)
			}
		} else {
			buf[i] = next()
		}
	}
}

// TestPaethWideMatchesScalar compares the eight- and sixteen-row wide
// Paeth paths (AVX2 kernels; paeth16Out also with the eight-row kernel run
// twice) with scalar Paeth rows on random and smooth rows of many widths,
// with dst and src strides larger than the rows and canaries around every
// dst row: nothing outside [0, 3n) of a row may be written.
func TestPaethWideMatchesScalar(t *testing.T) {
	if !paeth8Enabled() {
		t.Skip("no wide Paeth on this CPU/build (needs amd64 with AVX2, without -tags purego)")
	}
	defer func() { forceNoPaeth16AVX2 = false }()
	for _, l := range []struct {
		name    string
		no16avx bool
	}{{"x16", false}, {"x8-only", true}} {
		forceNoPaeth16AVX2 = l.no16avx
		t.Run(l.name, testPaethWide)
	}
}

func testPaethWide(t *testing.T) {
	rng := uint32(8888)
	next := func() uint8 { rng = rng*1664525 + 1013904223; return uint8(rng >> 24) }
	for _, kern := range []struct {
		rows, minN int
		fn         func(dst []uint8, dstride int, src []uint8, sstride int, prev []uint8, n int) bool
	}{{8, 9, paeth8Out}, {16, 17, paeth16Out}} {
		R := kern.rows
		for _, n := range []int{9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 23, 31, 32, 33, 64, 65, 100, 320, 455, 1921} {
			for rep := 0; rep < 16; rep++ {
				sstride := 3*n + 1 + rep%3
				dstride := 3*n + rep%5
				src := make([]uint8, R*sstride+1)
				fillRows(src, next, rep%2 == 1, rep)
				prev := make([]uint8, 3*n+1)
				fillRows(prev, next, rep%2 == 1, rep)
				const canary = 0xA5
				dst := make([]uint8, 16+R*dstride+16)
				for i := range dst {
					dst[i] = canary
				}
				if n < kern.minN {
					require.False(t, kern.fn(dst[16:], dstride, src, sstride, prev, n), "x%d n=%d", R, n)
					continue
				}
				// Reference: the rows gathered into a packed raw buffer.
				raw := make([]uint8, R*(3*n+1))
				for k := 0; k < R; k++ {
					raw[k*(3*n+1)] = 4
					copy(raw[k*(3*n+1)+1:(k+1)*(3*n+1)], src[k*sstride:k*sstride+3*n])
				}
				want := make([]uint8, R*3*n)
				unfilterRowsScalar(t, want, raw, prev, n, R)
				require.True(t, kern.fn(dst[16:], dstride, src, sstride, prev, n))
				for k := 0; k < R; k++ {
					got := dst[16+k*dstride : 16+k*dstride+3*n]
					require.Equal(t, want[k*3*n:(k+1)*3*n], got, "x%d n=%d rep=%d row %d", R, n, rep, k)
				}
				for i, v := range dst {
					off := i - 16
					inRow := off >= 0 && off < R*dstride && off%dstride < 3*n
					if !inRow {
						require.Equal(t, uint8(canary), v, "x%d n=%d rep=%d: byte %d outside the rows written", R, n, rep, off)
					}
				}
			}
		}
		// Slices too short by one byte: nothing done.
		n := 20
		ok := func(dl, sl, pl int) bool {
			return kern.fn(make([]uint8, dl), 3*n, make([]uint8, sl), 3*n+1, make([]uint8, pl), n)
		}
		dl, sl, pl := (R-1)*3*n+3*n, (R-1)*(3*n+1)+3*n+1, 3*n+1
		require.True(t, ok(dl, sl, pl))
		require.False(t, ok(dl-1, sl, pl))
		require.False(t, ok(dl, sl-1, pl))
		require.False(t, ok(dl, sl, pl-1))
	}
}

// TestUnfilterRGBOutMatchesScalar runs whole images of random filter
// sequences (runs of 1..20 Paeth rows mixed with None, Sub,
// Up, Average) through unfilterRGBOut and compares with the scalar
// row-by-row reference: wide kernels, the in-place AVX2/SSE2 route, and
// scalar.
func TestUnfilterRGBOutMatchesScalar(t *testing.T) {
	defer func() { forceNoPaeth8, forceScalar, forceNoPaeth16AVX2 = false, false, false }()
	rng := uint32(31337)
	next := func() uint8 { rng = rng*1664525 + 1013904223; return uint8(rng >> 24) }
	for _, n := range []int{1, 2, 3, 8, 9, 10, 17, 33, 320, 455} {
		for _, h := range []int{1, 2, 7, 8, 9, 15, 16, 17, 40, 61} {
			for rep := 0; rep < 6; rep++ {
				stride := 3*n + 1
				raw := make([]uint8, h*stride+pngRawSlack)
				fillRows(raw, next, rep%2 == 1, rep)
				// Filter bytes: runs of Paeth of random length 1..20, then
				// one or two other filters; rep 0 is all Paeth.
				for y := 0; y < h; {
					run := 1 + int(next())%20
					for k := 0; k < run && y < h; k++ {
						raw[y*stride] = 4
						y++
					}
					for k := 0; k < 1+int(next())%2 && y < h && rep > 0; k++ {
						raw[y*stride] = next() % 4
						y++
					}
				}
				zero := make([]uint8, 3*n+pngRawSlack)
				want := make([]uint8, h*3*n)
				unfilterRowsScalar(t, want, raw, zero, n, h)
				for _, mode := range []string{"wide", "wide-x8", "no-wide", "scalar"} {
					forceNoPaeth8, forceScalar = mode == "no-wide", mode == "scalar"
					forceNoPaeth16AVX2 = mode == "wide-x8"
					got := make([]uint8, h*3*n)
					for i := range got {
						got[i] = 0x5A
					}
					require.True(t, unfilterRGBOut(got, raw, zero, n, h))
					require.Equal(t, want, got, "%s n=%d h=%d rep=%d", mode, n, h, rep)
				}
				forceNoPaeth8, forceScalar, forceNoPaeth16AVX2 = false, false, false
			}
		}
	}
	raw := []uint8{5, 1, 2, 3}
	require.False(t, unfilterRGBOut(make([]uint8, 3), append(raw, make([]uint8, pngRawSlack)...), make([]uint8, 3+pngRawSlack), 1, 1))
}

// TestPNGFastPaeth8OnOff decodes the case-A PNGs with the wide Paeth
// kernels switched on and off and compares with image/png.
func TestPNGFastPaeth8OnOff(t *testing.T) {
	defer func() { forceNoPaeth8 = false }()
	frames := caseAPNGsT(t)
	for _, mode := range []int{0, 1} {
		forceNoPaeth8 = mode == 1
		for i, b := range frames {
			var fd pngFast
			var got RGB
			require.True(t, fd.decode(&got, b), "frame %d", i)
			want, err := stdlibRGB(b)
			require.NoError(t, err)
			require.Equal(t, want.Pix, got.Pix, "frame %d mode=%d", i, mode)
		}
	}
}

// caseAPNGsT reads the four case-A PNG files.
func caseAPNGsT(t testing.TB) [][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(caseADir, "frame_*.png"))
	require.NoError(t, err)
	require.Len(t, names, 4)
	sort.Strings(names)
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

// TestUpOutMatchesScalar compares the SWAR Up filter with the scalar one
// on random rows of every length up to 70 bytes.
func TestUpOutMatchesScalar(t *testing.T) {
	rng := uint32(99)
	next := func() uint8 { rng = rng*1664525 + 1013904223; return uint8(rng >> 24) }
	for n := 0; n <= 70; n++ {
		for rep := 0; rep < 20; rep++ {
			cur, prev := make([]uint8, n), make([]uint8, n+3)
			for i := range cur {
				cur[i] = next()
			}
			for i := range prev {
				prev[i] = next()
			}
			want := make([]uint8, n)
			copy(want, cur)
			require.True(t, unfilter(2, want, prev, 3))
			got := make([]uint8, n)
			upOut(got, cur, prev)
			require.Equal(t, want, got, "n=%d", n)
		}
	}
}

// TestPNGFastWideMatchesStdlib encodes images of ragged sizes with
// image/png (which picks filters per row, Paeth for most camera-like
// rows) and decodes them with the fast path, wide kernels on and off.
func TestPNGFastWideMatchesStdlib(t *testing.T) {
	defer func() { forceNoPaeth8 = false }()
	for _, kind := range []string{"noise", "soft"} {
		for _, sz := range [][2]int{{9, 8}, {10, 9}, {17, 16}, {18, 17}, {33, 40}, {320, 180}, {455, 33}} {
			w, h := sz[0], sz[1]
			src := pattern(uint32(w*h+7), w, h, 4, kind)
			img := goimage.NewRGBA(goimage.Rect(0, 0, w, h))
			for i := 0; i < w*h; i++ {
				copy(img.Pix[4*i:], src[4*i:4*i+3])
				img.Pix[4*i+3] = 255
			}
			data := pngBytes(t, img)
			want, err := stdlibRGB(data)
			require.NoError(t, err)
			for _, mode := range []int{0, 1} {
				forceNoPaeth8 = mode == 1
				var fd pngFast
				var got RGB
				require.True(t, fd.decode(&got, data), "%s %dx%d", kind, w, h)
				require.Equal(t, *want, got, "%s %dx%d mode=%d (0 wide, 1 off)", kind, w, h, mode)
			}
		}
	}
}
