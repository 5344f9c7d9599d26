package image

import (
	"fmt"
	"math"
)

// AspectRule decides which frame sizes a camera layout accepts: a frame is
// accepted when its sides are within Limits and the chain (ChainConfig.Sizes:
// letterbox, SmallestMaxSize, crop, SmallestMaxSize, smart_resize) lands
// exactly on the layout's patch grid. The decision is exact, made from the
// chain's own integer arithmetic; the width/height band is only reported in
// error messages. An AspectRule is immutable and safe for concurrent use.
type AspectRule struct {
	cfg          ChainConfig
	gridH, gridW int
	lim          Limits
	lo, hi       float64 // min/max accepted width/height over all sizes
	any          bool    // at least one size is accepted
}

// NewAspectRule builds the rule for cfg and the expected grid (in patches,
// e.g. 16×28 for DROID without letterbox). It computes the accepted
// width/height band by walking every height in lim and, per height, the
// contiguous range of accepted widths (the chain's output width is
// non-decreasing in the input width for a fixed height).
func NewAspectRule(cfg ChainConfig, gridH, gridW int, lim Limits) (*AspectRule, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if gridH < 1 || gridW < 1 {
		return nil, fmt.Errorf("%w: grid %dx%d", ErrConfig, gridH, gridW)
	}
	if lim.MinSide < 1 || lim.MaxSide < lim.MinSide {
		return nil, fmt.Errorf("%w: limits [%d, %d]", ErrConfig, lim.MinSide, lim.MaxSide)
	}
	r := &AspectRule{cfg: cfg, gridH: gridH, gridW: gridW, lim: lim, lo: math.Inf(1), hi: math.Inf(-1)}
	gw := func(w, h int) int {
		s, err := cfg.Sizes(w, h)
		if err != nil {
			return -1
		}
		return s.Grid.W
	}
	for h := lim.MinSide; h <= lim.MaxSide; h++ {
		// First w whose grid width reaches gridW.
		a, b := lim.MinSide, lim.MaxSide+1
		for a < b {
			m := (a + b) / 2
			if gw(m, h) >= gridW {
				b = m
			} else {
				a = m + 1
			}
		}
		wmin := a
		// First w whose grid width exceeds gridW.
		a, b = wmin, lim.MaxSide+1
		for a < b {
			m := (a + b) / 2
			if gw(m, h) > gridW {
				b = m
			} else {
				a = m + 1
			}
		}
		wmax := a - 1
		// Within [wmin, wmax] the width matches; the height must match too.
		for w := wmin; w <= wmax; w++ {
			if r.Accepts(w, h) {
				r.lo = min(r.lo, float64(w)/float64(h))
				r.any = true
				break
			}
		}
		for w := wmax; w >= wmin; w-- {
			if r.Accepts(w, h) {
				r.hi = max(r.hi, float64(w)/float64(h))
				break
			}
		}
	}
	return r, nil
}

// Grid returns the expected patch grid (height, width).
func (r *AspectRule) Grid() (gridH, gridW int) { return r.gridH, r.gridW }

// Band returns the smallest and largest width/height ratio of any accepted
// size; ok is false when no size within the limits is accepted.
func (r *AspectRule) Band() (lo, hi float64, ok bool) { return r.lo, r.hi, r.any }

// Accepts reports whether a w×h frame passes Check.
func (r *AspectRule) Accepts(w, h int) bool {
	if w < r.lim.MinSide || h < r.lim.MinSide || w > r.lim.MaxSide || h > r.lim.MaxSide {
		return false
	}
	s, err := r.cfg.Sizes(w, h)
	return err == nil && s.Grid.H == r.gridH && s.Grid.W == r.gridW
}

// Check returns nil for an accepted size, an error wrapping ErrFrameSize
// for sides outside the limits, or one wrapping ErrAspect naming the grid
// the frame would produce and the accepted width/height band.
func (r *AspectRule) Check(w, h int) error {
	if err := r.lim.Check(w, h); err != nil {
		return err
	}
	s, err := r.cfg.Sizes(w, h)
	if err != nil {
		return fmt.Errorf("%w: %dx%d: %v", ErrAspect, w, h, err)
	}
	if s.Grid.H == r.gridH && s.Grid.W == r.gridW {
		return nil
	}
	band := "no size is accepted"
	if r.any {
		band = fmt.Sprintf("accepted width/height ratios span [%.3f, %.3f]", r.lo, r.hi)
	}
	return fmt.Errorf("%w: %dx%d (width/height %.3f) maps to a %dx%d patch grid (height x width), the layout needs %dx%d: %s",
		ErrAspect, w, h, float64(w)/float64(h), s.Grid.H, s.Grid.W, r.gridH, r.gridW, band)
}

// DecodeFrame validates and decodes one encoded frame of a request: it reads
// the header (no pixel decoding), checks the side limits and the aspect
// rule, then decodes into dst. Every error is a *FrameError naming
// images.<camera>[<index>] and wrapping ErrUndecodable, ErrFrameSize or
// ErrAspect.
func (r *AspectRule) DecodeFrame(dst *RGB, camera string, index int, data []byte) error {
	_, w, h, err := Config(data)
	if err == nil {
		err = r.Check(w, h)
	}
	if err == nil {
		err = Decode(dst, data, r.lim)
	}
	if err != nil {
		return &FrameError{Camera: camera, Index: index, Err: err}
	}
	return nil
}

// DecodeFrameBase64 is DecodeFrame for a base64 string (standard alphabet,
// optional "data:image/<type>;base64," prefix). scratch is reused for the
// decoded bytes and returned, possibly grown.
func (r *AspectRule) DecodeFrameBase64(dst *RGB, camera string, index int, s string, scratch []byte) ([]byte, error) {
	raw, scratch, err := decodeBase64(s, scratch)
	if err != nil {
		return scratch, &FrameError{Camera: camera, Index: index, Err: err}
	}
	return scratch, r.DecodeFrame(dst, camera, index, raw)
}
