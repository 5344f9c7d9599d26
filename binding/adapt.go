// Package binding binds the service's consumer interfaces to gr00tgw's
// implementations: service.Encoder to core/processor (+ core/image frame
// decoding), service.Embodiment to the plugin host, and the checkpoint, the
// plugins and the device into a service.Catalog of bindings; Open wires
// everything, including the device backend and the demo, into a
// service.LoadFunc. The service itself depends on none of them (its tests
// use fakes); this package is where they meet. (Formerly gateway/adapt.)
package binding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/core/text"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/internal/freelist"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/service"
)

// Encoder adapts a *processor.Processor to service.Encoder. Decode decodes
// every frame (in parallel) under the processor's frame-size and aspect
// rules; Encode runs the processor on the decoded frames and refuses, as
// the client's error naming images, an image set over the backend's
// Limits — before the device lock. Safe for concurrent use.
type Encoder struct {
	p      *processor.Processor
	rule   *image.AspectRule
	limits Limits
	pix    freelist.List[*[]float32] // pixel_values buffers, recycled via Encoded.Release
	arena  device.PixelArena         // when set, pixel_values go straight into its (shared) buffers
	rgb    freelist.List[*image.RGB] // decoded frames, recycled by Encode
	// keepRGB and keepPix bound the buffers the free lists keep (bytes of
	// a decoded frame, floats of pixel_values): a request with larger
	// frames is served, but its buffers go back to the garbage collector.
	keepRGB, keepPix int
}

// Limits bound one request's images: the backend's image and patch-row
// limits (device.Facts; zero is unbounded) and the accepted frame sides
// (the plugin's layout frame_side, within image.DefaultLimits; zero is
// image.DefaultLimits).
type Limits struct {
	MaxImages, MaxPatches int
	FrameSide             image.Limits
}

// sides is the effective frame side limits.
func (l Limits) sides() image.Limits {
	d := image.DefaultLimits
	s := l.FrameSide
	if s.MinSide <= 0 && s.MaxSide <= 0 {
		return d
	}
	return image.Limits{MinSide: max(s.MinSide, d.MinSide), MaxSide: min(max(s.MaxSide, 1), d.MaxSide)}
}

var _ service.Encoder = (*Encoder)(nil)

// NewEncoder wraps p under the backend's limits. It precomputes the
// aspect rule of p's chain and required grid (milliseconds).
func NewEncoder(p *processor.Processor, limits Limits) (*Encoder, error) {
	cfg := p.Config()
	e := &Encoder{p: p, limits: limits}
	// Keep buffers up to twice a 1280x720 frame and the pixel_values of a
	// full backend layout (11 MB for DROID's 4 × 448 patch rows).
	e.keepRGB = 2 * 1280 * 720 * 3
	e.keepPix = 1 << 22
	if limits.MaxPatches > 0 {
		e.keepPix = limits.MaxPatches * 1536
	}
	// Enough for the requests a gateway holds at once (one on the device,
	// a few encoding); each pixel_values buffer is 11 MB for DROID.
	e.pix.Max = 4
	e.rgb.Max = 4 * len(cfg.Cameras) * cfg.FramesPerCamera()
	if g := cfg.RequireGrid; g != (image.Grid{}) {
		r, err := image.NewAspectRule(cfg.Chain, g.H, g.W, limits.sides())
		if err != nil {
			return nil, fmt.Errorf("adapt: aspect rule: %w", err)
		}
		e.rule = r
	}
	return e, nil
}

// frameErr turns core/image and core/text client errors into gateway
// field errors.
func frameErr(err error) error {
	var fe *image.FrameError
	if errors.As(err, &fe) {
		field := "images." + fe.Camera
		if fe.Index >= 0 {
			field = fmt.Sprintf("%s[%d]", field, fe.Index)
		}
		return service.NewFieldError(field, err)
	}
	var ie *text.InstructionError
	if errors.As(err, &ie) {
		field := ie.Field
		if field == "" {
			field = "instruction"
		}
		return service.NewFieldError(field, err)
	}
	return err
}

// Decode decodes and validates every frame.
func (e *Encoder) Decode(ctx context.Context, cams []service.CameraFrames) (*service.Decoded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type job struct {
		cam string
		idx int
		src []byte
		raw *service.RawFrame
		dst *image.RGB
	}
	var jobs []job
	frames := make(map[string][]*image.RGB, len(cams))
	for _, c := range cams {
		fs := make([]*image.RGB, len(c.Frames))
		for i, b := range c.Frames {
			if f, ok := e.rgb.Get(); ok {
				fs[i] = f
			} else {
				fs[i] = new(image.RGB)
			}
			j := job{cam: c.Key, idx: i, src: b, dst: fs[i]}
			if i < len(c.Raw) && c.Raw[i].Pix != nil {
				j.raw = &c.Raw[i]
			}
			jobs = append(jobs, j)
		}
		frames[c.Key] = fs
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for k := range jobs {
		wg.Add(1)
		go func(j *job, errp *error) {
			defer wg.Done()
			if j.raw != nil {
				*errp = e.rawFrame(j.dst, j.cam, j.idx, j.raw)
				return
			}
			if e.rule != nil {
				*errp = e.rule.DecodeFrame(j.dst, j.cam, j.idx, j.src)
				return
			}
			if err := image.Decode(j.dst, j.src, e.limits.sides()); err != nil {
				*errp = &image.FrameError{Camera: j.cam, Index: j.idx, Err: err}
			}
		}(&jobs[k], &errs[k])
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, frameErr(err)
		}
	}
	d := &service.Decoded{Pixels: frames}
	for _, c := range cams {
		fs := frames[c.Key]
		if err := image.CheckSameSize(c.Key, fs); err != nil {
			return nil, frameErr(err)
		}
		ci := service.CameraImages{Key: c.Key, Frames: len(fs)}
		if len(fs) > 0 {
			ci.Height, ci.Width = fs[0].H, fs[0].W
		}
		d.Cameras = append(d.Cameras, ci)
	}
	return d, nil
}

// rawFrame checks a raw frame under the same rules as an encoded one
// (side limits, the layout's aspect rule) and copies it into dst.
func (e *Encoder) rawFrame(dst *image.RGB, cam string, idx int, f *service.RawFrame) error {
	fail := func(err error) error { return &image.FrameError{Camera: cam, Index: idx, Err: err} }
	if f.Width <= 0 || f.Height <= 0 || len(f.Pix) != f.Width*f.Height*3 {
		return fail(fmt.Errorf("%w: raw frame of %d bytes for %dx%d RGB (want height·width·3 = %d)",
			image.ErrUndecodable, len(f.Pix), f.Width, f.Height, max(f.Width*f.Height*3, 0)))
	}
	var err error
	if e.rule != nil {
		err = e.rule.Check(f.Width, f.Height)
	} else {
		err = e.limits.sides().Check(f.Width, f.Height)
	}
	if err != nil {
		return fail(err)
	}
	n := len(f.Pix)
	if cap(dst.Pix) < n {
		dst.Pix = make([]uint8, n)
	}
	dst.Pix = dst.Pix[:n]
	copy(dst.Pix, f.Pix)
	dst.W, dst.H = f.Width, f.Height
	return nil
}

// Encode runs the eval chain, patching, prompt, tokenizer and mRoPE. It
// consumes d: the decoded frames go back to the encoder's pool, so d must
// not be used again.
func (e *Encoder) Encode(ctx context.Context, d *service.Decoded, instruction string) (*service.Encoded, error) {
	frames, ok := d.Pixels.(map[string][]*image.RGB)
	if !ok {
		return nil, fmt.Errorf("adapt: decoded pixels of type %T, want the adapter's own", d.Pixels)
	}
	d.Pixels = nil
	defer func() {
		for _, fs := range frames {
			for _, f := range fs {
				if cap(f.Pix) <= e.keepRGB {
					e.rgb.Put(f)
				}
			}
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// pixel_values are written once, by the processor, into their final
	// place: a buffer of the backend's arena (a runner's shared memory,
	// read by the device without a copy) or one of the encoder's own.
	var buf *[]float32
	var put func(pv []float32)
	if ab, rel, ok := e.arenaBuffer(); ok {
		buf, put = &ab, func([]float32) { rel() }
	} else {
		if buf, ok = e.pix.Get(); !ok {
			buf = new([]float32)
		}
		put = func(pv []float32) { e.putPix(buf, pv) }
	}
	in, err := e.p.Process(&processor.Observation{Frames: frames, Instruction: instruction}, processor.Options{PixelValues: *buf})
	if err != nil {
		put((*buf)[:0])
		return nil, frameErr(err)
	}
	l := e.limits
	if n := len(in.ImageGridTHW); (l.MaxImages > 0 && n > l.MaxImages) || (l.MaxPatches > 0 && in.Rows > l.MaxPatches) {
		put(in.PixelValues)
		return nil, service.NewFieldError("images", fmt.Errorf("%d images of %d patch rows in all: the backend serves at most %d images and %d patch rows (send smaller frames)",
			n, in.Rows, l.MaxImages, l.MaxPatches))
	}
	out := &service.Encoded{
		Inputs: device.Inputs{
			PixelValues: in.PixelValues, PixelRows: in.Rows, PixelCols: in.RowWidth,
			InputIDs: toInt32(in.InputIDs), AttentionMask: toInt32(in.AttentionMask), PositionIDs: toInt32(in.PositionIDs),
		},
		SeqLen:       in.SeqLen,
		PromptTokens: in.TextTokens,
		GridTHW:      map[string][3]int{},
	}
	var once sync.Once
	out.Release = func() {
		once.Do(func() { put(in.PixelValues) })
	}
	out.Inputs.ImageGridTHW = make([][3]int, len(in.ImageGridTHW))
	for i, g := range in.ImageGridTHW {
		out.Inputs.ImageGridTHW[i] = [3]int{g.T, g.H, g.W}
		if i < len(in.FrameOrder) {
			cam, _, _ := strings.Cut(in.FrameOrder[i], "[")
			if _, seen := out.GridTHW[cam]; !seen {
				out.GridTHW[cam] = out.Inputs.ImageGridTHW[i]
			}
		}
	}
	return out, nil
}

// arenaBuffer takes a pixel_values buffer from the backend's arena.
func (e *Encoder) arenaBuffer() ([]float32, func(), bool) {
	if e.arena == nil {
		return nil, nil, false
	}
	return e.arena.PixelBuffer()
}

// putPix returns a pixel_values buffer to the free list unless it grew
// past keepPix.
func (e *Encoder) putPix(buf *[]float32, pv []float32) {
	if cap(pv) > e.keepPix {
		return
	}
	*buf = pv[:cap(pv)]
	e.pix.Put(buf)
}

func toInt32(v []int64) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// GoldenDir resolves config golden_dir: "" is the user cache
// (os.UserCacheDir()/gr00tgw/goldens), "-" none.
func GoldenDir(cfg config.Config) string {
	switch cfg.GoldenDir {
	case "-":
		return ""
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(d, "gr00tgw", "goldens")
	}
	return cfg.GoldenDir
}

// Paths are the resolved asset locations Open uses.
type Paths struct {
	Weights, Tokenizer, Plugins, Demo string
}

// Resolve fills empty directories from the embedded-default layout: the
// n17-tiny checkpoint, the vendored tokenizer and build/plugins. root is
// the checkout (or image) root holding the defaults; "" skips defaults.
// Demo stays config demo_dir: each embodiment's demo is found by the
// Catalog (<demo_dir>/<tag>, <weights>/demo/<tag>, …).
func Resolve(cfg config.Config, root string) Paths {
	p := Paths{Weights: cfg.WeightsDir, Tokenizer: cfg.TokenizerDir, Plugins: cfg.PluginsDir, Demo: cfg.DemoDir}
	if root != "" {
		if p.Weights == "" {
			p.Weights = filepath.Join(root, "testdata", "n17-tiny")
		}
		if p.Tokenizer == "" {
			p.Tokenizer = filepath.Join(root, "testdata", "tokenizer", "qwen3")
		}
		if p.Plugins == "" {
			p.Plugins = filepath.Join(root, "build", "plugins")
		}
	}
	return p
}

// Open builds the serving dependencies, configuration errors first: the
// checkpoint's config and side files, the tokenizer, the plugin registry,
// and the default embodiment's plugin loaded and checked against the
// checkpoint — all before any weight is read — then the backend. The
// returned Catalog serves every plugin of paths.Plugins; the gateway binds
// and warms them up. Progress is logged with the reference server's boot
// landmarks. On error everything opened so far is closed.
//
// mp receives the plugin host's metrics (nil: the global provider).
func Open(ctx context.Context, cfg config.Config, paths Paths, log *slog.Logger, mp metric.MeterProvider) (deps *service.Deps, err error) {
	return OpenWith(ctx, cfg, paths, log, mp, nil)
}

// OpenWith is Open with the backend opened by open (nil: device.Open of
// config backend in this process) — e.g. a pool of runner processes
// (device/runner). A backend that is a device.PixelArena gets the
// encoders' pixel_values written into its buffers.
func OpenWith(ctx context.Context, cfg config.Config, paths Paths, log *slog.Logger, mp metric.MeterProvider, open device.OpenFunc) (deps *service.Deps, err error) {
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()
	if paths.Weights == "" {
		return nil, errors.New("weights_dir is not set and no default checkpoint was found")
	}
	if paths.Plugins == "" {
		return nil, errors.New("plugins_dir is not set and no default plugin directory was found")
	}
	log.Info("Loading weights: " + paths.Weights)
	ck, err := ReadCheckpoint(paths.Weights)
	if err != nil {
		return nil, fmt.Errorf("weights_dir: %w", err)
	}
	tokPath := paths.Tokenizer
	if st, err := os.Stat(tokPath); err == nil && st.IsDir() {
		tokPath = filepath.Join(tokPath, "tokenizer.json")
	}
	log.Info("Tokenizer files: " + tokPath)
	tok, err := text.LoadFile(tokPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer_dir: %w", err)
	}

	obs, err := NewObserver(mp)
	if err != nil {
		return nil, fmt.Errorf("plugin metrics: %w", err)
	}
	popts := []plugins.Option{plugins.WithLogger(log), plugins.WithCheckpoint(ck.Plugin), plugins.WithObserver(obs)}
	switch cfg.PluginCacheDir {
	case "": // the host's default on-disk cache
	case "-":
		popts = append(popts, plugins.WithCacheDir(""))
	default:
		popts = append(popts, plugins.WithCacheDir(cfg.PluginCacheDir))
	}
	reg, err := plugins.NewRegistry(paths.Plugins, popts...)
	if err != nil {
		return nil, fmt.Errorf("plugins_dir: %w", err)
	}
	cat := NewCatalog(reg, ck, tok, CatalogOptions{DemoDir: paths.Demo, GoldenDir: GoldenDir(cfg), DefaultTag: cfg.Embodiment, Logger: log})
	closers = append(closers, func() error {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cat.Close(c)
	})
	t0 := time.Now()
	if err := cat.Preopen(ctx, cfg.Embodiment); err != nil {
		return nil, fmt.Errorf("plugins_dir %s: default embodiment %s: %w", paths.Plugins, cfg.Embodiment, err)
	}
	log.Info("Plugins loaded", "dir", paths.Plugins, "default", cfg.Embodiment, "ms", time.Since(t0).Milliseconds())
	reportUnserved(ctx, cat, cfg.Embodiments, paths.Plugins, log)

	log.Info(fmt.Sprintf("Opening device: backend %s (policy %s, threads %d)", cfg.Backend, cfg.Policy, cfg.Threads))
	t0 = time.Now()
	if open == nil {
		open = func(ctx context.Context, o device.Options) (device.Backend, error) {
			return device.Open(ctx, cfg.Backend, o)
		}
	}
	be, err := open(ctx, device.Options{WeightsDir: paths.Weights, Policy: cfg.Policy, Threads: cfg.Threads})
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", cfg.Backend, err)
	}
	closers = append(closers, be.Close)
	facts := be.Facts()
	log.Info(fmt.Sprintf("Model built in %.1f s", time.Since(t0).Seconds()), "facts", facts)
	cat.SetFacts(facts)
	if a, ok := be.(device.PixelArena); ok {
		cat.SetArena(a)
	}

	return &service.Deps{
		Backend: be, Catalog: cat,
		Model: service.ModelInfo{
			Version: modelVersion, ActionDim: ck.Model.MaxActionDim, ActionHorizon: ck.Model.ActionHorizon,
			DefaultSeed: uint64(cfg.DefaultSeed), RandomNoise: cfg.RandomNoise,
		},
		Close: closers[0],
	}, nil
}

// observer adapts plugins.Observer to OpenTelemetry instruments:
// gateway.plugin.host.calls{plugin,stage,outcome} (the host's own outcome
// detail: guest_error, timeout, trap, pool_exhausted, …),
// gateway.plugin.instances.recycled{plugin,reason} and
// gateway.plugin.pool.in_use{plugin}. The gateway itself records
// gateway.plugin.duration around each Pre/Post.
type observer struct {
	calls    metric.Int64Counter
	recycled metric.Int64Counter
	inUse    metric.Int64Gauge
}

// NewObserver builds a plugins.Observer recording to mp (nil: the global
// provider).
func NewObserver(mp metric.MeterProvider) (plugins.Observer, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/gr00tgw/gr00tgw/gateway/adapt") // the scope name predates the package's move
	var o observer
	var err error
	if o.calls, err = m.Int64Counter("gateway.plugin.host.calls",
		metric.WithDescription("plugin host calls by plugin, stage and outcome")); err != nil {
		return nil, err
	}
	if o.recycled, err = m.Int64Counter("gateway.plugin.instances.recycled",
		metric.WithDescription("plugin instances discarded, by plugin and reason")); err != nil {
		return nil, err
	}
	if o.inUse, err = m.Int64Gauge("gateway.plugin.pool.in_use",
		metric.WithDescription("plugin instances checked out")); err != nil {
		return nil, err
	}
	return &o, nil
}

func (o *observer) CallDone(plugin, stage, outcome string, _ time.Duration) {
	o.calls.Add(context.Background(), 1, metric.WithAttributes(attribute.String("plugin", plugin),
		attribute.String("stage", stage), attribute.String("outcome", outcome)))
}

func (o *observer) Recycled(plugin, reason string) {
	o.recycled.Add(context.Background(), 1, metric.WithAttributes(attribute.String("plugin", plugin),
		attribute.String("reason", reason)))
}

func (o *observer) PoolInUse(plugin string, n int) {
	o.inUse.Record(context.Background(), int64(n), metric.WithAttributes(attribute.String("plugin", plugin)))
}

// reportUnserved logs, before any weight is loaded, each configured
// embodiment tag that no plugin in plugins_dir serves: the gateway refuses
// it once the model is up (and serves the others), which at real size is a
// minute later; a typo in embodiments should not wait that long to show.
func reportUnserved(ctx context.Context, cat *Catalog, tags []string, dir string, log *slog.Logger) {
	if len(tags) == 0 {
		return
	}
	cands, err := cat.Scan(ctx)
	if err != nil {
		return // Start's scan reports it
	}
	have := map[string]bool{}
	var found []string
	for _, c := range cands {
		if c.Err == nil {
			have[c.Tag] = true
			found = append(found, c.Tag)
		}
	}
	slices.Sort(found)
	for _, t := range tags {
		if !have[t] {
			log.Error("embodiment will be refused: no plugin in plugins_dir serves it", "embodiment", t, "plugins_dir", dir, "found", found)
		}
	}
}
