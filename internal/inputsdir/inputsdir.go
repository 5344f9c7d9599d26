// Package inputsdir reads encoded model inputs from a directory of .npy
// files laid out like testdata/n17-tiny/caseA (pixel_values,
// image_grid_thw, input_ids, attention_mask, position_ids, and optionally
// state_normalized and noise): the one reader of that layout for
// `gr00tgw run` and tools/benchmodel.
package inputsdir

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/device"
)

// Read fills in's pixel_values (with PixelRows/PixelCols), ImageGridTHW,
// InputIDs, AttentionMask and PositionIDs from dir, and State and Noise
// when state_normalized.npy and noise.npy exist (left as they are when
// absent). Integer arrays must fit int32; image_grid_thw must be [n, 3].
// Errors name the file.
func Read(in *device.Inputs, dir string) error {
	rd := func(name string) (*npy.Array, error) { return npy.ReadFile(filepath.Join(dir, name+".npy")) }
	pa, err := rd("pixel_values")
	if err != nil {
		return err
	}
	if len(pa.Shape) != 2 {
		return fmt.Errorf("pixel_values: shape %v, want [rows, cols]", pa.Shape)
	}
	if in.PixelValues, err = pa.Float32s(); err != nil {
		return fmt.Errorf("pixel_values: %w", err)
	}
	in.PixelRows, in.PixelCols = pa.Shape[0], pa.Shape[1]
	ints := func(name string) ([]int32, error) {
		a, err := rd(name)
		if err != nil {
			return nil, err
		}
		v, err := a.Int64s()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out := make([]int32, len(v))
		for i, x := range v {
			if x < math.MinInt32 || x > math.MaxInt32 {
				return nil, fmt.Errorf("%s[%d] = %d overflows int32", name, i, x)
			}
			out[i] = int32(x)
		}
		return out, nil
	}
	g, err := ints("image_grid_thw")
	if err != nil {
		return err
	}
	if len(g)%3 != 0 {
		return fmt.Errorf("image_grid_thw: %d values, want [n, 3]", len(g))
	}
	in.ImageGridTHW = in.ImageGridTHW[:0]
	for i := 0; i < len(g); i += 3 {
		in.ImageGridTHW = append(in.ImageGridTHW, [3]int{int(g[i]), int(g[i+1]), int(g[i+2])})
	}
	if in.InputIDs, err = ints("input_ids"); err != nil {
		return err
	}
	if in.AttentionMask, err = ints("attention_mask"); err != nil {
		return err
	}
	if in.PositionIDs, err = ints("position_ids"); err != nil {
		return err
	}
	for name, dst := range map[string]*[]float32{"state_normalized": &in.State, "noise": &in.Noise} {
		v, err := ReadFloat32s(filepath.Join(dir, name+".npy"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*dst = v
	}
	return nil
}

// ReadFloat32s reads a float32 or float64 .npy file as float32 values
// (float64 rounded to nearest).
func ReadFloat32s(path string) ([]float32, error) {
	a, err := npy.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if a.DType == npy.Float64 {
		v, err := a.Float64s()
		if err != nil {
			return nil, err
		}
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out, nil
	}
	return a.Float32s()
}
