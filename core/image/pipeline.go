package image

import (
	"fmt"
	"sync"
)

// Workspace runs the chain on one frame at a time and owns every
// intermediate buffer, so that repeated calls with the same frame sizes
// allocate nothing. Frames returned by its methods alias workspace memory
// and stay valid until the next call. A Workspace must not be used by two
// goroutines at once; use one per goroutine or a Pipeline.
type Workspace struct {
	cfg ChainConfig
	lut *NormLUT
	// One resizer per chain step, so each keeps its tables for its sizes.
	area1, area2 AreaResizer
	bic          BicubicResizer

	lbox, r1, crop, eval, resized RGB
}

// NewWorkspace returns a workspace for cfg (which is validated and copied).
func NewWorkspace(cfg ChainConfig) (*Workspace, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Workspace{cfg: cfg, lut: NewNormLUT(&cfg)}, nil
}

// Config returns the workspace's configuration.
func (ws *Workspace) Config() ChainConfig { return ws.cfg }

// resizeArea resizes src into dst (sized w×h) with INTER_AREA; albumentations
// returns the input unchanged when the size already matches, so do we.
func (ws *Workspace) resizeArea(r *AreaResizer, dst *RGB, src *RGB, w, h int) (*RGB, error) {
	if w == src.W && h == src.H {
		return src, nil
	}
	dst.setSize(w, h)
	if err := r.ResizeArea(dst.Pix, w, h, src.Pix, src.W, src.H, 3); err != nil {
		return nil, err
	}
	return dst, nil
}

// Eval runs the GR00T eval transform on src: [LetterBoxPad] →
// SmallestMaxSize (or Resize) → FractionalCenterCrop → SmallestMaxSize (or
// Resize), all resizes OpenCV INTER_AREA. The result is frames_eval; it may
// alias src or workspace memory.
func (ws *Workspace) Eval(src *RGB) (*RGB, error) {
	if src.W < 1 || src.H < 1 || len(src.Pix) != src.W*src.H*3 {
		return nil, fmt.Errorf("image: eval: frame %dx%d has %d bytes", src.W, src.H, len(src.Pix))
	}
	sz, err := ws.cfg.Sizes(src.W, src.H)
	if err != nil {
		return nil, err
	}
	cur := src
	if ws.cfg.LetterBox && (src.W != src.H) {
		side, x0, y0 := LetterBoxDims(src.W, src.H)
		ws.lbox.setSize(side, side)
		clear(ws.lbox.Pix)
		for y := 0; y < src.H; y++ {
			copy(ws.lbox.Pix[((y0+y)*side+x0)*3:], src.Pix[y*src.W*3:(y+1)*src.W*3])
		}
		cur = &ws.lbox
	}
	if cur, err = ws.resizeArea(&ws.area1, &ws.r1, cur, sz.Resize1.W, sz.Resize1.H); err != nil {
		return nil, err
	}
	if sz.Crop == sz.Resize1 {
		return ws.resizeArea(&ws.area2, &ws.eval, cur, sz.Eval.W, sz.Eval.H)
	}
	if sz.Eval != sz.Crop {
		// The second resize reads the crop as a view into cur (rows
		// cur.W·3 bytes apart): no copy.
		ws.eval.setSize(sz.Eval.W, sz.Eval.H)
		view := cur.Pix[(sz.CropY*cur.W+sz.CropX)*3:]
		if err := ws.area2.resizeArea(ws.eval.Pix, sz.Eval.W, sz.Eval.H, view, cur.W*3, sz.Crop.W, sz.Crop.H, 3); err != nil {
			return nil, err
		}
		return &ws.eval, nil
	}
	ws.crop.setSize(sz.Crop.W, sz.Crop.H)
	for y := 0; y < sz.Crop.H; y++ {
		s := cur.Pix[((sz.CropY+y)*cur.W+sz.CropX)*3:]
		copy(ws.crop.Pix[y*sz.Crop.W*3:(y+1)*sz.Crop.W*3], s)
	}
	return &ws.crop, nil
}

// QwenResize applies smart_resize and torch's uint8 antialiased bicubic to
// an eval frame (frames_resized). Unchanged sizes return src itself.
func (ws *Workspace) QwenResize(src *RGB) (*RGB, error) {
	h, w, err := SmartResize(src.H, src.W, ws.cfg.Factor(), ws.cfg.MinPixels, ws.cfg.MaxPixels)
	if err != nil {
		return nil, err
	}
	if w == src.W && h == src.H {
		return src, nil
	}
	ws.resized.setSize(w, h)
	if err := ws.bic.ResizeBicubic(BicubicTorch, ws.resized.Pix, w, h, src.Pix, src.W, src.H, 3); err != nil {
		return nil, err
	}
	return &ws.resized, nil
}

// Encode runs the whole chain on src (Eval, QwenResize, Patchify) and
// writes the frame's pixel_values rows into dst, which must have exactly
// RowsFor(src.W, src.H)·RowWidth() elements. It returns image_grid_thw.
func (ws *Workspace) Encode(src *RGB, dst []float32) (Grid, error) {
	ev, err := ws.Eval(src)
	if err != nil {
		return Grid{}, err
	}
	rs, err := ws.QwenResize(ev)
	if err != nil {
		return Grid{}, err
	}
	return ws.cfg.Patchify(dst, rs, ws.lut)
}

// RowsFor returns the pixel_values rows a w×h input frame produces after
// the whole chain, or an error when the chain cannot run on it.
func (c *ChainConfig) RowsFor(w, h int) (int, error) {
	s, err := c.Sizes(w, h)
	if err != nil {
		return 0, err
	}
	return s.Grid.Rows(), nil
}

// Pipeline is a concurrency-safe front for Workspaces: each call borrows a
// Workspace from an internal pool, so steady-state calls allocate nothing
// and any number of frames may be encoded in parallel.
type Pipeline struct {
	cfg  ChainConfig
	pool sync.Pool
}

// NewPipeline validates cfg and returns a Pipeline for it.
func NewPipeline(cfg ChainConfig) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg}
	lut := NewNormLUT(&cfg)
	p.pool.New = func() any { return &Workspace{cfg: cfg, lut: lut} }
	return p, nil
}

// Config returns the pipeline's configuration.
func (p *Pipeline) Config() ChainConfig { return p.cfg }

// Encode is Workspace.Encode on a pooled workspace; safe for concurrent use.
func (p *Pipeline) Encode(src *RGB, dst []float32) (Grid, error) {
	ws := p.pool.Get().(*Workspace)
	defer p.pool.Put(ws)
	return ws.Encode(src, dst)
}

// EncodeFrames encodes frames in order into consecutive rows of dst (which
// must hold exactly the sum of their rows·RowWidth), running up to
// parallel frames at once (≤ 1 means sequentially), and fills grids
// (len(grids) == len(frames)). Errors name the frame index only; wrap them
// into FrameError at the caller, which knows the camera names.
func (p *Pipeline) EncodeFrames(frames []*RGB, dst []float32, grids []Grid, parallel int) error {
	if len(grids) != len(frames) {
		return fmt.Errorf("image: encode: %d grids for %d frames", len(grids), len(frames))
	}
	rw := p.cfg.RowWidth()
	offs := make([]int, len(frames)+1)
	for i, f := range frames {
		n, err := p.cfg.RowsFor(f.W, f.H)
		if err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
		offs[i+1] = offs[i] + n*rw
	}
	if offs[len(frames)] != len(dst) {
		return fmt.Errorf("image: encode: dst holds %d values, frames need %d", len(dst), offs[len(frames)])
	}
	if parallel <= 1 || len(frames) < 2 {
		for i, f := range frames {
			g, err := p.Encode(f, dst[offs[i]:offs[i+1]])
			if err != nil {
				return fmt.Errorf("frame %d: %w", i, err)
			}
			grids[i] = g
		}
		return nil
	}
	errs := make([]error, len(frames))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, f := range frames {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			grids[i], errs[i] = p.Encode(f, dst[offs[i]:offs[i+1]])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
	}
	return nil
}
