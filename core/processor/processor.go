// Package processor composes GR00T N1.7's host-side input pipeline for one
// observation: frame decoding, the image eval chain and Qwen patch
// flattening (core/image), the prompt and its tokens (core/text) and the
// mRoPE position ids (core/rope), in the order and layout upstream's
// Gr00tN1d7Processor (gr00t/model/gr00t_n1d7/processing_gr00t_n1d7.py) +
// transformers' Qwen3VLProcessor produce them.
package processor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gr00tgw/gr00tgw/internal/freelist"

	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/rope"
	"github.com/gr00tgw/gr00tgw/core/text"
)

// Observation errors callers branch on (HTTP 400); they are wrapped in an
// *image.FrameError naming the camera.
var (
	// ErrMissingCamera: a camera of the embodiment is absent.
	ErrMissingCamera = errors.New("camera missing")
	// ErrUnknownCamera: a camera the embodiment does not use was sent.
	ErrUnknownCamera = errors.New("camera not used by this embodiment")
	// ErrFrameCount: a camera sent a number of frames other than
	// len(VideoDeltaIndices).
	ErrFrameCount = errors.New("wrong number of frames")
)

// Observation is one request's camera frames and instruction.
type Observation struct {
	// Images maps camera key → encoded frames oldest first, each a base64
	// PNG/JPEG (optionally a data:image/...;base64, URL) as /predict sends
	// them. Used when Frames is nil.
	Images map[string][]string
	// Frames maps camera key → decoded frames oldest first. When set,
	// Images is ignored. The processor only reads them.
	Frames map[string][]*image.RGB
	// Instruction is the raw task text (formalised by the processor when
	// the config says so).
	Instruction string
}

// Options tunes one Process call. The zero value is the serving default.
type Options struct {
	// KeepFrames copies frames_eval and frames_resized into Inputs (debug
	// and golden tooling; costs two frame copies per image).
	KeepFrames bool
	// PixelValues, when its capacity suffices, becomes the backing store of
	// Inputs.PixelValues (every element is overwritten), sparing the
	// 11 MB allocation and clearing per DROID call. The caller must not use
	// it for anything else until it is done with the Inputs.
	PixelValues []float32
}

// Timings are wall-clock durations of the stages of one Process call.
// Frames are decoded and resized in parallel, so Decode and Images are the
// slowest frame's (Images plus the patchify pass over all frames).
type Timings struct {
	Decode   time.Duration // base64 + PNG/JPEG decoding
	Images   time.Duration // eval chain + smart_resize, then patchify
	Tokenize time.Duration // formalisation + prompt tokens
	Rope     time.Duration // mRoPE position ids
	Total    time.Duration
}

// Inputs are the model inputs of one observation (batch 1, no padding).
// All slices are owned by the caller; they are freshly allocated except
// PixelValues, which aliases Options.PixelValues when that was large enough.
type Inputs struct {
	// PixelValues is [Rows, RowWidth] float32 row-major: the images'
	// patches in model order (time-major, then camera).
	PixelValues    []float32
	Rows, RowWidth int
	// ImageGridTHW is [NumImages] image_grid_thw rows.
	ImageGridTHW []image.Grid
	// InputIDs and AttentionMask are [S]; AttentionMask is all ones.
	InputIDs, AttentionMask []int64
	// PositionIDs is [3, S] (rows t, h, w), RopeDelta upstream's
	// mrope_position_deltas.
	PositionIDs []int64
	RopeDelta   int64
	// SeqLen is S; TextTokens is n_text (instruction tokens); ImageTokens
	// the number of <|image_pad|> tokens.
	SeqLen, TextTokens, ImageTokens int
	// Instruction is the text that was tokenized (after formalisation).
	Instruction string
	// FrameOrder names the images in model order ("camera[t]" with t the
	// video delta index).
	FrameOrder []string
	// EvalFrames and ResizedFrames are frames_eval and frames_resized in
	// model order, only with Options.KeepFrames.
	EvalFrames, ResizedFrames []*image.RGB
	Timings                   Timings
}

// Processor turns observations into model inputs. It is immutable and safe
// for concurrent use; per-frame scratch memory comes from an internal pool.
type Processor struct {
	cfg      Config
	tok      *text.Tokenizer
	rope     rope.Config
	lut      *image.NormLUT
	ws       freelist.List[*image.Workspace] // per-frame scratch of the chain
	dec      freelist.List[*decBuf]          // decoded frames (base64 input)
	parallel int
	limits   image.Limits
}

// New returns a Processor for cfg (validated and copied) that tokenizes
// with tok. Frames are processed on up to GOMAXPROCS goroutines and must
// have sides within image.DefaultLimits.
func New(cfg Config, tok *text.Tokenizer) (*Processor, error) {
	if tok == nil {
		return nil, fmt.Errorf("%w: nil tokenizer", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Cameras = append([]string(nil), cfg.Cameras...)
	cfg.VideoDeltaIndices = append([]int(nil), cfg.VideoDeltaIndices...)
	p := &Processor{cfg: cfg, tok: tok, rope: rope.DefaultConfig(), parallel: runtime.GOMAXPROCS(0), limits: image.DefaultLimits}
	p.rope.SpatialMergeSize = cfg.Chain.MergeSize
	for _, x := range []struct {
		tok string
		dst *int64
	}{{text.ImagePad, &p.rope.ImageTokenID}, {text.VisionStart, &p.rope.VisionStartTokenID}} {
		id, ok := tok.TokenID(x.tok)
		if !ok {
			return nil, fmt.Errorf("%w: tokenizer has no %s", ErrConfig, x.tok)
		}
		*x.dst = int64(id)
	}
	p.lut = image.NewNormLUT(&p.cfg.Chain)
	// One Workspace per frame job, frames of up to two requests at once.
	p.ws.Max = 2 * len(cfg.Cameras) * cfg.FramesPerCamera()
	p.dec.Max = 4 * len(cfg.Cameras) * cfg.FramesPerCamera()
	return p, nil
}

// Config returns a copy of the processor's configuration.
func (p *Processor) Config() Config { return p.cfg }

// Tokenizer returns the processor's tokenizer.
func (p *Processor) Tokenizer() *text.Tokenizer { return p.tok }

// droidGrid is the served DROID grid; with the DROID chain it is reached by
// landscape frames with width/height in about [1.686, 1.814] (checked by
// scanning heights 64…2000 through ChainConfig.Sizes).
var droidGrid = image.Grid{T: 1, H: 16, W: 28}

const droidAspectHint = " (accepted: landscape frames with width/height in [1.686, 1.814], e.g. 16:9 320x180, 1280x720, 1920x1080)"

// frameJob is one image in model order.
type frameJob struct {
	camera string
	t      int // index into VideoDeltaIndices
	index  int // position in model order
	b64    string
	dec    *decBuf // pooled decode memory behind src (base64 input only)
	src    *image.RGB
	rows   int
	off    int
	grid   image.Grid
	ws     *image.Workspace // pooled; holds resized until Process returns
	// resized is the smart_resized frame (owned by ws); eval and resz are
	// the kept copies of frames_eval and frames_resized (KeepFrames).
	resized, eval, resz *image.RGB
	// Failures of the job, in reporting order, and its stage durations.
	decErr, layoutErr, chainErr error
	decoded, chained            time.Duration
}

// Process runs the host pipeline on obs. Errors about the observation are
// client errors: *image.FrameError (naming "images.<camera>[i]", wrapping
// image.ErrUndecodable, ErrFrameSize, ErrAspect, ErrSizeMismatch or this
// package's ErrMissingCamera, ErrUnknownCamera, ErrFrameCount) or
// *text.InstructionError (field "instruction"). Each frame is decoded,
// checked and run through the eval chain and smart_resize as one job; the
// jobs run concurrently (the calling goroutine and up to GOMAXPROCS−1
// others), then the instruction is tokenized and the frames are patchified
// into pixel_values. When several things are wrong the error reported is
// the first of: an undecodable frame (in model order), frames of one camera
// that differ in size, a frame outside the limits or off the served grid,
// the instruction, a chain failure.
func (p *Processor) Process(obs *Observation, opt Options) (*Inputs, error) {
	t0 := time.Now()
	jobs, err := p.plan(obs)
	if err != nil {
		return nil, err
	}
	in := &Inputs{RowWidth: p.cfg.Chain.RowWidth()}
	defer func() {
		for k := range jobs {
			if jobs[k].dec != nil {
				p.dec.Put(jobs[k].dec)
			}
			if jobs[k].ws != nil {
				p.ws.Put(jobs[k].ws)
			}
		}
	}()

	// Per frame, in parallel: decode, the frame's own checks, eval chain
	// and smart_resize — and, when the served grid is fixed (every frame's
	// pixel_values rows are known in advance), patchify while the resized
	// frame is still in cache.
	var fixed []float32
	if rg := p.cfg.RequireGrid; rg != (image.Grid{}) {
		fixed = p.pixelBuffer(in, len(jobs)*rg.Rows(), opt.PixelValues)
	}
	p.each(jobs, func(j *frameJob) {
		p.frame(j, obs.Frames == nil, opt.KeepFrames)
		if fixed != nil && j.resized != nil && j.chainErr == nil {
			j.off = j.index * j.rows
			p.patchify(j, fixed, in.RowWidth)
		}
	})
	for k := range jobs {
		if jobs[k].decErr != nil {
			return nil, jobs[k].decErr
		}
		in.Timings.Decode = max(in.Timings.Decode, jobs[k].decoded)
	}
	for i, cam := range p.cfg.Cameras {
		frames := make([]*image.RGB, p.cfg.FramesPerCamera())
		for t := range frames {
			frames[t] = jobs[t*len(p.cfg.Cameras)+i].src
		}
		if err := image.CheckSameSize(cam, frames); err != nil {
			return nil, err
		}
	}
	imageTokens := make([]int, len(jobs))
	rows := 0
	for k := range jobs {
		j := &jobs[k]
		if j.layoutErr != nil {
			return nil, j.layoutErr
		}
		j.off = rows
		rows += j.rows
		imageTokens[k] = j.grid.Tokens(p.cfg.Chain.MergeSize)
	}

	ts := time.Now()
	pr, err := p.tok.BuildPrompt(obs.Instruction, imageTokens, text.PromptOptions{
		Formalize: p.cfg.FormalizeLanguage, MaxTextTokens: p.cfg.MaxTextTokens})
	in.Timings.Tokenize = time.Since(ts)
	if err != nil {
		return nil, err
	}
	if err := p.checkSeqLen(pr, jobs); err != nil {
		return nil, err
	}
	for k := range jobs {
		if jobs[k].chainErr != nil {
			return nil, jobs[k].chainErr
		}
	}

	ti := time.Now()
	if fixed == nil {
		p.pixelBuffer(in, rows, opt.PixelValues)
		p.each(jobs, func(j *frameJob) { p.patchify(j, in.PixelValues, in.RowWidth) })
	}
	for k := range jobs {
		if jobs[k].chainErr != nil {
			return nil, jobs[k].chainErr
		}
		in.Timings.Images = max(in.Timings.Images, jobs[k].chained)
	}
	in.Timings.Images += time.Since(ti)

	in.ImageGridTHW = make([]image.Grid, len(jobs))
	grids := make([]rope.Grid, len(jobs))
	in.FrameOrder = make([]string, len(jobs))
	for k := range jobs {
		j := &jobs[k]
		in.ImageGridTHW[k] = j.grid
		grids[k] = rope.Grid{T: j.grid.T, H: j.grid.H, W: j.grid.W}
		in.FrameOrder[k] = j.camera + "[" + strconv.Itoa(p.cfg.VideoDeltaIndices[j.t]) + "]"
		if opt.KeepFrames {
			in.EvalFrames = append(in.EvalFrames, j.eval)
			in.ResizedFrames = append(in.ResizedFrames, j.resz)
		}
	}
	in.InputIDs, in.AttentionMask = pr.InputIDs, pr.AttentionMask
	in.SeqLen, in.TextTokens, in.ImageTokens, in.Instruction = len(pr.InputIDs), len(pr.TextIDs), pr.ImageTokens, pr.Text

	tr0 := time.Now()
	in.PositionIDs, in.RopeDelta, err = rope.PositionIDs(in.InputIDs, in.AttentionMask, grids, p.rope)
	if err != nil {
		return nil, fmt.Errorf("processor: %w", err) // internal: the layout is ours
	}
	in.Timings.Rope = time.Since(tr0)
	in.Timings.Total = time.Since(t0)
	return in, nil
}

// pixelBuffer sizes in.PixelValues for rows rows, on reuse when its
// capacity suffices, and returns it.
func (p *Processor) pixelBuffer(in *Inputs, rows int, reuse []float32) []float32 {
	in.Rows = rows
	if n := rows * in.RowWidth; cap(reuse) >= n {
		in.PixelValues = reuse[:n]
	} else {
		in.PixelValues = make([]float32, n)
	}
	return in.PixelValues
}

// patchify writes job j's pixel_values rows (from j.off) into pv.
func (p *Processor) patchify(j *frameJob, pv []float32, rw int) {
	t0 := time.Now()
	g, err := p.cfg.Chain.Patchify(pv[j.off*rw:(j.off+j.rows)*rw], j.resized, p.lut)
	if err == nil && g != j.grid {
		err = fmt.Errorf("image: grid %v, planned %v", g, j.grid)
	}
	if err != nil {
		j.chainErr = &image.FrameError{Camera: j.camera, Index: j.t, Err: err}
	}
	j.chained += time.Since(t0)
}

// checkSeqLen rejects a prompt longer than MaxSeqLen: as an instruction
// over L_max when the rest of the prompt fits, else as frames that alone
// need more tokens than the backend's sequence holds.
func (p *Processor) checkSeqLen(pr *text.Prompt, jobs []frameJob) error {
	limit := p.cfg.MaxSeqLen
	if limit <= 0 || len(pr.InputIDs) <= limit {
		return nil
	}
	nText := len(pr.TextIDs)
	if lmax := limit - (len(pr.InputIDs) - nText); lmax > 0 {
		return &text.InstructionError{Field: "instruction", NText: nText, LMax: lmax, Err: text.ErrInstructionTooLong}
	}
	j := &jobs[0]
	return &image.FrameError{Camera: j.camera, Index: -1, Err: fmt.Errorf(
		"%w: the frames need %d of the %d prompt tokens, the backend serves at most %d",
		image.ErrFrameSize, len(pr.InputIDs)-nText, len(pr.InputIDs), limit)}
}

// frame is one job of Process's parallel phase: it decodes the frame (when
// decode), checks it on its own (limits, chain sizes, the served grid),
// and runs the eval chain and smart_resize into a pooled Workspace that the
// job keeps until Process returns. Failures land in the job's decErr,
// layoutErr or chainErr; the first failure ends the job.
func (p *Processor) frame(j *frameJob, decode, keep bool) {
	t0 := time.Now()
	if decode {
		var ok bool
		if j.dec, ok = p.dec.Get(); !ok {
			j.dec = new(decBuf)
		}
		j.src = &j.dec.rgb
		var err error
		if j.dec.scratch, err = image.DecodeBase64(j.src, j.b64, p.limits, j.dec.scratch); err != nil {
			j.decErr = &image.FrameError{Camera: j.camera, Index: j.t, Err: err}
			return
		}
	}
	t1 := time.Now()
	j.decoded = t1.Sub(t0)
	fail := func(err error) *image.FrameError { return &image.FrameError{Camera: j.camera, Index: j.t, Err: err} }
	if err := p.limits.Check(j.src.W, j.src.H); err != nil {
		j.layoutErr = fail(err)
		return
	}
	sz, err := p.cfg.Chain.Sizes(j.src.W, j.src.H)
	if err != nil {
		j.layoutErr = fail(fmt.Errorf("%w: %w", image.ErrAspect, err))
		return
	}
	if rg := p.cfg.RequireGrid; rg != (image.Grid{}) && sz.Grid != rg {
		hint := ""
		if rg == droidGrid && p.cfg.Chain == image.DefaultDROIDChain() {
			hint = droidAspectHint
		}
		j.layoutErr = fail(fmt.Errorf("%w: %dx%d (width x height) gives patch grid %dx%d, the served grid is %dx%d%s",
			image.ErrAspect, j.src.W, j.src.H, sz.Grid.H, sz.Grid.W, rg.H, rg.W, hint))
		return
	}
	j.grid = sz.Grid
	j.rows = sz.Grid.Rows()
	var ok bool
	if j.ws, ok = p.ws.Get(); !ok {
		if j.ws, err = image.NewWorkspace(p.cfg.Chain); err != nil {
			j.chainErr = err
			return
		}
	}
	ev, err := j.ws.Eval(j.src)
	if err != nil {
		j.chainErr = fail(err)
		return
	}
	if keep {
		j.eval = cloneRGB(ev)
	}
	if j.resized, err = j.ws.QwenResize(ev); err != nil {
		j.chainErr = fail(err)
		return
	}
	if keep {
		j.resz = cloneRGB(j.resized)
	}
	j.chained = time.Since(t1)
}

// plan checks the cameras and frame counts and lists the images in model
// order: time-major, then camera (exterior(t−15), wrist(t−15), exterior(t),
// wrist(t) for DROID).
func (p *Processor) plan(obs *Observation) ([]frameJob, error) {
	if obs == nil {
		return nil, &image.FrameError{Camera: "", Index: -1, Err: ErrMissingCamera}
	}
	nT, nC := p.cfg.FramesPerCamera(), len(p.cfg.Cameras)
	count := func(cam string) (int, bool) {
		if obs.Frames != nil {
			f, ok := obs.Frames[cam]
			return len(f), ok
		}
		f, ok := obs.Images[cam]
		return len(f), ok
	}
	known := make(map[string]bool, nC)
	for _, cam := range p.cfg.Cameras {
		known[cam] = true
		n, ok := count(cam)
		if !ok {
			return nil, &image.FrameError{Camera: cam, Index: -1, Err: ErrMissingCamera}
		}
		if n != nT {
			return nil, &image.FrameError{Camera: cam, Index: -1, Err: fmt.Errorf("%w: got %d, want %d (delta indices %v, oldest first)", ErrFrameCount, n, nT, p.cfg.VideoDeltaIndices)}
		}
	}
	extra := func(cam string) error {
		if !known[cam] {
			return &image.FrameError{Camera: cam, Index: -1, Err: fmt.Errorf("%w (want %v)", ErrUnknownCamera, p.cfg.Cameras)}
		}
		return nil
	}
	if obs.Frames != nil {
		for cam := range obs.Frames {
			if err := extra(cam); err != nil {
				return nil, err
			}
		}
	} else {
		for cam := range obs.Images {
			if err := extra(cam); err != nil {
				return nil, err
			}
		}
	}
	jobs := make([]frameJob, 0, nT*nC)
	for t := range nT {
		for _, cam := range p.cfg.Cameras {
			j := frameJob{camera: cam, t: t, index: len(jobs)}
			if obs.Frames != nil {
				j.src = obs.Frames[cam][t]
				if j.src == nil || j.src.W < 1 || j.src.H < 1 || len(j.src.Pix) != j.src.W*j.src.H*3 {
					return nil, &image.FrameError{Camera: cam, Index: t, Err: fmt.Errorf("%w: empty or inconsistent frame", image.ErrUndecodable)}
				}
			} else {
				j.b64 = obs.Images[cam][t]
			}
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// each runs fn on every job, on the calling goroutine and up to
// p.parallel−1 others, which take jobs in order from a shared counter.
func (p *Processor) each(jobs []frameJob, fn func(*frameJob)) {
	workers := min(p.parallel, len(jobs))
	if workers <= 1 {
		for k := range jobs {
			fn(&jobs[k])
		}
		return
	}
	// A panic in a job (a decoder bug) is re-raised in the caller once
	// every worker has stopped (with the job's stack), so the caller's
	// recovery sees it and Process's defers never race a running job.
	var (
		next     atomic.Int32
		panicked atomic.Pointer[string]
	)
	run := func() {
		defer func() {
			if r := recover(); r != nil {
				msg := fmt.Sprintf("processor: frame job: %v\n%s", r, debug.Stack())
				panicked.CompareAndSwap(nil, &msg)
			}
		}()
		for {
			k := int(next.Add(1)) - 1
			if k >= len(jobs) {
				return
			}
			fn(&jobs[k])
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
	if msg := panicked.Load(); msg != nil {
		panic(*msg)
	}
}

// decBuf is the memory one base64 frame is decoded into: the RGB frame and
// the base64 scratch. Decoded frames never outlive Process (kept frames are
// clones), so they are pooled.
type decBuf struct {
	rgb     image.RGB
	scratch []byte
}

func cloneRGB(f *image.RGB) *image.RGB {
	return &image.RGB{W: f.W, H: f.H, Pix: append([]uint8(nil), f.Pix...)}
}

// Open builds a Processor for a checkpoint directory: its
// processor_config.json (DROID defaults when absent) for embodiment ("" =
// the only or the DROID one), and its tokenizer.json when present, else
// the tokenizer.json at defaultTokenizer ("" : none, an error when the
// checkpoint has none). The caller resolves both paths (cmd/gr00tgw finds
// the embedded defaults with package assets).
func Open(weightsDir, embodiment, defaultTokenizer string) (*Processor, error) {
	if weightsDir == "" {
		return nil, errors.New("processor: no checkpoint directory")
	}
	cfg, err := LoadConfig(filepath.Join(weightsDir, "processor_config.json"), embodiment)
	if err != nil {
		return nil, err
	}
	tokPath := filepath.Join(weightsDir, "tokenizer.json")
	if _, err := os.Stat(tokPath); err != nil {
		if defaultTokenizer == "" {
			return nil, fmt.Errorf("processor: checkpoint %s has no tokenizer.json and no default tokenizer was given", weightsDir)
		}
		tokPath = defaultTokenizer
	}
	tok, err := text.LoadFile(tokPath)
	if err != nil {
		return nil, err
	}
	return New(cfg, tok)
}
