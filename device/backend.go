// Package device defines the one narrow boundary between the gateway and an
// accelerator: Backend. A backend loads a GR00T N1.7 checkpoint under a
// dtype policy, warms up, and turns encoded model inputs into a normalised
// action chunk. Everything that crosses the boundary is plain data (shapes and
// float32/int32 slices), so a backend may live in this process (device/cpu) or
// in another one (a Tenstorrent runner) without its callers changing.
package device

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Inputs is one encoded observation, as produced by the host pipeline (core)
// and the embodiment plugin's pre stage. Slices are owned by the caller and
// must not be retained by the backend after Predict returns.
type Inputs struct {
	// PixelValues is [PixelRows, PixelCols] row-major: every image's patches,
	// images concatenated in model order (PixelCols = 3·2·16·16 = 1536).
	PixelValues []float32
	PixelRows   int
	PixelCols   int
	// ImageGridTHW holds one [t, h, w] patch grid per image.
	ImageGridTHW [][3]int
	// InputIDs and AttentionMask are [S] (batch 1).
	InputIDs      []int32
	AttentionMask []int32
	// PositionIDs is the mRoPE table [3, S] row-major (t, h, w rows).
	PositionIDs []int32
	// State is the normalised, padded state [max_state_dim] (132).
	State []float32
	// EmbodimentID selects the category-specific projector slot (24 = DROID).
	EmbodimentID int
	// Noise is the explicit initial flow-matching noise [horizon·action_dim],
	// or nil to draw it from Seed.
	Noise []float32
	// Seed seeds the noise generator when Noise is nil.
	Seed uint64
	// RTC, when non-nil, turns on real-time chunking (see RTC); nil is
	// the plain sampler.
	RTC *RTC
}

// RTC is real-time chunking by inpainting, GR00T N1.7's own: the new chunk
// starts from the previous chunk's tail and keeps the rows the robot
// executes meanwhile (../shared/spec/rtc.md §1; the Go backend's
// implementation is core/model/actionhead.RTC).
type RTC struct {
	// Prev is the previous chunk as the model produced it: normalised
	// action_pred, [PrevRows, action_dim] row-major, padded columns
	// included. Owned by the caller.
	Prev     []float32
	PrevRows int
	// Horizon (action_horizon) is Prev's unpadded horizon; Overlap
	// (rtc_overlap_steps) rows of Prev's tail seed the new chunk; the first
	// Frozen (rtc_frozen_steps) of them stay exactly; RampRate
	// (rtc_ramp_rate) shapes the blend between. 0 ≤ Frozen ≤ Overlap ≤
	// Horizon ≤ PrevRows ≤ the model's horizon, RampRate finite > 0.
	Horizon, Overlap, Frozen int
	RampRate                 float64
}

// ErrInput is wrapped by a backend's errors for inputs outside what it serves
// (a sequence or image set larger than its layout, mismatched lengths). The
// gateway never sends such inputs — it checks requests against Facts'
// limits before the device lock and answers 400 there — so one reaching a
// backend is a bug of the gateway, its encoder or a plugin: a 500.
var ErrInput = errors.New("device: input outside the served layout")

// Stage names reported in Result.Stages, in execution order.
const (
	StageVision  = "vision"
	StageLLM     = "llm"
	StageAdapter = "adapter"
	StageDenoise = "denoise"
)

// StageTiming is the wall time of one stage of one prediction.
type StageTiming struct {
	Name     string
	Duration time.Duration
}

// Result is one prediction. The backend allocates it; the caller owns it.
type Result struct {
	// ActionPred is the normalised action chunk [Horizon, ActionDim].
	ActionPred []float32
	Horizon    int
	ActionDim  int
	// Stages lists per-stage wall times in execution order.
	Stages []StageTiming
}

// Facts describes what a backend really serves, for /info.
type Facts struct {
	Backend string   // registered backend name, e.g. "cpu"
	Policy  string   // dtype policy actually used, e.g. "fp32"
	Stages  []string // stage names in execution order
	// MaxSeqLen is the longest LLM sequence (input_ids) Predict accepts;
	// 0 means no fixed limit. The gateway's encoder rejects longer
	// prompts with a client error naming the instruction.
	MaxSeqLen int
	// MaxImages and MaxPatches bound the images of one request and their
	// total patch rows (pixel_values rows); 0 means no fixed limit. The
	// gateway refuses an embodiment whose layout exceeds them and rejects
	// a request that would (400 naming images) before the device lock.
	MaxImages, MaxPatches int
	Extra                 map[string]any // backend-specific facts (arena, core map, threads, …)
}

// Options configure Open.
type Options struct {
	// WeightsDir is the checkpoint directory (config.json, safetensors, side files).
	WeightsDir string
	// Policy selects the dtype policy; "" means the backend's default.
	Policy string
	// Threads caps the cores a CPU backend uses; 0 means all.
	Threads int
}

// Backend runs GR00T N1.7 on one accelerator. Predict is not safe for
// concurrent use: the gateway serialises calls on one device lock (batch 1).
// Facts and Close may be called at any time; Close releases every resource
// and makes later calls fail.
type Backend interface {
	// Predict runs vision → llm → adapter → denoise on in and returns the
	// normalised action chunk. It honours ctx cancellation between stages.
	Predict(ctx context.Context, in *Inputs) (*Result, error)
	// Facts reports what is served.
	Facts() Facts
	// Close releases the backend.
	Close() error
}

// OpenFunc opens a backend of one kind.
type OpenFunc func(ctx context.Context, opts Options) (Backend, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]OpenFunc{}
)

// Register makes a backend kind available to Open under name. It panics on
// an empty name, a nil open function or a duplicate name: registration is an
// init-time programmer act, not a runtime one.
func Register(name string, open OpenFunc) {
	if name == "" || open == nil {
		panic("device: Register needs a name and an open function")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("device: backend[%s] registered twice", name))
	}
	registry[name] = open
}

// Open opens the backend registered as name.
func Open(ctx context.Context, name string, opts Options) (Backend, error) {
	registryMu.RLock()
	open, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("device: unknown backend[%s] (have %v)", name, Names())
	}
	return open(ctx, opts)
}

// Names lists the registered backend kinds, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return slices.Sorted(maps.Keys(registry))
}
