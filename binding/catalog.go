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

	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/core/text"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/service"
)

// Checkpoint is what a Catalog reads of the checkpoint once: its model
// config and its per-embodiment side files. It is immutable after
// ReadCheckpoint.
type Checkpoint struct {
	// Dir is the checkpoint directory.
	Dir string
	// Model is config.json.
	Model model.Config
	// IDs is embodiment_id.json (nil when the file is absent).
	IDs model.EmbodimentIDs
	// Stats is the shape of statistics.json.
	Stats model.StatisticsShape
	// Processor is processor_config.json's bytes (nil when absent: the
	// DROID release configuration).
	Processor []byte
	// Plugin is what the plugin host hands gw_init.
	Plugin plugins.Checkpoint
}

// ReadCheckpoint reads dir's config.json and side files (no weights).
func ReadCheckpoint(dir string) (*Checkpoint, error) {
	ck := &Checkpoint{Dir: dir}
	var err error
	if ck.Model, err = model.LoadConfig(dir); err != nil {
		return nil, err
	}
	if ck.IDs, err = model.LoadEmbodimentIDs(dir); err != nil {
		return nil, err
	}
	if ck.Stats, err = model.LoadStatisticsShape(dir); err != nil {
		return nil, err
	}
	ck.Processor, err = os.ReadFile(filepath.Join(dir, "processor_config.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("processor_config.json: %w", err)
	}
	if ck.Plugin, err = plugins.ReadCheckpoint(dir); err != nil {
		return nil, err
	}
	return ck, nil
}

// processorConfig is the checkpoint's processor configuration of tag.
func (ck *Checkpoint) processorConfig(tag string) (processor.Config, error) {
	if ck.Processor == nil {
		return processor.LoadConfig(filepath.Join(ck.Dir, "processor_config.json"), tag)
	}
	return processor.ParseConfig(ck.Processor, tag)
}

// Catalog implements service.Catalog over a plugin directory and one
// checkpoint: Scan lists the plugins, Open loads one and runs checkServed,
// then builds its host pipeline (processor on the shared tokenizer) and
// finds its demo. Scan and Open may run concurrently with requests on
// bindings opened earlier; the gateway calls them one at a time.
type Catalog struct {
	reg        *plugins.Registry
	ck         *Checkpoint
	tok        *text.Tokenizer
	facts      device.Facts      // the backend's limits (zero before it is open)
	arena      device.PixelArena // the backend's shared pixel memory (nil: the encoders' own)
	demoDir    string            // config demo_dir ("" : none)
	goldenDir  string            // computed goldens by checkpoint digest ("": none)
	defaultTag string
	log        *slog.Logger

	mu     sync.Mutex
	dirTag map[string]string // plugin dir → the tag its manifest listed when last readable
	pre    *preopened        // a plugin opened before the backend (see Preopen)
}

type preopened struct {
	c Candidate
	p *plugins.Plugin
}

// Candidate is service.Candidate.
type Candidate = service.Candidate

var _ service.Catalog = (*Catalog)(nil)

// CatalogOptions configure NewCatalog.
type CatalogOptions struct {
	// DemoDir is config demo_dir: <DemoDir>/<tag>/ holds an embodiment's
	// demo, and DemoDir itself the default embodiment's.
	DemoDir string
	// GoldenDir holds computed goldens (GoldenDir, `gr00tgw golden`);
	// "" looks for none.
	GoldenDir string
	// DefaultTag is config embodiment.
	DefaultTag string
	Logger     *slog.Logger
}

// NewCatalog builds a catalog over reg and ck, with tok shared by every
// embodiment's processor.
func NewCatalog(reg *plugins.Registry, ck *Checkpoint, tok *text.Tokenizer, o CatalogOptions) *Catalog {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Catalog{reg: reg, ck: ck, tok: tok, demoDir: o.DemoDir, goldenDir: o.GoldenDir, defaultTag: o.DefaultTag,
		log: o.Logger, dirTag: map[string]string{}}
}

// SetFacts records the backend's limits (longest prompt, images and
// patch rows per request), once it is open.
func (c *Catalog) SetFacts(f device.Facts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.facts = f
}

// SetArena makes the encoders built from now on write pixel_values into
// a's buffers (a runner pool's shared memory), so that the device call
// copies none. nil restores the encoders' own buffers.
func (c *Catalog) SetArena(a device.PixelArena) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arena = a
}

// Scan lists the plugin directory: one candidate per tag. A plugin whose
// manifest cannot be read is listed under the tag it had when last
// readable (so a reload refuses it and keeps the served version), else
// under its directory's name.
func (c *Catalog) Scan(context.Context) ([]Candidate, error) {
	ents, err := c.reg.Scan()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Candidate, 0, len(ents))
	seen := map[string]int{}
	for _, e := range ents {
		tag := e.Tag
		if tag == "" {
			if tag = c.dirTag[e.Dir]; tag == "" {
				tag = filepath.Base(e.Dir)
			}
		} else if e.Err == nil {
			c.dirTag[e.Dir] = tag
		}
		cand := Candidate{Tag: tag, Revision: e.Revision, Source: e.Dir, Err: e.Err}
		if i, dup := seen[tag]; dup {
			// Two directories for one tag (already flagged by the
			// registry, or a broken one under a remembered tag).
			if out[i].Err == nil {
				out[i].Err = fmt.Errorf("plugins: %s and %s both claim embodiment %s", out[i].Source, e.Dir, tag)
			}
			continue
		}
		seen[tag] = len(out)
		out = append(out, cand)
	}
	return out, nil
}

// Preopen loads and checks tag's plugin before the backend exists, so that
// a configuration error fails the start before any weight is read; the
// next Open of the same candidate reuses it.
func (c *Catalog) Preopen(ctx context.Context, tag string) error {
	cands, err := c.Scan(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(cands, func(x Candidate) bool { return x.Tag == tag })
	if i < 0 {
		tags := make([]string, len(cands))
		for k, x := range cands {
			tags[k] = x.Tag
		}
		return fmt.Errorf("no plugin in %s serves embodiment %s (found: %v)", c.reg.Dir(), tag, tags)
	}
	p, err := c.load(ctx, cands[i])
	if err != nil {
		return err
	}
	d := p.Describe()
	if _, err := checkServed(&d, c.ck); err != nil {
		_ = p.Close(ctx)
		return err
	}
	c.mu.Lock()
	c.pre = &preopened{c: cands[i], p: p}
	c.mu.Unlock()
	return nil
}

func (c *Catalog) load(ctx context.Context, cand Candidate) (*plugins.Plugin, error) {
	if cand.Err != nil {
		return nil, cand.Err
	}
	c.mu.Lock()
	pre := c.pre
	if pre != nil && pre.c == cand {
		c.pre = nil
		c.mu.Unlock()
		return pre.p, nil
	}
	c.mu.Unlock()
	return c.reg.Open(ctx, plugins.Entry{Dir: cand.Source, Tag: cand.Tag, Revision: cand.Revision})
}

// Open loads cand's plugin and binds it: checkServed against the
// checkpoint, the layout against the backend's sequence, then the
// processor, the encoder and the demo.
func (c *Catalog) Open(ctx context.Context, cand Candidate) (_ *service.Binding, err error) {
	p, err := c.load(ctx, cand)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = p.Close(context.WithoutCancel(ctx))
		}
	}()
	d := p.Describe()
	pcfg, err := checkServed(&d, c.ck)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	facts, arena := c.facts, c.arena
	c.mu.Unlock()
	pcfg.MaxSeqLen = facts.MaxSeqLen
	if err := checkLayout(&pcfg, &d, facts); err != nil {
		return nil, err
	}
	proc, err := processor.New(pcfg, c.tok)
	if err != nil {
		return nil, err
	}
	enc, err := NewEncoder(proc, Limits{MaxImages: facts.MaxImages, MaxPatches: facts.MaxPatches,
		FrameSide: image.Limits{MinSide: d.Layout.FrameSide[0], MaxSide: d.Layout.FrameSide[1]}})
	if err != nil {
		return nil, err
	}
	enc.arena = arena
	demo, err := c.demo(d.Embodiment, cand.Source)
	if err != nil {
		return nil, err
	}
	return &service.Binding{
		Embodiment: newPluginEmbodiment(p), Encoder: enc, Demo: demo, SHA256: p.SHA256(),
		Layout:   layoutOf(&d, &pcfg),
		Modality: modalityOf(c.ck, d.Embodiment, &pcfg),
		Close:    p.Close,
		// The safety gate's limits (service/safety.go).
		ActionLimits: p.ActionLimits(), Description: &d,
	}, nil
}

// Close closes a preopened plugin that was never served and the registry
// (call it after every binding is closed).
func (c *Catalog) Close(ctx context.Context) error {
	c.mu.Lock()
	pre := c.pre
	c.pre = nil
	c.mu.Unlock()
	var errs []error
	if pre != nil {
		errs = append(errs, pre.p.Close(ctx))
	}
	errs = append(errs, c.reg.Close(ctx))
	return errors.Join(errs...)
}

// demo finds tag's demo observation: <demo_dir>/<tag>, then (default
// embodiment) <demo_dir>; <weights>/demo/<tag>, then (default)
// <weights>/demo and <weights>/caseA; then a golden computed for this
// checkpoint (<golden_dir>/<checkpoint sha256>/<tag>, `gr00tgw golden`);
// then the plugin's own demo/, whose golden is never used (a golden belongs
// to a checkpoint). nil when none exists.
func (c *Catalog) demo(tag, pluginDir string) (*service.Demo, error) {
	var dirs []string
	if c.demoDir != "" {
		dirs = append(dirs, filepath.Join(c.demoDir, tag))
		if tag == c.defaultTag {
			dirs = append(dirs, c.demoDir)
		}
	}
	dirs = append(dirs, filepath.Join(c.ck.Dir, "demo", tag))
	if tag == c.defaultTag {
		dirs = append(dirs, filepath.Join(c.ck.Dir, "demo"), filepath.Join(c.ck.Dir, "caseA"))
	}
	if d := c.GoldenPath(tag); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "request.json")); err == nil {
			return service.LoadDemo(d)
		}
	}
	d := filepath.Join(pluginDir, "demo")
	if _, err := os.Stat(filepath.Join(d, "request.json")); err != nil {
		return nil, nil
	}
	demo, err := service.LoadDemo(d)
	if err != nil {
		return nil, err
	}
	if demo.Golden != nil {
		demo.Golden = nil
		demo.Note = "the plugin's demo observation: its golden is ignored (a golden belongs to a checkpoint; put one in <weights_dir>/demo/" + tag + ")"
	}
	return demo, nil
}

// GoldenPath is where `gr00tgw golden` keeps tag's golden for this
// checkpoint: <golden_dir>/<checkpoint sha256>/<tag> ("" without a golden
// directory or before the backend reported the checkpoint's digest).
func (c *Catalog) GoldenPath(tag string) string {
	c.mu.Lock()
	digest, _ := c.facts.Extra["checkpoint_sha256"].(string)
	c.mu.Unlock()
	if c.goldenDir == "" || digest == "" {
		return ""
	}
	return filepath.Join(c.goldenDir, digest, tag)
}

// checkServed runs every check that ties a plugin to the checkpoint — at
// start-up and on reload alike — and returns the embodiment's processor
// configuration aligned with the plugin:
//
//   - the projector slot: embodiment_id.json's entry for the tag (when the
//     file exists) equals the plugin's, within max_num_embodiments;
//   - statistics.json has the tag, and every state and action group with
//     the plugin's width (relative groups also under relative_action
//     when the checkpoint uses relative actions);
//   - processor_config.json's modality config for the tag agrees with the
//     plugin: cameras and their frame offsets, state keys and their order,
//     action keys, their order and representations (rep, type, format,
//     state key), the horizon, and no state encoding the plugin contract
//     cannot express (sin/cos, mean/std);
//   - the model widths (max_state_dim, max_action_dim) and the horizon fit;
//   - the patch grid and L_max (alignProcessor).
//
// A disagreement means the checkpoint and the plugin describe different
// robots: serving would be silently wrong, so the plugin is refused.
func checkServed(d *plugins.Description, ck *Checkpoint) (processor.Config, error) {
	tag := d.Embodiment
	fail := func(format string, args ...any) (processor.Config, error) {
		return processor.Config{}, fmt.Errorf("plugin %s %s vs checkpoint %s: embodiment %s: %s", d.Name, d.Version, ck.Dir, tag, fmt.Sprintf(format, args...))
	}
	m := ck.Model
	if d.ProjectorSlot < 0 || (m.MaxNumEmbodiments > 0 && d.ProjectorSlot >= m.MaxNumEmbodiments) {
		return fail("projector slot %d outside the checkpoint's %d slots", d.ProjectorSlot, m.MaxNumEmbodiments)
	}
	if ck.IDs != nil {
		id, err := ck.IDs.Slot(tag)
		if err != nil {
			return fail("%v", err)
		}
		if id != d.ProjectorSlot {
			return fail("%s maps it to projector slot %d, the plugin declares %d", model.EmbodimentIDsFile, id, d.ProjectorSlot)
		}
	}
	if d.MaxStateDim != m.MaxStateDim || d.MaxActionDim != m.MaxActionDim {
		return fail("plugin max_state_dim/max_action_dim %d/%d, checkpoint %d/%d", d.MaxStateDim, d.MaxActionDim, m.MaxStateDim, m.MaxActionDim)
	}
	if h := d.ActionHorizon; h <= 0 || h > m.ActionHorizon {
		return fail("action horizon %d is outside the model's %d denoised steps", h, m.ActionHorizon)
	}
	stats, ok := ck.Stats[tag]
	if !ok {
		return fail("%s has no entry for it", model.StatisticsFile)
	}
	// widths checks the n groups of kind ("state", "action") against
	// statistics.json's widths and their total against max_<kind>_dim.
	widths := func(kind string, n, maxDim int, group func(int) (key string, dim int)) error {
		sum := 0
		for i := range n {
			key, dim := group(i)
			if w, ok := stats[kind][key]; !ok || w != dim {
				return fmt.Errorf("%s %s.%s has width %d, the plugin's %s group %d", model.StatisticsFile, kind, key, w, kind, dim)
			}
			sum += dim
		}
		if sum > maxDim {
			return fmt.Errorf("%s groups total %d values, max_%s_dim is %d", kind, sum, kind, maxDim)
		}
		return nil
	}
	if err := widths("state", len(d.State), m.MaxStateDim, func(i int) (string, int) { return d.State[i].Key, d.State[i].Dim }); err != nil {
		return fail("%v", err)
	}
	if err := widths("action", len(d.Actions), m.MaxActionDim, func(i int) (string, int) { return d.Actions[i].Key, d.Actions[i].Dim }); err != nil {
		return fail("%v", err)
	}
	pc, err := ck.processorConfig(tag)
	if err != nil {
		return fail("processor_config.json: %v", err)
	}
	keys := func(n int, key func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = key(i)
		}
		return out
	}
	if ks := keys(len(d.State), func(i int) string { return d.State[i].Key }); !slices.Equal(ks, pc.StateKeys) {
		return fail("state keys %v, processor_config.json %v (order matters)", ks, pc.StateKeys)
	}
	for _, g := range d.State {
		if g.DeltaIndices != nil && pc.StateDeltaIndices != nil && !slices.Equal(g.DeltaIndices, pc.StateDeltaIndices) {
			return fail("state.%s frame offsets %v, processor_config.json %v", g.Key, g.DeltaIndices, pc.StateDeltaIndices)
		}
	}
	if len(pc.SinCosStateKeys) > 0 || len(pc.MeanStdStateKeys) > 0 {
		return fail("processor_config.json encodes state keys %v with sin/cos and %v with mean/std; the plugin contract has min/max normalisation only", pc.SinCosStateKeys, pc.MeanStdStateKeys)
	}
	if ks := keys(len(d.Actions), func(i int) string { return d.Actions[i].Key }); !slices.Equal(ks, pc.ActionKeys) {
		return fail("action keys %v, processor_config.json %v (order matters)", ks, pc.ActionKeys)
	}
	for i, g := range d.Actions {
		want := pc.ActionConfigs[i]
		got := processor.ActionConfig{Rep: strings.ToUpper(g.Rep), Type: strings.ToUpper(g.Type), Format: strings.ToUpper(g.Format), StateKey: g.StateKey}
		if want.Rep == "ABSOLUTE" {
			want.StateKey, got.StateKey = "", "" // unused by an absolute group
		}
		if got != want {
			return fail("action.%s is %s/%s/%s (state key %q), processor_config.json says %s/%s/%s (state key %q)",
				g.Key, got.Rep, got.Type, got.Format, got.StateKey, want.Rep, want.Type, want.Format, want.StateKey)
		}
	}
	for _, g := range d.Actions {
		if g.Rep == abi.RepRelative && pc.UseRelativeAction {
			if w, ok := stats["relative_action"][g.Key]; !ok || w != g.Dim {
				return fail("%s relative_action.%s has width %d, the plugin's relative action group %d", model.StatisticsFile, g.Key, w, g.Dim)
			}
		}
	}
	if d.ActionHorizon != pc.ActionHorizon {
		return fail("action horizon %d, processor_config.json %d", d.ActionHorizon, pc.ActionHorizon)
	}
	if len(pc.LanguageKeys) > 0 && d.Language.Key != "" && d.Language.Key != pc.LanguageKeys[0] {
		return fail("language key %s, processor_config.json %s", d.Language.Key, pc.LanguageKeys[0])
	}
	if err := alignProcessor(&pc, d); err != nil {
		return fail("%v", err)
	}
	return pc, nil
}

// checkLayout refuses a layout the backend cannot run: more images than it
// holds, more patch rows than its vision stage, or images that alone need
// more prompt tokens than its sequence (each image: its merged patches and
// two vision delimiters).
func checkLayout(pc *processor.Config, d *plugins.Description, f device.Facts) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("plugin %s: embodiment %s: layout %s: %s", d.Name, d.Embodiment, d.Layout.Name, fmt.Sprintf(format, args...))
	}
	n := pc.NumImages()
	if f.MaxImages > 0 && n > f.MaxImages {
		return fail("%d images per request, the backend serves at most %d", n, f.MaxImages)
	}
	g := pc.RequireGrid
	if g == (image.Grid{}) {
		return nil // variable frame sizes: the encoder checks each request
	}
	if rows := n * g.T * g.H * g.W; f.MaxPatches > 0 && rows > f.MaxPatches {
		return fail("%d images of %dx%d patches are %d patch rows, the backend serves at most %d", n, g.H, g.W, rows, f.MaxPatches)
	}
	m := max(pc.Chain.MergeSize, 1)
	if need := n * (g.T*g.H*g.W/(m*m) + 2); pc.MaxSeqLen > 0 && need >= pc.MaxSeqLen {
		return fail("needs at least %d prompt tokens for its %d images, the backend serves sequences of at most %d", need, n, pc.MaxSeqLen)
	}
	return nil
}

// layoutOf describes the embodiment's served layout for /info.
func layoutOf(d *plugins.Description, pc *processor.Config) service.Layout {
	l := service.Layout{
		Name: d.Layout.Name, Cameras: len(pc.Cameras), FramesPerCamera: pc.FramesPerCamera(),
		FrameOrder: d.Layout.FrameOrder, TokensPerImage: d.Layout.TokensPerImage, MaxTextTokens: pc.MaxTextTokens,
	}
	if l.Name == "" {
		l.Name = d.Embodiment
	}
	if g := pc.RequireGrid; g != (image.Grid{}) {
		l.VitGridTHW = [3]int{g.T, g.H, g.W}
		l.FrameRule = fmt.Sprintf("frames whose size maps onto the %dx%d patch grid under the checkpoint's image chain", g.H, g.W)
	}
	return l
}
