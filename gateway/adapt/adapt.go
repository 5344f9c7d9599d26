// Package adapt binds the gateway's consumer interfaces to gr00tgw's
// implementations: gateway.Encoder to core/processor (+ core/image frame
// decoding), gateway.Embodiment and gateway.Reloader to the plugin host
// (the one plugin serving the configured embodiment), and Open wires
// everything, including the device backend and the
// demo, into a gateway.LoadFunc. The gateway package itself depends on none
// of them (its tests use fakes); this package is where they meet.
package adapt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/core/text"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/gateway"
	"github.com/gr00tgw/gr00tgw/internal/freelist"
	"github.com/gr00tgw/gr00tgw/plugins"
)

// Encoder adapts a *processor.Processor to gateway.Encoder. Decode decodes
// every frame (in parallel) under the processor's frame-size and aspect
// rules; Encode runs the processor on the decoded frames. Safe for
// concurrent use.
type Encoder struct {
	p    *processor.Processor
	rule *image.AspectRule
	pix  freelist.List[*[]float32] // pixel_values buffers, recycled via Encoded.Release
	rgb  freelist.List[*image.RGB] // decoded frames, recycled by Encode
}

var _ gateway.Encoder = (*Encoder)(nil)

// NewEncoder wraps p. It precomputes the aspect rule of p's chain and
// required grid (milliseconds).
func NewEncoder(p *processor.Processor) (*Encoder, error) {
	cfg := p.Config()
	e := &Encoder{p: p}
	// Enough for the requests a gateway holds at once (one on the device,
	// a few encoding); each pixel_values buffer is 11 MB for DROID.
	e.pix.Max = 4
	e.rgb.Max = 4 * len(cfg.Cameras) * cfg.FramesPerCamera()
	if g := cfg.RequireGrid; g != (image.Grid{}) {
		r, err := image.NewAspectRule(cfg.Chain, g.H, g.W, image.DefaultLimits)
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
		return gateway.NewFieldError(field, err)
	}
	var ie *text.InstructionError
	if errors.As(err, &ie) {
		field := ie.Field
		if field == "" {
			field = "instruction"
		}
		return gateway.NewFieldError(field, err)
	}
	return err
}

// Decode decodes and validates every frame.
func (e *Encoder) Decode(ctx context.Context, cams []gateway.CameraFrames) (*gateway.Decoded, error) {
	type job struct {
		cam string
		idx int
		src []byte
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
			jobs = append(jobs, job{c.Key, i, b, fs[i]})
		}
		frames[c.Key] = fs
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for k := range jobs {
		wg.Add(1)
		go func(j *job, errp *error) {
			defer wg.Done()
			if e.rule != nil {
				*errp = e.rule.DecodeFrame(j.dst, j.cam, j.idx, j.src)
				return
			}
			if err := image.Decode(j.dst, j.src, image.DefaultLimits); err != nil {
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
	d := &gateway.Decoded{Pixels: frames}
	for _, c := range cams {
		fs := frames[c.Key]
		if err := image.CheckSameSize(c.Key, fs); err != nil {
			return nil, frameErr(err)
		}
		ci := gateway.CameraImages{Key: c.Key, Frames: len(fs)}
		if len(fs) > 0 {
			ci.Height, ci.Width = fs[0].H, fs[0].W
		}
		d.Cameras = append(d.Cameras, ci)
	}
	return d, nil
}

// Encode runs the eval chain, patching, prompt, tokenizer and mRoPE. It
// consumes d: the decoded frames go back to the encoder's pool, so d must
// not be used again.
func (e *Encoder) Encode(ctx context.Context, d *gateway.Decoded, instruction string) (*gateway.Encoded, error) {
	frames, ok := d.Pixels.(map[string][]*image.RGB)
	if !ok {
		return nil, fmt.Errorf("adapt: decoded pixels of type %T, want the adapter's own", d.Pixels)
	}
	d.Pixels = nil
	defer func() {
		for _, fs := range frames {
			for _, f := range fs {
				e.rgb.Put(f)
			}
		}
	}()
	buf, ok := e.pix.Get()
	if !ok {
		buf = new([]float32)
	}
	in, err := e.p.Process(&processor.Observation{Frames: frames, Instruction: instruction}, processor.Options{PixelValues: *buf})
	if err != nil {
		e.pix.Put(buf)
		return nil, frameErr(err)
	}
	out := &gateway.Encoded{
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
		once.Do(func() {
			*buf = in.PixelValues[:cap(in.PixelValues)]
			e.pix.Put(buf)
		})
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

func toInt32(v []int64) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// Embodiment adapts the plugin serving one embodiment tag to
// gateway.Embodiment and gateway.Reloader. It loads only that plugin from
// the plugin directory (the sub-directory whose plugin.yaml lists the tag):
// the gateway serves one embodiment, and a plugin for another embodiment
// that cannot initialise against this checkpoint (no statistics for its
// tag) must not stop it. Reload re-scans the directory, opens the new
// plugin and swaps it in atomically; the old one is closed after its
// in-flight calls (callers that raced the swap retry once on ErrClosed).
type Embodiment struct {
	dir  string
	tag  string
	opts []plugins.Option
	mu   sync.Mutex // serialises Reload and Close
	cur  atomic.Pointer[plugins.Plugin]
	info atomic.Pointer[cachedInfo]
}

type cachedInfo struct {
	p    *plugins.Plugin
	info gateway.EmbodimentInfo
}

var (
	_ gateway.Embodiment = (*Embodiment)(nil)
	_ gateway.Reloader   = (*Embodiment)(nil)
)

// findPluginDir returns the sub-directory of dir whose manifest serves tag.
func findPluginDir(dir, tag string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("plugins: %w", err)
	}
	var found, served []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		m, err := plugins.ReadManifest(sub)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return "", err
		}
		served = append(served, m.Embodiments...)
		for _, t := range m.Embodiments {
			if t == tag {
				found = append(found, sub)
			}
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no plugin in %s serves %s (served: %v)", plugins.ErrUnknownEmbodiment, dir, tag, served)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("plugins: %v all serve embodiment %s", found, tag)
}

// OpenEmbodiment loads the plugin serving tag from dir (fail fast: compiled,
// validated, pool filled, init run).
func OpenEmbodiment(ctx context.Context, dir, tag string, opts ...plugins.Option) (*Embodiment, error) {
	e := &Embodiment{dir: dir, tag: tag, opts: opts}
	sub, err := findPluginDir(dir, tag)
	if err != nil {
		return nil, err
	}
	p, err := plugins.Open(ctx, sub, opts...)
	if err != nil {
		return nil, err
	}
	if p.Embodiment() != tag {
		_ = p.Close(ctx)
		return nil, fmt.Errorf("wasm: plugin[%s] describes embodiment %s, manifest lists %s", p.Name(), p.Embodiment(), tag)
	}
	e.cur.Store(p)
	return e, nil
}

// plugin returns the current plugin.
func (e *Embodiment) plugin() (*plugins.Plugin, error) {
	p := e.cur.Load()
	if p == nil {
		return nil, plugins.ErrClosed
	}
	return p, nil
}

// Describe reports the plugin's gw_describe as gateway.EmbodimentInfo.
func (e *Embodiment) Describe() gateway.EmbodimentInfo {
	p, err := e.plugin()
	if err != nil {
		if c := e.info.Load(); c != nil {
			return c.info
		}
		return gateway.EmbodimentInfo{Name: e.tag}
	}
	if c := e.info.Load(); c != nil && c.p == p {
		return c.info
	}
	d := p.Describe()
	info := gateway.EmbodimentInfo{
		Name: d.Embodiment, ID: d.ProjectorSlot, Plugin: d.Name, PluginVersion: d.Version,
		ActionHorizon: d.ActionHorizon,
	}
	for _, c := range d.Cameras {
		info.Cameras = append(info.Cameras, c.Key)
		if info.VideoDeltaIndices == nil {
			info.VideoDeltaIndices = append([]int(nil), c.DeltaIndices...)
		}
	}
	for _, s := range d.State {
		info.StateGroups = append(info.StateGroups, gateway.Group{Key: s.Key, Dim: s.Dim})
	}
	for _, a := range d.Actions {
		info.ActionGroups = append(info.ActionGroups, gateway.Group{Key: a.Key, Dim: a.Dim})
	}
	e.info.Store(&cachedInfo{p: p, info: info})
	return info
}

// call runs fn on the current plugin, retrying once when a reload closed
// it between lookup and call.
func call[T any](e *Embodiment, fn func(*plugins.Plugin) (T, error)) (T, error) {
	for try := 0; ; try++ {
		p, err := e.plugin()
		if err != nil {
			var zero T
			return zero, err
		}
		out, err := fn(p)
		if try == 0 && errors.Is(err, plugins.ErrClosed) {
			continue
		}
		return out, err
	}
}

// Reload re-scans the plugin directory and swaps in a freshly loaded
// plugin for the tag; on failure the current plugin keeps serving.
func (e *Embodiment) Reload(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	sub, err := findPluginDir(e.dir, e.tag)
	if err != nil {
		return fmt.Errorf("plugins: reload kept the current plugin: %w", err)
	}
	p, err := plugins.Open(ctx, sub, e.opts...)
	if err != nil {
		return fmt.Errorf("plugins: reload kept the current plugin: %w", err)
	}
	old := e.cur.Swap(p)
	if old != nil {
		go func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = old.Close(cctx)
		}()
	}
	return nil
}

// Close closes the current plugin, waiting for its in-flight calls
// (bounded by ctx).
func (e *Embodiment) Close(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.cur.Swap(nil); p != nil {
		return p.Close(ctx)
	}
	return nil
}

// Description returns the current plugin's full gw_describe document.
func (e *Embodiment) Description() (plugins.Description, error) {
	p, err := e.plugin()
	if err != nil {
		return plugins.Description{}, err
	}
	return p.Describe(), nil
}

// MaxActionDim is the model action width the plugin expects (132).
func (e *Embodiment) MaxActionDim() (int, error) {
	p, err := e.plugin()
	if err != nil {
		return 0, err
	}
	return p.Describe().MaxActionDim, nil
}

// stateGroups orders st by p's state groups (taken from the plugin that
// runs the call, so a reload in between cannot mix two layouts).
func stateGroups(p *plugins.Plugin, st map[string][]float64) []plugins.StateGroup {
	order := p.Describe().State
	out := make([]plugins.StateGroup, 0, len(order))
	for _, g := range order {
		out = append(out, plugins.StateGroup{Key: g.Key, Values: st[g.Key]})
	}
	return out
}

// pluginErr maps plugin host errors onto the gateway's: guest validation
// failures → 400 naming the field, a busy pool → 503, a guest timeout →
// 504, the rest → 500.
func pluginErr(err error) error {
	var ge *plugins.GuestError
	if errors.As(err, &ge) && !ge.Internal {
		field := ge.Field
		if field == "" {
			field = "state"
		}
		return &gateway.HandlerError{Status: http.StatusBadRequest, Code: ge.Code, Field: field, Err: errors.New(ge.Message)}
	}
	switch {
	case errors.Is(err, plugins.ErrPoolExhausted):
		return &gateway.HandlerError{Status: http.StatusServiceUnavailable, Code: gateway.CodeQueueFull, RetryAfter: 1, Err: err}
	case errors.Is(err, plugins.ErrTimeout):
		return &gateway.HandlerError{Status: http.StatusGatewayTimeout, Code: gateway.CodeTimeout, Err: err}
	case errors.Is(err, plugins.ErrUnknownEmbodiment):
		return &gateway.HandlerError{Status: http.StatusBadRequest, Code: gateway.CodeInvalid, Field: "embodiment", Err: err}
	}
	return err
}

// Pre runs the plugin's pre stage.
func (e *Embodiment) Pre(ctx context.Context, in *gateway.PreInput) ([]float32, error) {
	cams := make([]plugins.Camera, len(in.Cameras))
	for i, c := range in.Cameras {
		cams[i] = plugins.Camera{Key: c.Key, Frames: c.Frames, Height: c.Height, Width: c.Width}
	}
	pin := &plugins.PreInput{
		RequestID: in.RequestID, Embodiment: in.Embodiment, Instruction: in.Instruction,
		StateDType: in.StateDtype, Cameras: cams,
	}
	out, err := call(e, func(p *plugins.Plugin) (*plugins.PreOutput, error) {
		pin.State = stateGroups(p, in.State)
		return p.Pre(ctx, pin)
	})
	if err != nil {
		return nil, pluginErr(err)
	}
	return out.State, nil
}

// Post runs the plugin's post stage.
func (e *Embodiment) Post(ctx context.Context, in *gateway.PostInput) (map[string][]float32, error) {
	pin := &plugins.PostInput{
		RequestID: in.RequestID, Embodiment: e.tag, StateDType: in.StateDtype,
		ActionPred: in.ActionPred, Horizon: in.Horizon, Dim: in.Dim,
	}
	out, err := call(e, func(p *plugins.Plugin) (*plugins.PostOutput, error) {
		pin.State = stateGroups(p, in.State)
		return p.Post(ctx, pin)
	})
	if err != nil {
		return nil, pluginErr(err)
	}
	acts := make(map[string][]float32, len(out.Actions))
	for _, a := range out.Actions {
		acts[a.Key] = a.Values
	}
	return acts, nil
}

// Paths are the resolved asset locations Open uses.
type Paths struct {
	Weights, Tokenizer, Plugins, Demo string
}

// Resolve fills empty directories from the embedded-default layout: the
// n17-tiny checkpoint, the vendored tokenizer, build/plugins and the
// checkpoint's demo (<weights>/demo, else <weights>/caseA). root is the
// checkout (or image) root holding the defaults; "" skips defaults.
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
	if p.Demo == "" && p.Weights != "" {
		for _, d := range []string{"demo", "caseA"} {
			if _, err := os.Stat(filepath.Join(p.Weights, d, "request.json")); err == nil {
				p.Demo = filepath.Join(p.Weights, d)
				break
			}
		}
	}
	return p
}

// Open builds the serving dependencies: plugins (fail fast: every plugin
// compiled and instantiated), tokenizer + processor, the backend, the demo.
// Progress is logged with the reference server's boot landmarks. On error
// everything opened so far is closed.
//
// mp receives the plugin host's metrics (nil: the global provider).
func Open(ctx context.Context, cfg config.Config, paths Paths, log *slog.Logger, mp metric.MeterProvider) (deps *gateway.Deps, err error) {
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
	log.Info("Loading weights: " + paths.Weights)

	// Plugins first: the cheapest to fail.
	if paths.Plugins == "" {
		return nil, errors.New("plugins_dir is not set and no default plugin directory was found")
	}
	ck, err := plugins.ReadCheckpoint(paths.Weights)
	if err != nil {
		return nil, err
	}
	obs, err := NewObserver(mp)
	if err != nil {
		return nil, fmt.Errorf("plugin metrics: %w", err)
	}
	popts := []plugins.Option{plugins.WithLogger(log), plugins.WithCheckpoint(ck), plugins.WithObserver(obs)}
	switch cfg.PluginCacheDir {
	case "": // the host's default on-disk cache
	case "-":
		popts = append(popts, plugins.WithCacheDir(""))
	default:
		popts = append(popts, plugins.WithCacheDir(cfg.PluginCacheDir))
	}
	t0 := time.Now()
	emb, err := OpenEmbodiment(ctx, paths.Plugins, cfg.Embodiment, popts...)
	if err != nil {
		return nil, fmt.Errorf("plugins_dir %s: embodiment %s: %w", paths.Plugins, cfg.Embodiment, err)
	}
	closers = append(closers, func() error {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return emb.Close(c)
	})
	info := emb.Describe()
	log.Info("Plugins loaded", "dir", paths.Plugins, "plugin", info.Plugin, "version", info.PluginVersion, "ms", time.Since(t0).Milliseconds())

	// Tokenizer + processor.
	pcfg, err := processor.LoadConfig(filepath.Join(paths.Weights, "processor_config.json"), cfg.Embodiment)
	if err != nil {
		return nil, err
	}
	desc, err := emb.Description()
	if err != nil {
		return nil, err
	}
	if err := alignProcessor(&pcfg, &desc); err != nil {
		return nil, fmt.Errorf("plugin %s vs %s: %w", desc.Name, paths.Weights, err)
	}
	if err := checkSlot(paths.Weights, &desc); err != nil {
		return nil, err
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

	// Backend.
	log.Info(fmt.Sprintf("Opening device: backend %s (policy %s, threads %d)", cfg.Backend, cfg.Policy, cfg.Threads))
	t0 = time.Now()
	be, err := device.Open(ctx, cfg.Backend, device.Options{WeightsDir: paths.Weights, Policy: cfg.Policy, Threads: cfg.Threads})
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", cfg.Backend, err)
	}
	closers = append(closers, be.Close)
	facts := be.Facts()
	log.Info(fmt.Sprintf("Model built in %.1f s", time.Since(t0).Seconds()), "facts", facts)

	pcfg.MaxSeqLen = facts.MaxSeqLen
	proc, err := processor.New(pcfg, tok)
	if err != nil {
		return nil, err
	}
	enc, err := NewEncoder(proc)
	if err != nil {
		return nil, err
	}

	mcfg, err := model.LoadConfig(paths.Weights)
	if err != nil {
		return nil, err
	}
	adim := desc.MaxActionDim
	if adim != mcfg.MaxActionDim {
		return nil, fmt.Errorf("plugin %s: max_action_dim %d, checkpoint %d", desc.Name, adim, mcfg.MaxActionDim)
	}
	// The model denoises mcfg.ActionHorizon steps whatever the embodiment
	// decodes; the plugin's post keeps the first info.ActionHorizon rows
	// (upstream's decode), so a shorter embodiment horizon needs nothing
	// here beyond telling the gateway both.
	if h := info.ActionHorizon; h <= 0 || h > mcfg.ActionHorizon {
		return nil, fmt.Errorf("plugin %s: action horizon %d is outside the model's %d denoised steps", desc.Name, h, mcfg.ActionHorizon)
	}
	layout := desc.Layout.Name
	if layout == "" {
		layout = desc.Embodiment
	}
	deps = &gateway.Deps{
		Encoder: enc, Embodiment: emb, Backend: be, Reloader: emb,
		Model: gateway.ModelInfo{
			Version: modelVersion, Layout: layout, ActionDim: adim, ActionHorizon: mcfg.ActionHorizon,
			DefaultSeed: defaultSeed, MaxTextTokens: pcfg.MaxTextTokens,
		},
		Close: closers[0],
	}
	if paths.Demo != "" {
		demo, err := gateway.LoadDemo(paths.Demo)
		if err != nil {
			if cfg.WarmupRuns > 0 {
				return nil, fmt.Errorf("demo_dir: %w", err)
			}
			log.Warn("no demo observation", "err", err)
		} else {
			deps.Demo = demo
			if note := goldenNote(paths.Demo); note != "" {
				deps.Model.Extra = map[string]any{"demo_golden": note}
				log.Info("demo golden: " + note)
			}
		}
	}
	return deps, nil
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
	m := mp.Meter("github.com/gr00tgw/gr00tgw/gateway/adapt")
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
