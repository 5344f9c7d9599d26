package rope

import (
	"errors"
	"os"
	"testing"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/stretchr/testify/require"
)

const (
	imStart = 151644
	imEnd   = 151645
	vStart  = 151652
	vEnd    = 151653
	pad     = 151655
	user    = 872
	nl      = 198
)

// droidIDs builds the N1.7 DROID layout: 4 images of 112 pads and nText
// text tokens (the Qwen3-VL chat template's one user turn).
func droidIDs(nText int) []int64 {
	ids := []int64{imStart, user, nl}
	for range 4 {
		ids = append(ids, vStart)
		for range 112 {
			ids = append(ids, pad)
		}
		ids = append(ids, vEnd)
	}
	for i := range nText {
		ids = append(ids, int64(1000+i))
	}
	return append(ids, imEnd, nl)
}

var droidGrids = []Grid{{1, 16, 28}, {1, 16, 28}, {1, 16, 28}, {1, 16, 28}}

// TestSpecWorkedExample checks the DROID layout's position ids, worked out
// by hand from get_rope_index (text block, 4 grids of 1×8×14 merged
// tokens, trailing text).
func TestSpecWorkedExample(t *testing.T) {
	ids := droidIDs(8)
	require.Len(t, ids, 469)
	pos, delta, err := PositionIDs(ids, nil, droidGrids, DefaultConfig())
	require.NoError(t, err)
	S := len(ids)
	at := func(i int) [3]int64 { return [3]int64{pos[i], pos[S+i], pos[2*S+i]} }
	same := func(i int, p int64) { require.Equal(t, [3]int64{p, p, p}, at(i), "token %d", i) }
	for i := range 4 {
		same(i, int64(i))
	}
	// image 1: t=4, h=4..11, w=4..17, raster order over the 8×14 grid
	for r := range 8 {
		for c := range 14 {
			require.Equal(t, [3]int64{4, int64(4 + r), int64(4 + c)}, at(4+r*14+c))
		}
	}
	same(116, 18)
	same(117, 19)
	require.Equal(t, [3]int64{20, 20, 20}, at(118))
	require.Equal(t, [3]int64{20, 27, 33}, at(229))
	same(230, 34)
	same(231, 35)
	require.Equal(t, [3]int64{36, 36, 36}, at(232))
	same(344, 50)
	same(345, 51)
	require.Equal(t, [3]int64{52, 59, 65}, at(457))
	same(458, 66)
	for i := range 8 {
		same(459+i, int64(67+i))
	}
	same(467, 75)
	same(468, 76)
	require.Equal(t, int64(77-469), delta)
}

func TestCaseAGolden(t *testing.T) {
	dir := "../../testdata/n17-tiny/caseA/"
	_, err := os.Stat(dir + "position_ids.npy")
	require.NoError(t, err, "the committed case A goldens")
	load := func(name string) ([]int64, []int) {
		a, err := npy.ReadFile(dir + name)
		require.NoError(t, err)
		v, err := a.Int64s()
		require.NoError(t, err)
		return v, a.Shape
	}
	ids, _ := load("input_ids.npy")
	mask, _ := load("attention_mask.npy")
	thw, thwShape := load("image_grid_thw.npy")
	want, wantShape := load("position_ids.npy")
	require.Equal(t, []int{3, 1, len(ids)}, wantShape)
	var grids []Grid
	for i := range thwShape[0] {
		grids = append(grids, Grid{int(thw[3*i]), int(thw[3*i+1]), int(thw[3*i+2])})
	}
	got, _, err := PositionIDs(ids, mask, grids, DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// TestLeftPadding: padded positions are 1 and the valid tokens get the
// positions they would have unpadded (upstream pads on the left).
func TestLeftPadding(t *testing.T) {
	ids := droidIDs(3)
	ref, refDelta, err := PositionIDs(ids, nil, droidGrids, DefaultConfig())
	require.NoError(t, err)
	const P = 5
	padded := append(make([]int64, P), ids...)
	for i := range P {
		padded[i] = 151643
	}
	mask := make([]int64, len(padded))
	for i := P; i < len(mask); i++ {
		mask[i] = 1
	}
	got, delta, err := PositionIDs(padded, mask, droidGrids, DefaultConfig())
	require.NoError(t, err)
	S, n := len(padded), len(ids)
	for row := range 3 {
		for i := range P {
			require.Equal(t, int64(1), got[row*S+i])
		}
		require.Equal(t, ref[row*n:(row+1)*n], got[row*S+P:(row+1)*S])
	}
	require.Equal(t, refDelta-P, delta)
}

func TestTextOnly(t *testing.T) {
	ids := []int64{imStart, user, nl, 5, 6, imEnd}
	mask := []int64{0, 1, 1, 1, 1, 1}
	got, delta, err := PositionIDs(ids, mask, nil, DefaultConfig())
	require.NoError(t, err)
	// Upstream text-only branch: cumsum(mask) − 1, pads 1.
	want := []int64{1, 0, 1, 2, 3, 4}
	require.Equal(t, append(append(append([]int64{}, want...), want...), want...), got)
	require.Equal(t, int64(5-6), delta)
}

func TestOddGridUsesMax(t *testing.T) {
	// A tall image: h > w, next text continues from base + max(h, w).
	ids := []int64{vStart}
	for range 3 * 2 {
		ids = append(ids, pad)
	}
	ids = append(ids, vEnd)
	got, _, err := PositionIDs(ids, nil, []Grid{{1, 6, 4}}, DefaultConfig())
	require.NoError(t, err)
	S := len(ids)
	require.Equal(t, [3]int64{1, 3, 2}, [3]int64{got[6], got[S+6], got[2*S+6]}) // last pad: r=2, c=1
	require.Equal(t, int64(4), got[7])                                          // base 1 + max(3, 2)
}

func TestMismatch(t *testing.T) {
	ids := droidIDs(2)
	for name, c := range map[string]struct {
		ids   []int64
		mask  []int64
		grids []Grid
	}{
		"too few grids":  {ids, nil, droidGrids[:3]},
		"too many grids": {ids, nil, append(append([]Grid{}, droidGrids...), Grid{1, 16, 28})},
		"grid too big":   {ids, nil, []Grid{{1, 16, 30}, {1, 16, 28}, {1, 16, 28}, {1, 16, 28}}},
		"grid too small": {ids, nil, []Grid{{1, 16, 26}, {1, 16, 28}, {1, 16, 28}, {1, 16, 28}}},
		"odd grid":       {ids, nil, []Grid{{1, 15, 28}, {1, 16, 28}, {1, 16, 28}, {1, 16, 28}}},
		"stray pad":      {[]int64{1, pad, 2}, nil, nil},
		"past end":       {[]int64{vStart, pad, pad}, nil, []Grid{{1, 4, 4}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := PositionIDs(c.ids, c.mask, c.grids, DefaultConfig())
			require.True(t, errors.Is(err, ErrMismatch), "%v", err)
		})
	}
	_, _, err := PositionIDs(ids, []int64{1}, droidGrids, DefaultConfig())
	require.Error(t, err)
	_, _, err = PositionIDs(ids, nil, droidGrids, Config{ImageTokenID: pad, VisionStartTokenID: vStart})
	require.Error(t, err)
}

func FuzzPositionIDs(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2}, uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, toks []byte, h, w uint8) {
		ids := make([]int64, len(toks))
		for i, b := range toks {
			switch b % 4 {
			case 0:
				ids[i] = vStart
			case 1:
				ids[i] = pad
			default:
				ids[i] = int64(b)
			}
		}
		_, _, _ = PositionIDs(ids, nil, []Grid{{1, int(h%8) * 2, int(w%8) * 2}}, DefaultConfig())
	})
}

func BenchmarkPositionIDsDROID(b *testing.B) {
	ids := droidIDs(8)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := PositionIDs(ids, nil, droidGrids, DefaultConfig()); err != nil {
			b.Fatal(err)
		}
	}
}
