package inputsdir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/device"
)

const caseA = "../../testdata/n17-tiny/caseA"

func TestReadCaseA(t *testing.T) {
	var in device.Inputs
	require.NoError(t, Read(&in, caseA))
	assert.Equal(t, in.PixelRows*in.PixelCols, len(in.PixelValues))
	assert.Equal(t, 1536, in.PixelCols)
	require.NotEmpty(t, in.ImageGridTHW)
	patches := 0
	for _, g := range in.ImageGridTHW {
		patches += g[0] * g[1] * g[2]
	}
	assert.Equal(t, in.PixelRows, patches, "image_grid_thw covers pixel_values")
	assert.Len(t, in.AttentionMask, len(in.InputIDs))
	assert.Len(t, in.PositionIDs, 3*len(in.InputIDs))
	assert.Len(t, in.State, 132)
	assert.NotEmpty(t, in.Noise)
}

// Missing required files fail naming the file; missing optional ones
// leave State and Noise as they were.
func TestReadMissing(t *testing.T) {
	dir := t.TempDir()
	var in device.Inputs
	err := Read(&in, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pixel_values")

	for _, name := range []string{"pixel_values", "image_grid_thw", "input_ids", "attention_mask", "position_ids"} {
		b, err := os.ReadFile(filepath.Join(caseA, name+".npy"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".npy"), b, 0o644))
	}
	keep := []float32{1, 2}
	in = device.Inputs{State: keep}
	require.NoError(t, Read(&in, dir))
	assert.Equal(t, keep, in.State, "absent state_normalized.npy leaves State")
	assert.Nil(t, in.Noise)

	// A grid that is not [n, 3] is refused, naming it.
	require.NoError(t, npy.WriteFile(filepath.Join(dir, "image_grid_thw.npy"), []int{4}, []int64{1, 16, 28, 1}))
	err = Read(&in, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "image_grid_thw")
	// So is a value that overflows int32.
	require.NoError(t, npy.WriteFile(filepath.Join(dir, "image_grid_thw.npy"), []int{1, 3}, []int64{1, 1 << 40, 28}))
	err = Read(&in, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "overflows int32")
}
