// Package cpu is the in-process CPU backend: GR00T N1.7 in fp32 on the
// host's cores. Open verifies the checkpoint against its configuration,
// widens and packs every weight once, and builds four stage plans (vision,
// llm, adapter, denoise) sized for a Layout, so that a warm Predict
// allocates nothing but its Result. It registers itself as "cpu".
package cpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/model/actionhead"
	"github.com/gr00tgw/gr00tgw/core/model/backbone"
	"github.com/gr00tgw/gr00tgw/core/model/noise"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/device"
)

// Name is the registered backend name.
const Name = "cpu"

func init() {
	device.Register(Name, func(ctx context.Context, opts device.Options) (device.Backend, error) {
		return Open(ctx, opts, DefaultLayout)
	})
}

// DefaultLayout fits the DROID request shape: 4 images of 16×28 patches
// (1,792 patch rows) and sequences up to 512 tokens (the serving doc's
// padded length; the demo uses 469).
var DefaultLayout = backbone.Layout{MaxPatches: 1792, MaxImages: 4, MaxSeq: 512}

// ErrClosed is returned by Predict after Close.
var ErrClosed = errors.New("cpu: backend closed")

// ErrInput is wrapped by errors about Inputs that do not fit the model or
// the layout; the backbone's and action head's input errors are wrapped too
// (errors.Is matches backbone.ErrInput / actionhead.ErrInput as well).
var ErrInput = fmt.Errorf("cpu: invalid input: %w", device.ErrInput)

// Policy is a dtype policy: the Kernels each stage's weights are packed
// with and, optionally, a replacement for the denoise transformer. The fp32
// policy computes in fp32 everywhere with the action head's own DiT blocks,
// every stage packed with tensor.DefaultBF16Weights() (bf16 storage of the
// bf16-representable weights, taken straight from the checkpoint's bits:
// bit-identical results to fp32 storage, half the resident bytes and half
// the bytes the weight-streaming DiT reads per step).
type Policy struct {
	Name                          string
	Vision, LLM, Adapter, Denoise tensor.Kernels
	// DiT, when non-nil, is called once by Open to build the transformer
	// the denoise stage runs instead of the fp32 blocks (see MixedDiT);
	// the action head is then loaded without its fp32 DiT weights, and
	// the DiT's facts appear in Facts().Extra["stage"].
	DiT DiTLoader
}

var (
	policyMu sync.RWMutex
	policies = map[string]func() (Policy, error){
		"fp32": func() (Policy, error) {
			// bf16 weight storage is bit-identical to fp32 storage for
			// bf16 checkpoints (any non-bf16 weight is kept in fp32), so
			// the numerics stay fp32's; it halves the resident weights
			// (a real-size checkpoint fits in ~6 GB instead of ~12) and
			// the bytes the weight-streaming DiT reads per step.
			k := tensor.DefaultBF16Weights()
			return Policy{Name: "fp32", Vision: k, LLM: k, Adapter: k, Denoise: k}, nil
		},
	}
)

// DefaultPolicy is the policy used when Options.Policy is empty.
const DefaultPolicy = "fp32"

// RegisterPolicy makes a dtype policy available to Open (e.g. "mixed_dit":
// bf16-weight kernels for the denoise stage, provided by a kernels
// package). It panics on a duplicate or empty name, like device.Register.
func RegisterPolicy(name string, build func() (Policy, error)) {
	if name == "" || build == nil {
		panic("cpu: RegisterPolicy needs a name and a build function")
	}
	policyMu.Lock()
	defer policyMu.Unlock()
	if _, dup := policies[name]; dup {
		panic(fmt.Sprintf("cpu: policy[%s] registered twice", name))
	}
	policies[name] = build
}

// Policies lists the registered dtype policies, sorted.
func Policies() []string {
	policyMu.RLock()
	defer policyMu.RUnlock()
	return slices.Sorted(maps.Keys(policies))
}

// Tap receives a named intermediate tensor during PredictTaps. Per-step
// action-head taps carry step = 0..NumSteps-1, all others step = -1. data
// is a view valid only during the call.
type Tap func(name string, step int, shape []int, data []float32)

// Backend is the CPU backend. Predict and PredictTaps are serialised by an
// internal lock (batch 1); Facts and Close may be called at any time.
type Backend struct {
	mu     sync.Mutex
	closed bool

	cfg     model.Config
	ahCfg   actionhead.Config
	policy  Policy
	layout  backbone.Layout
	threads int
	digest  string
	params  int64
	dir     string
	slots   []int

	warmupTime time.Duration
	dit        actionhead.DiT // from Policy.DiT; nil without one
	stageFacts map[string]any // from Policy.DiT

	bb      *backbone.Model
	ah      *actionhead.Model
	runner  *backbone.Runner
	adapter *actionhead.AdapterPlan
	denoise *actionhead.DenoisePlan
	ctx     context.Context // the running PredictTaps call's (under mu)

	vl        []float32 // [MaxSeq, backbone dim]
	imageMask []bool    // [MaxSeq]
	attnMask  []bool    // [MaxSeq]
	noise     []float32 // [Horizon·MaxActionDim]
}

var _ device.Backend = (*Backend)(nil)

// Open loads opts.WeightsDir under opts.Policy ("" = fp32) and builds the
// stage plans for layout. The projector slots loaded are the values of the
// checkpoint's embodiment_id.json (all max_num_embodiments slots without
// it). ctx is checked between the load phases.
func Open(ctx context.Context, opts device.Options, layout backbone.Layout) (*Backend, error) {
	pname := opts.Policy
	if pname == "" {
		pname = DefaultPolicy
	}
	policyMu.RLock()
	build, ok := policies[pname]
	policyMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("cpu: dtype policy[%s] not available (have %v)", pname, Policies())
	}
	pol, err := build()
	if err != nil {
		return nil, fmt.Errorf("cpu: dtype policy[%s]: %w", pname, err)
	}
	if opts.WeightsDir == "" {
		return nil, fmt.Errorf("cpu: no weights directory")
	}
	ck, err := model.Open(opts.WeightsDir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfgBytes, err := os.ReadFile(filepath.Join(opts.WeightsDir, model.ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	ahCfg, err := actionhead.ConfigFromJSON(cfgBytes)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	slots, err := embodimentSlots(opts.WeightsDir, ck.Config.MaxNumEmbodiments)
	if err != nil {
		return nil, err
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	b := &Backend{cfg: ck.Config, ahCfg: ahCfg, policy: pol, layout: layout, threads: threads,
		digest: ck.Digest, params: ck.Params, dir: opts.WeightsDir, slots: slots}
	if b.bb, err = backbone.Load(ck, pol.Vision); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	load := actionhead.Load
	if pol.DiT != nil { // the policy brings its own transformer: skip the fp32 one
		load = actionhead.LoadWithoutDiT
	}
	if b.ah, err = load(ahCfg, actionhead.FromSafetensors(ck.Set()), pol.Denoise, slots...); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if err := b.buildPlans(); err != nil {
		b.Close()
		return nil, err
	}
	if pol.DiT != nil {
		dit, facts, err := pol.DiT(ctx, DiTSource{Set: ck.Set(), ConfigJSON: cfgBytes, ActionHead: ahCfg, Threads: threads})
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("cpu: dtype policy[%s]: DiT: %w", pname, err)
		}
		b.denoise.UseDiT(dit)
		b.dit, b.stageFacts = dit, facts
	}
	if err := b.warmup(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// warmup runs one small synthetic prediction (one image of a single
// merge window, 8 tokens, one denoising step) through every stage, so
// that the worker pools exist, every kernel has run once, every weight
// has been read and a failure surfaces at Open. It is
// deliberately not layout-sized: at real size a full-layout prediction
// costs as much as a request (seconds), while the scratch it would
// pre-grow (the tensor package's packed-activation buffers, ~40 MB) is
// grown by the first full-size request in milliseconds; from then on
// Predict allocates only its Result. Serving front ends run their own
// warm-up on real observations (the gateway: the demo requests).
func (b *Backend) warmup(ctx context.Context) error {
	t0 := time.Now()
	v := b.cfg.Backbone.Vision
	ms := v.SpatialMergeSize
	per := ms * ms
	const S = 8
	if per > b.layout.MaxPatches || b.layout.MaxImages < 1 || S > b.layout.MaxSeq {
		return fmt.Errorf("cpu: layout %+v cannot hold the warm-up input (%d patches, %d tokens)", b.layout, per, S)
	}
	in := &device.Inputs{PixelRows: per, PixelCols: v.PatchDim(), EmbodimentID: b.slots[0],
		State: make([]float32, b.cfg.MaxStateDim), ImageGridTHW: [][3]int{{1, ms, ms}}}
	in.PixelValues = make([]float32, in.PixelRows*in.PixelCols)
	for i := range in.PixelValues {
		in.PixelValues[i] = float32(i%511)/255 - 1
	}
	in.InputIDs = make([]int32, S)
	in.PositionIDs = make([]int32, 3*S)
	for i := range in.InputIDs {
		in.InputIDs[i] = int32(i % 1000)
		if i == 1 {
			in.InputIDs[i] = int32(b.cfg.Backbone.ImageTokenID)
		}
		for c := 0; c < 3; c++ {
			in.PositionIDs[c*S+i] = int32(i)
		}
	}
	// One Euler step: it reads every DiT weight and runs every kernel once;
	// the others would repeat it (~1.2 s of a real-size load on 2 cores).
	b.denoise.LimitSteps(1)
	_, err := b.PredictTaps(ctx, in, nil)
	b.denoise.LimitSteps(0)
	if err != nil {
		return fmt.Errorf("cpu: warm-up: %w", err)
	}
	b.warmupTime = time.Since(t0)
	return nil
}

// buildPlans allocates every stage's buffers for b.layout.
func (b *Backend) buildPlans() error {
	var err error
	if b.runner, err = b.bb.NewRunner(b.layout, b.threads); err != nil {
		return err
	}
	s := b.layout.MaxSeq
	if b.adapter, err = b.ah.NewAdapterPlan(s); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if b.denoise, err = b.ah.NewDenoisePlan(s); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	b.runner.SetInterrupt(b.interrupt)
	b.denoise.SetInterrupt(b.interrupt)
	b.vl = make([]float32, s*b.cfg.BackboneEmbeddingDim)
	b.imageMask = make([]bool, s)
	b.attnMask = make([]bool, s)
	b.noise = make([]float32, b.cfg.ActionHorizon*b.cfg.MaxActionDim)
	return nil
}

// embodimentSlots reads the projector indexes of dir/embodiment_id.json,
// or returns every slot when the file is absent.
func embodimentSlots(dir string, n int) ([]int, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "embodiment_id.json"))
	if errors.Is(err, os.ErrNotExist) {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	var m map[string]int
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("cpu: embodiment_id.json: %w", err)
	}
	var out []int
	for tag, id := range m {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("cpu: embodiment_id.json: tag[%s] = %d outside [0, %d)", tag, id, n)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	sort.Ints(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("cpu: embodiment_id.json: no embodiment")
	}
	return out, nil
}

// Config returns the model configuration served.
func (b *Backend) Config() model.Config { return b.cfg }

// Layout returns the layout the stage plans were built for.
func (b *Backend) Layout() backbone.Layout { return b.layout }

// Predict runs vision → llm → adapter → denoise. See PredictTaps.
func (b *Backend) Predict(ctx context.Context, in *device.Inputs) (*device.Result, error) {
	return b.PredictTaps(ctx, in, nil)
}

// tapAdapter adapts a Tap to actionhead.Tapper.
type tapAdapter struct{ t Tap }

// Tap forwards to the wrapped Tap.
func (a tapAdapter) Tap(name string, step int, shape []int, data []float32) {
	a.t(name, step, shape, data)
}

// PredictTaps is Predict that also reports every intermediate tensor to tap
// (nil: none; then a warm call allocates only the Result). Inputs must fit
// the layout; errors wrap ErrInput (and the stage's own input sentinel).
func (b *Backend) PredictTaps(ctx context.Context, in *device.Inputs, tap Tap) (*device.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if in == nil {
		return nil, fmt.Errorf("%w: no inputs", ErrInput)
	}
	cfg := b.cfg
	H, A := cfg.ActionHorizon, cfg.MaxActionDim
	S := len(in.InputIDs)
	switch {
	case len(in.State) != cfg.MaxStateDim:
		return nil, fmt.Errorf("%w: state has %d values, want %d", ErrInput, len(in.State), cfg.MaxStateDim)
	case in.Noise != nil && len(in.Noise) != H*A:
		return nil, fmt.Errorf("%w: noise has %d values, want %d·%d", ErrInput, len(in.Noise), H, A)
	case in.AttentionMask != nil && len(in.AttentionMask) != S:
		return nil, fmt.Errorf("%w: attention_mask has %d values, input_ids %d", ErrInput, len(in.AttentionMask), S)
	}
	var rtc *actionhead.RTC // checked before any stage runs
	if r := in.RTC; r != nil {
		rtc = &actionhead.RTC{Prev: r.Prev, PrevRows: r.PrevRows, Horizon: r.Horizon, Overlap: r.Overlap, Frozen: r.Frozen, RampRate: r.RampRate}
		if err := rtc.Validate(H, A); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
	}
	if err := b.denoise.Use(in.EmbodimentID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	var btap backbone.TapFunc
	var atap actionhead.Tapper
	if tap != nil {
		btap = func(name string, shape []int, data []float32) { tap(name, -1, shape, data) }
		atap = tapAdapter{tap}
	}
	// Cancellation is polled inside the stages (every vision block, text
	// layer, denoise step and DiT block), not only between them: the
	// stages poll b.interrupt, which reads the call's context (no
	// allocation per call).
	b.ctx = ctx
	defer func() { b.ctx = nil }()
	stages := make([]device.StageTiming, 0, 4)
	res := &device.Result{ActionPred: make([]float32, H*A), Horizon: H, ActionDim: A}

	t0 := time.Now()
	vo, err := b.runner.Vision(in.PixelValues, in.PixelRows, in.PixelCols, in.ImageGridTHW, btap)
	if err != nil {
		return nil, stageErr(ctx, "vision", err)
	}
	t1 := time.Now()
	stages = append(stages, device.StageTiming{Name: device.StageVision, Duration: t1.Sub(t0)})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	feats, err := b.runner.LLM(in.InputIDs, in.AttentionMask, in.PositionIDs, vo, btap)
	if err != nil {
		return nil, stageErr(ctx, "llm", err)
	}
	if tap != nil {
		tap("backbone_features", -1, []int{S, cfg.BackboneEmbeddingDim}, feats)
	}
	t2 := time.Now()
	stages = append(stages, device.StageTiming{Name: device.StageLLM, Duration: t2.Sub(t1)})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vl := b.vl[:S*cfg.BackboneEmbeddingDim]
	if err := b.adapter.Run(vl, feats, S, atap); err != nil {
		return nil, stageErr(ctx, "adapter", err)
	}
	t3 := time.Now()
	stages = append(stages, device.StageTiming{Name: device.StageAdapter, Duration: t3.Sub(t2)})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	img := int32(cfg.Backbone.ImageTokenID)
	var mask []bool
	for i, id := range in.InputIDs {
		b.imageMask[i] = id == img
		b.attnMask[i] = in.AttentionMask == nil || in.AttentionMask[i] != 0
		if !b.attnMask[i] {
			mask = b.attnMask[:S]
		}
	}
	nz := in.Noise
	if nz == nil {
		noise.Randn(b.noise, in.Seed)
		nz = b.noise
	}
	if err := b.denoise.RunRTC(res.ActionPred, vl, S, b.imageMask[:S], mask, in.State, nz, rtc, atap); err != nil {
		return nil, stageErr(ctx, "denoise", err)
	}
	t4 := time.Now()
	stages = append(stages, device.StageTiming{Name: device.StageDenoise, Duration: t4.Sub(t3)})
	res.Stages = stages
	return res, nil
}

// interrupt is the stages' cancellation poll: the running call's context.
func (b *Backend) interrupt() error {
	if b.ctx == nil {
		return nil
	}
	return b.ctx.Err()
}

// stageErr is a stage's failure: the request's cancellation or deadline
// when that stopped it, else an input the stage refused (ErrInput).
func stageErr(ctx context.Context, stage string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return fmt.Errorf("%w: %s: %w", ErrInput, stage, err)
}

// Facts reports the backend, policy, stages and, in Extra: threads,
// checkpoint_sha256 (of the safetensors headers/index), parameters (used
// tensors' element count), layout, weights_dir, embodiment_slots and, for
// a policy with its own DiT (mixed_dit), "stage": the megakernel facts
// (kernels.Facts: served, policy, mk_arena_dtype, arena size/pages/digest,
// core_map summary, L1 budget, DiT dims).
func (b *Backend) Facts() device.Facts {
	f := device.Facts{
		Backend:   Name,
		Policy:    b.policy.Name,
		Stages:    []string{device.StageVision, device.StageLLM, device.StageAdapter, device.StageDenoise},
		MaxSeqLen: b.layout.MaxSeq,
		MaxImages: b.layout.MaxImages, MaxPatches: b.layout.MaxPatches,
		Extra: map[string]any{
			"threads":           b.threads,
			"checkpoint_sha256": b.digest,
			"parameters":        b.params,
			"layout": map[string]int{"max_patches": b.layout.MaxPatches, "max_images": b.layout.MaxImages,
				"max_seq": b.layout.MaxSeq},
			"weights_dir":      b.dir,
			"embodiment_slots": slices.Clone(b.slots),
			"backbone_source":  b.cfg.Backbone.Source,
			"warmup_ms":        float64(b.warmupTime.Microseconds()) / 1000,
		},
	}
	if b.stageFacts != nil {
		f.Extra["stage"] = b.stageFacts
	}
	return f
}

// Close releases the stage plans; later Predicts fail with ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.runner != nil {
		b.runner.Close()
	}
	if c, ok := b.dit.(io.Closer); ok {
		_ = c.Close()
	}
	b.dit = nil
	b.runner, b.adapter, b.denoise, b.bb, b.ah = nil, nil, nil, nil, nil
	b.vl, b.noise = nil, nil
	return nil
}
