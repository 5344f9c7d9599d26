package image

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/stretchr/testify/require"
)

const caseADir = "../../testdata/n17-tiny/caseA"

func caseAFrames(t testing.TB) []*RGB {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(caseADir, "frame_*.png"))
	require.NoError(t, err)
	require.Len(t, names, 4)
	sort.Strings(names)
	var out []*RGB
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		f := new(RGB)
		require.NoError(t, Decode(f, b, DefaultLimits), n)
		out = append(out, f)
	}
	return out
}

func loadU8(t testing.TB, name string) ([]uint8, []int) {
	t.Helper()
	a, err := npy.ReadFile(filepath.Join(caseADir, name))
	require.NoError(t, err)
	v, err := a.Uint8s()
	require.NoError(t, err)
	return v, a.Shape
}

// TestCaseA runs the four case-A PNGs through the chain and compares every
// host-preprocessing golden: frames_raw (decode), frames_eval (OpenCV
// chain), frames_resized (torch uint8 bicubic), pixel_values and
// image_grid_thw — all exact.
func TestCaseA(t *testing.T) {
	frames := caseAFrames(t)
	raw, shape := loadU8(t, "frames_raw.npy")
	require.Equal(t, []int{4, 180, 320, 3}, shape)
	eval, shape := loadU8(t, "frames_eval.npy")
	require.Equal(t, []int{4, 256, 455, 3}, shape)
	resized, shape := loadU8(t, "frames_resized.npy")
	require.Equal(t, []int{4, 256, 448, 3}, shape)

	ws, err := NewWorkspace(DefaultDROIDChain())
	require.NoError(t, err)
	for i, f := range frames {
		n := 180 * 320 * 3
		require.Equal(t, raw[i*n:(i+1)*n], f.Pix, "frames_raw[%d]", i)
		ev, err := ws.Eval(f)
		require.NoError(t, err)
		n = 256 * 455 * 3
		require.Equal(t, 455, ev.W)
		require.Equal(t, 256, ev.H)
		require.Equal(t, eval[i*n:(i+1)*n], ev.Pix, "frames_eval[%d]", i)
		rs, err := ws.QwenResize(ev)
		require.NoError(t, err)
		n = 256 * 448 * 3
		require.Equal(t, 448, rs.W)
		diff := 0
		for j, v := range rs.Pix {
			if v != resized[i*n+j] {
				diff++
			}
		}
		require.Zero(t, diff, "frames_resized[%d]: %d of %d bytes differ", i, diff, n)
	}

	a, err := npy.ReadFile(filepath.Join(caseADir, "pixel_values.npy"))
	require.NoError(t, err)
	want, err := a.Float32s()
	require.NoError(t, err)
	require.Equal(t, []int{1792, 1536}, a.Shape)
	p, err := NewPipeline(DefaultDROIDChain())
	require.NoError(t, err)
	got := make([]float32, len(want))
	grids := make([]Grid, 4)
	require.NoError(t, p.EncodeFrames(frames, got, grids, 4))
	diff := 0
	for i := range want {
		if got[i] != want[i] {
			diff++
		}
	}
	require.Zero(t, diff, "pixel_values: %d of %d values differ", diff, len(want))

	g, err := npy.ReadFile(filepath.Join(caseADir, "image_grid_thw.npy"))
	require.NoError(t, err)
	thw, err := g.Int64s()
	require.NoError(t, err)
	for i, gr := range grids {
		require.Equal(t, []int64{int64(gr.T), int64(gr.H), int64(gr.W)}, thw[3*i:3*i+3])
	}
}
