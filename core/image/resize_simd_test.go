package image

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// resizeCase is one differential case: an area or bicubic resize of a
// sw×sh×cn pattern, optionally read through a strided view (pad extra
// bytes per source row, like the eval chain's crop).
type resizeCase struct {
	sw, sh, dw, dh, cn, pad int
	kind                    string
}

func (c resizeCase) String() string {
	return fmt.Sprintf("%dx%d->%dx%d_c%d_pad%d_%s", c.sw, c.sh, c.dw, c.dh, c.cn, c.pad, c.kind)
}

// areaDiffCases: the DROID sizes, odd and ragged widths around the block
// sizes of the kernels (16/32/64 outputs, 16/64-byte windows), channel
// counts 1..4, and random sizes.
func areaDiffCases() []resizeCase {
	cs := []resizeCase{
		{320, 180, 455, 256, 3, 0, "soft"},
		{432, 243, 455, 256, 3, 23 * 3, "noise"}, // the crop view of 455×256
		{320, 180, 455, 256, 3, 0, "noise"},
		{11, 5, 32, 7, 1, 0, "noise"},
		{11, 5, 33, 7, 3, 1, "noise"},
		{21, 9, 22, 31, 3, 0, "noise"},
		{16, 3, 21, 4, 4, 5, "noise"},
		{22, 7, 64, 9, 1, 0, "noise"},
		{40, 30, 65, 31, 2, 3, "noise"},
		{64, 2, 63, 5, 3, 0, "noise"},  // x shrink, y enlarge
		{200, 4, 40, 9, 3, 0, "noise"}, // x shrink ×5: windows too wide for AVX2
		{7, 100, 43, 101, 3, 0, "soft"},
		{100, 1, 300, 2, 3, 0, "noise"},
		{30, 50, 70, 17, 3, 2, "noise"}, // x enlarge, y shrink ×3: source rows skipped
		{30, 7, 70, 1, 4, 0, "noise"},
	}
	for i := 0; i < 60; i++ {
		x := uint32(i)*2654435761 + 99
		cs = append(cs, resizeCase{
			sw: int(x%130) + 1, sh: int((x>>8)%40) + 1,
			dw: int((x>>15)%300) + 1, dh: int((x>>23)%60) + 1,
			cn: int(x>>30) + 1, pad: int(x>>5) % 7, kind: "noise",
		})
	}
	return cs
}

func bicubicDiffCases() []resizeCase {
	cs := []resizeCase{
		{455, 256, 448, 256, 3, 0, "soft"}, // smart_resize of the DROID eval frame
		{455, 256, 448, 256, 3, 0, "noise"},
		{455, 9, 448, 9, 1, 0, "noise"},
		{455, 9, 448, 9, 4, 0, "noise"},
		{460, 7, 448, 7, 3, 0, "noise"},
		{341, 5, 352, 5, 3, 0, "noise"}, // enlarge
		{40, 3, 37, 3, 3, 0, "noise"},
		{23, 3, 11, 5, 3, 0, "noise"},
		{64, 4, 22, 4, 3, 0, "noise"},  // ×3 shrink: 13 taps
		{300, 4, 50, 4, 3, 0, "noise"}, // ×6 shrink: 25 taps
		{11, 2, 64, 2, 2, 0, "noise"},
		{22, 2, 21, 2, 1, 0, "noise"},
		{33, 2, 32, 2, 1, 0, "noise"},
		{21, 2, 22, 2, 3, 0, "noise"},
	}
	for i := 0; i < 60; i++ {
		x := uint32(i)*2246822519 + 4242
		sw := int(x%500) + 1
		cs = append(cs, resizeCase{
			sw: sw, sh: int((x>>9)%6) + 1, dw: int((x>>17)%500) + 1, dh: 0,
			cn: int(x>>30) + 1, kind: "noise",
		})
	}
	for i := range cs {
		if cs[i].dh == 0 {
			cs[i].dh = cs[i].sh
		}
	}
	return cs
}

// strided returns the case's source laid out with c.pad junk bytes after
// every row, and the row stride.
func (c resizeCase) strided() ([]uint8, int) {
	img := pattern(uint32(c.sw*7919+c.sh*31+c.dw), c.sw, c.sh, c.cn, c.kind)
	row := c.sw * c.cn
	stride := row + c.pad
	out := make([]uint8, (c.sh-1)*stride+row)
	for i := range out {
		out[i] = 0xA5
	}
	for y := 0; y < c.sh; y++ {
		copy(out[y*stride:], img[y*row:(y+1)*row])
	}
	return out, stride
}

// runAreaCase resizes with the kernels currently selected.
func runAreaCase(t *testing.T, r *AreaResizer, c resizeCase) []uint8 {
	src, stride := c.strided()
	dst := make([]uint8, c.dw*c.dh*c.cn)
	require.NoError(t, r.resizeArea(dst, c.dw, c.dh, src, stride, c.sw, c.sh, c.cn), "%v", c)
	return dst
}

func runBicubicCase(t *testing.T, r *BicubicResizer, c resizeCase) []uint8 {
	src := pattern(uint32(c.sw*7919+c.sh*31+c.dw), c.sw, c.sh, c.cn, c.kind)
	dst := make([]uint8, c.dw*c.dh*c.cn)
	require.NoError(t, r.ResizeBicubic(BicubicTorch, dst, c.dw, c.dh, src, c.sw, c.sh, c.cn), "%v", c)
	return dst
}

// scalarRefs computes every case with forceScalar (the portable loops).
func scalarRefs(t *testing.T, cases []resizeCase, run func(c resizeCase) []uint8) [][]uint8 {
	forceScalar = true
	defer func() { forceScalar = false }()
	out := make([][]uint8, len(cases))
	for i, c := range cases {
		out[i] = run(c)
	}
	return out
}

// checkResizeKernels compares the currently selected kernels with the
// scalar loops on every differential case, with one resizer reused across
// cases (table caching) and a fresh one per case.
func checkResizeKernels(t *testing.T) {
	var ra, rs AreaResizer
	acs := areaDiffCases()
	aref := scalarRefs(t, acs, func(c resizeCase) []uint8 { return runAreaCase(t, &rs, c) })
	var hits [4]int       // area AVX2 / AVX-512 tables, bicubic AVX2 / AVX-512
	var paired, mixed int // AVX2 tables with paired blocks, with paired and unpaired ones
	for i, c := range acs {
		if got := runAreaCase(t, &ra, c); !bytes.Equal(got, aref[i]) {
			t.Fatalf("area %v: kernels differ from scalar", c)
		}
		if ResizeAreaPath(c.sw, c.sh, c.dw, c.dh) == AreaLinear {
			hits[0] += b2i(ra.gtab.ok)
			hits[1] += b2i(ra.ztab.ok)
			p, m := pairedStats(&ra.gtab)
			paired, mixed = paired+p, mixed+m
		}
		var fresh AreaResizer
		if got := runAreaCase(t, &fresh, c); !bytes.Equal(got, aref[i]) {
			t.Fatalf("area %v (fresh resizer): kernels differ from scalar", c)
		}
	}
	var rb, rbs BicubicResizer
	bcs := bicubicDiffCases()
	bref := scalarRefs(t, bcs, func(c resizeCase) []uint8 { return runBicubicCase(t, &rbs, c) })
	for i, c := range bcs {
		if got := runBicubicCase(t, &rb, c); !bytes.Equal(got, bref[i]) {
			t.Fatalf("bicubic %v: kernels differ from scalar", c)
		}
		if c.sw != c.dw && rb.h.gcn == c.cn {
			hits[2] += b2i(rb.h.gtab.ok)
			hits[3] += b2i(rb.h.ztab.ok)
			p, m := pairedStats(&rb.h.gtab)
			paired, mixed = paired+p, mixed+m
		}
	}
	t.Logf("cases with tables: area avx2 %d avx512 %d, bicubic avx2 %d avx512 %d (of %d, %d); avx2 tables with paired blocks %d, mixed %d",
		hits[0], hits[1], hits[2], hits[3], len(acs), len(bcs), paired, mixed)
	if groupKernels() && (paired < 10 || mixed < 5) {
		t.Errorf("only %d AVX2 tables with paired blocks, %d mixed", paired, mixed)
	}
	for i, h := range hits {
		if used := (i%2 == 0 && groupKernels()) || (i%2 == 1 && zgroupKernels()); used && h < 10 {
			t.Errorf("only %d cases exercise table %d", h, i)
		}
	}
}

// pairedStats reports whether an AVX2 table has paired blocks, and
// whether it has both paired and unpaired ones, as 0/1.
func pairedStats(g *groupTab) (paired, mixed int) {
	if !g.ok || len(g.runs) == 0 {
		return 0, 0
	}
	n := 0
	for k := 0; k+1 < len(g.runs); k += 2 {
		n += int(g.runs[k+1] - g.runs[k])
	}
	return 1, b2i(n < g.nblk)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestResizeKernelsMatchScalar: the kernels this machine selects by
// default equal the scalar code (see resize_simd_amd64_test.go for every
// instruction-set level).
func TestResizeKernelsMatchScalar(t *testing.T) { checkResizeKernels(t) }

// TestStridedAreaMatchesCompact: a strided source gives the bytes of the
// same image stored compactly, on every INTER_AREA path.
func TestStridedAreaMatchesCompact(t *testing.T) {
	var r AreaResizer
	for _, c := range []resizeCase{
		{432, 243, 455, 256, 3, 69, "noise"}, // linear
		{40, 30, 20, 15, 3, 7, "noise"},      // fast 2×2
		{60, 30, 20, 10, 1, 3, "noise"},      // fast 3×3
		{50, 30, 20, 13, 4, 2, "noise"},      // generic
		{50, 30, 50, 30, 3, 5, "noise"},      // copy
	} {
		got := runAreaCase(t, &r, c)
		want := make([]uint8, len(got))
		require.NoError(t, r.ResizeArea(want, c.dw, c.dh, pattern(uint32(c.sw*7919+c.sh*31+c.dw), c.sw, c.sh, c.cn, c.kind), c.sw, c.sh, c.cn))
		require.Equal(t, want, got, "%v", c)
	}
	src, stride := resizeCase{10, 4, 20, 8, 3, 2, "noise"}.strided()
	require.Error(t, r.resizeArea(make([]uint8, 20*8*3), 20, 8, src[:len(src)-1], stride, 10, 4, 3))
	require.Error(t, r.resizeArea(make([]uint8, 20*8*3), 20, 8, src, 29, 10, 4, 3))
}

// TestDROIDTablesFit: the DROID chain's passes fit both group kernels
// (a builder change that silently dropped them to the SSE path would
// still pass the bit-exactness tests).
func TestDROIDTablesFit(t *testing.T) {
	var a1, a2 AreaResizer
	src := make([]uint8, 455*256*3)
	dst := make([]uint8, 455*256*3)
	require.NoError(t, a1.ResizeArea(dst, 455, 256, src, 320, 180, 3))
	require.NoError(t, a2.resizeArea(dst, 455, 256, src[(6*455+11)*3:], 455*3, 432, 243, 3))
	for i, a := range []*AreaResizer{&a1, &a2} {
		require.True(t, a.gtab.ok, "area %d: AVX2 table", i+1)
		require.True(t, a.ztab.ok, "area %d: AVX-512 table", i+1)
		require.True(t, a.ztab.shared, "area %d: AVX-512 table, one window per block", i+1)
	}
	var tb bicubicTab
	tb.compute(455, 448, BicubicTorch)
	g := tb.groups(3)
	require.True(t, g.gtab.ok, "bicubic AVX2 table")
	require.True(t, g.ztab.ok, "bicubic AVX-512 table")
	require.True(t, g.ztab.shared, "bicubic AVX-512 table, windows shared by zmm pairs")
	require.Equal(t, 3, g.ztab.np)
}

// FuzzResizeKernels: for any sizes (up to 600 wide, so the 64-output
// AVX-512 blocks and the row-end phases are reached), channel count and
// row padding, the area (strided source) and torch bicubic resizes with
// the default kernels equal the scalar loops.
func FuzzResizeKernels(f *testing.F) {
	f.Add(uint16(320), uint8(18), uint16(455), uint8(25), uint8(2), uint8(0))
	f.Add(uint16(455), uint8(3), uint16(448), uint8(3), uint8(2), uint8(5))
	f.Add(uint16(33), uint8(2), uint16(64), uint8(5), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, sw uint16, sh uint8, dw uint16, dh uint8, cn, pad uint8) {
		c := resizeCase{
			sw: int(sw%600) + 1, sh: int(sh%12) + 1, dw: int(dw%600) + 1, dh: int(dh%12) + 1,
			cn: int(cn%4) + 1, pad: int(pad % 9), kind: "noise",
		}
		var a AreaResizer
		got := runAreaCase(t, &a, c)
		forceScalar = true
		want := runAreaCase(t, &a, c)
		forceScalar = false
		if !bytes.Equal(got, want) {
			t.Fatalf("area %v: kernels differ from scalar", c)
		}
		var b BicubicResizer
		got = runBicubicCase(t, &b, c)
		forceScalar = true
		want = runBicubicCase(t, &b, c)
		forceScalar = false
		if !bytes.Equal(got, want) {
			t.Fatalf("bicubic %v: kernels differ from scalar", c)
		}
	})
}
