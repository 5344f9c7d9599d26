package image

import (
	"errors"
	"fmt"
	"math"
)

// ChainConfig holds every parameter of the GR00T N1.7 eval image chain and
// the Qwen3-VL image processor that follows it. It is plain data: fill it
// from the checkpoint's processor_config.json (GR00T keys noted per field)
// and the backbone's preprocessor_config.json (Qwen keys), or start from
// DefaultDROIDChain. A ChainConfig is read-only once handed to a Pipeline.
type ChainConfig struct {
	// LetterBox pads each frame with zeros to a square before anything else
	// (GR00T letter_box_transform). Top/left padding is pad//2.
	LetterBox bool
	// ShortestEdge is albumentations SmallestMaxSize's max_size
	// (GR00T shortest_image_edge). 0 selects the fixed-size recipe:
	// Resize(TargetH, TargetW) → crop → Resize(TargetH, TargetW).
	ShortestEdge int
	// CropFraction is GR00T FractionalCenterCrop's fraction (crop_fraction).
	// When the checkpoint leaves it null, set it to
	// image_crop_size[0] / image_target_size[0] as upstream does.
	CropFraction float64
	// TargetH, TargetW are image_target_size, used only when ShortestEdge
	// is 0.
	TargetH, TargetW int

	// PatchSize is the ViT patch side (Qwen patch_size, 16).
	PatchSize int
	// TemporalPatchSize is the number of frames per patch (2); a single
	// image is repeated to fill it.
	TemporalPatchSize int
	// MergeSize is the spatial merge factor (2): grids must be multiples.
	MergeSize int
	// MinPixels, MaxPixels bound smart_resize's pixel count (Qwen
	// size.shortest_edge / size.longest_edge; they are pixel counts).
	MinPixels, MaxPixels int
	// Mean, Std are image_mean / image_std per RGB channel (0.5 each).
	Mean, Std [3]float32
	// RescaleFactor is rescale_factor (1/255). Normalisation uses the fast
	// processor's fused form (x − Mean/RescaleFactor) / (Std/RescaleFactor)
	// in float32.
	RescaleFactor float64
}

// DefaultDROIDChain returns the release N1.7 DROID configuration: no
// letterbox, SmallestMaxSize 256, crop 0.95, Qwen3-VL patch 16, temporal
// patch 2, merge 2, min 65 536 / max 16 777 216 pixels, mean = std = 0.5,
// rescale 1/255.
func DefaultDROIDChain() ChainConfig {
	return ChainConfig{
		ShortestEdge:      256,
		CropFraction:      0.95,
		TargetH:           256,
		TargetW:           256,
		PatchSize:         16,
		TemporalPatchSize: 2,
		MergeSize:         2,
		MinPixels:         65536,
		MaxPixels:         16777216,
		Mean:              [3]float32{0.5, 0.5, 0.5},
		Std:               [3]float32{0.5, 0.5, 0.5},
		RescaleFactor:     1.0 / 255,
	}
}

// ErrConfig is wrapped by errors about an unusable ChainConfig.
var ErrConfig = errors.New("image: invalid chain config")

// Validate checks that the configuration can run.
func (c *ChainConfig) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(f, a...)) }
	switch {
	case c.ShortestEdge < 0:
		return bad("shortest_edge %d is negative", c.ShortestEdge)
	case c.ShortestEdge == 0 && (c.TargetH < 1 || c.TargetW < 1):
		return bad("shortest_edge is 0 and image_target_size %dx%d is not positive", c.TargetH, c.TargetW)
	case !(c.CropFraction > 0 && c.CropFraction <= 1):
		return bad("crop_fraction %v not in (0, 1]", c.CropFraction)
	case c.PatchSize < 1 || c.TemporalPatchSize < 1 || c.MergeSize < 1:
		return bad("patch_size %d, temporal_patch_size %d, merge_size %d must be positive", c.PatchSize, c.TemporalPatchSize, c.MergeSize)
	case c.MinPixels < 0 || c.MaxPixels < c.MinPixels:
		return bad("min_pixels %d / max_pixels %d", c.MinPixels, c.MaxPixels)
	case !(c.RescaleFactor > 0):
		return bad("rescale_factor %v must be positive", c.RescaleFactor)
	}
	for i, s := range c.Std {
		if !(s != 0) {
			return bad("image_std[%d] is %v", i, s)
		}
	}
	return nil
}

// Factor is smart_resize's factor, PatchSize·MergeSize (32).
func (c *ChainConfig) Factor() int { return c.PatchSize * c.MergeSize }

// RowWidth is the pixel_values row width, 3·TemporalPatchSize·PatchSize²
// (1536).
func (c *ChainConfig) RowWidth() int { return 3 * c.TemporalPatchSize * c.PatchSize * c.PatchSize }

// SmallestMaxSizeDims returns albumentations SmallestMaxSize's output size
// (w, h) for a w×h input: scale = maxSize / float(min(h, w)); unless scale
// is 1, each side is Python round(side·scale) (half to even on the double
// product). When the result equals the input the transform is a no-op.
func SmallestMaxSizeDims(w, h, maxSize int) (int, int) {
	scale := float64(maxSize) / float64(min(w, h))
	if scale == 1 {
		return w, h
	}
	return int(math.RoundToEven(float64(w) * scale)), int(math.RoundToEven(float64(h) * scale))
}

// CenterCropRect returns GR00T FractionalCenterCrop's rectangle for a w×h
// input: cw = max(1, trunc(w·f)), ch = max(1, trunc(h·f)), x0 = (w−cw)//2,
// y0 = (h−ch)//2.
func CenterCropRect(w, h int, f float64) (x0, y0, cw, ch int) {
	cw = max(1, int(float64(w)*f))
	ch = max(1, int(float64(h)*f))
	return (w - cw) / 2, (h - ch) / 2, cw, ch
}

// LetterBoxDims returns the padded square side and the top-left offset of
// the original frame inside it (LetterBoxPad: pad//2 before, the rest after).
func LetterBoxDims(w, h int) (side, x0, y0 int) {
	side = max(w, h)
	return side, (side - w) / 2, (side - h) / 2
}

// ErrSmartResize is wrapped by smart_resize's errors (aspect ratio > 200,
// non-positive sides).
var ErrSmartResize = errors.New("image: smart_resize")

// SmartResize is Qwen2-VL's smart_resize(h, w, factor, min_pixels,
// max_pixels) with Python semantics (round half to even, float64 sqrt,
// floor, ceil). It returns the target height and width.
func SmartResize(h, w, factor, minPixels, maxPixels int) (int, int, error) {
	if h < 1 || w < 1 || factor < 1 {
		return 0, 0, fmt.Errorf("%w: size %dx%d, factor %d", ErrSmartResize, h, w, factor)
	}
	if float64(max(h, w))/float64(min(h, w)) > 200 {
		return 0, 0, fmt.Errorf("%w: absolute aspect ratio must be smaller than 200, got %v", ErrSmartResize, float64(max(h, w))/float64(min(h, w)))
	}
	fh, fw, ff := float64(h), float64(w), float64(factor)
	hb := int(math.RoundToEven(fh/ff)) * factor
	wb := int(math.RoundToEven(fw/ff)) * factor
	if hb*wb > maxPixels {
		beta := math.Sqrt(fh * fw / float64(maxPixels))
		hb = max(factor, int(math.Floor(fh/beta/ff))*factor)
		wb = max(factor, int(math.Floor(fw/beta/ff))*factor)
	} else if hb*wb < minPixels {
		beta := math.Sqrt(float64(minPixels) / (fh * fw))
		hb = int(math.Ceil(fh*beta/ff)) * factor
		wb = int(math.Ceil(fw*beta/ff)) * factor
	}
	return hb, wb, nil
}

// Size is a width and height in pixels.
type Size struct{ W, H int }

// Grid is image_grid_thw: temporal, height and width in patches.
type Grid struct{ T, H, W int }

// Tokens returns the number of merged LLM tokens of the grid:
// T·H·W / merge².
func (g Grid) Tokens(merge int) int { return g.T * g.H * g.W / (merge * merge) }

// Rows returns the number of pixel_values rows, T·H·W.
func (g Grid) Rows() int { return g.T * g.H * g.W }

// ChainSizes lists the size after every stage of the chain for one input.
type ChainSizes struct {
	Input     Size
	LetterBox Size // equals Input when LetterBox is off
	Resize1   Size // SmallestMaxSize (or Resize to target)
	CropX     int  // crop offset inside Resize1
	CropY     int
	Crop      Size
	Eval      Size // after the second resize: frames_eval
	Resized   Size // after smart_resize: frames_resized
	Grid      Grid // image_grid_thw
}

// Sizes computes every stage size of the chain for a w×h frame without
// touching pixels.
func (c *ChainConfig) Sizes(w, h int) (ChainSizes, error) {
	var s ChainSizes
	if w < 1 || h < 1 {
		return s, fmt.Errorf("image: chain: size %dx%d must be positive", w, h)
	}
	s.Input = Size{w, h}
	s.LetterBox = s.Input
	if c.LetterBox {
		side, _, _ := LetterBoxDims(w, h)
		s.LetterBox = Size{side, side}
	}
	resize := func(in Size) Size {
		if c.ShortestEdge == 0 {
			return Size{c.TargetW, c.TargetH}
		}
		rw, rh := SmallestMaxSizeDims(in.W, in.H, c.ShortestEdge)
		return Size{rw, rh}
	}
	s.Resize1 = resize(s.LetterBox)
	if s.Resize1.W < 1 || s.Resize1.H < 1 {
		return s, fmt.Errorf("image: chain: size %dx%d resizes to %dx%d", w, h, s.Resize1.W, s.Resize1.H)
	}
	x0, y0, cw, ch := CenterCropRect(s.Resize1.W, s.Resize1.H, c.CropFraction)
	s.CropX, s.CropY, s.Crop = x0, y0, Size{cw, ch}
	s.Eval = resize(s.Crop)
	if s.Eval.W < 1 || s.Eval.H < 1 {
		return s, fmt.Errorf("image: chain: size %dx%d resizes to %dx%d", w, h, s.Eval.W, s.Eval.H)
	}
	rh, rw, err := SmartResize(s.Eval.H, s.Eval.W, c.Factor(), c.MinPixels, c.MaxPixels)
	if err != nil {
		return s, err
	}
	s.Resized = Size{rw, rh}
	s.Grid = Grid{1, rh / c.PatchSize, rw / c.PatchSize}
	return s, nil
}
