package benchmodel

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/core/model/actionhead"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// DROID request: S = 469 VL tokens, 448 of them image tokens.
const (
	DiTSeq       = 469
	DiTImageRows = 448
)

// DiT is the real-size GR00T N1.7 action head's denoise stage (32 AdaLN
// blocks of width 1536, 32 heads × 48, FF 6144; even blocks cross-attend to
// the VL features [469, 2048], alternating text (21 keys) and image (448
// keys) key sets), loaded by actionhead.Load with one embodiment slot and a
// one-block VL adapter (the adapter is not timed). Its DenoisePlan.Run is
// timed through the plan's taps, so every figure is the product's own
// code path:
//
//   - CrossKV: Run's prologue up to the state features (the cross-attention
//     K/V of the 16 cross blocks, computed once per request; the state
//     encoder is one row, negligible);
//   - Step: one Euler step's transformer (action features in → DiT output),
//     with the AdaLN rows precomputed at load as the backend does;
//   - Denoise: the whole Run (K/V once, 4 steps, encoders and decoder).
//
// Not safe for concurrent use.
type DiT struct {
	cfg   actionhead.Config
	m     *actionhead.Model
	plan  *actionhead.DenoisePlan
	vl    []float32
	img   []bool
	state []float32
	noise []float32
	pred  []float32
	clock stepClock
}

// DiTConfig is the real action-head configuration with one VL adapter block
// and one embodiment slot (neither changes the DiT).
func DiTConfig() actionhead.Config {
	c := actionhead.DefaultConfig()
	c.VLLayers, c.Embodiments = 1, 1
	return c
}

type ahWeights map[string][]int

func (w ahWeights) Float32(name string) ([]float32, []int, error) {
	shape, ok := w[strings.TrimPrefix(name, actionhead.Prefix)]
	if !ok {
		return nil, nil, shapeError(name)
	}
	return synth(name, numel(shape), fanIn(name, shape)), shape, nil
}

// NewDiT loads the action head with kernels k (tensor.DefaultBF16Weights
// keeps the ~4.2 GB fp32 DiT in ~2.1 GB of bf16 panels, bit-identically)
// and prepares a DROID-shaped request: S = 469 with image tokens at rows
// [10, 458). Loading synthesises ~1.1 G values: tens of seconds.
func NewDiT(k tensor.Kernels) (*DiT, error) { return newDiT(DiTConfig(), k) }

func newDiT(c actionhead.Config, k tensor.Kernels) (*DiT, error) {
	if c.MaxSeqLen < c.Horizon || DiTSeq < 1 {
		return nil, fmt.Errorf("benchmodel: dit: config %+v does not fit the DROID request", c)
	}
	m, err := actionhead.Load(c, ahWeights(c.TensorShapes()), k, 0)
	if err != nil {
		return nil, fmt.Errorf("benchmodel: dit: %w", err)
	}
	p, err := m.NewDenoisePlan(512)
	if err != nil {
		return nil, fmt.Errorf("benchmodel: dit: %w", err)
	}
	d := &DiT{cfg: c, m: m, plan: p}
	rng := rand.New(rand.NewPCG(5, 6))
	randn := func(n int, s float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * s)
		}
		return out
	}
	d.vl = randn(DiTSeq*c.BackboneDim, 1)
	d.img = make([]bool, DiTSeq)
	for i := 10; i < 10+DiTImageRows; i++ {
		d.img[i] = true
	}
	d.state = randn(c.MaxStateDim, 0.5)
	d.noise = randn(c.Horizon*c.MaxActionDim, 1)
	d.pred = make([]float32, len(d.noise))
	d.clock.steps = make([]Timing, c.NumSteps)
	return d, nil
}

// Timing is a wall and a process-CPU duration.
type Timing struct {
	Wall, CPU time.Duration
}

// DiTTimings are the parts of one denoise Run.
type DiTTimings struct {
	CrossKV Timing   // Run start → state features (cross K/V of the 16 cross blocks)
	Steps   []Timing // per Euler step: action features → DiT output (the 32 blocks + output layer)
	Denoise Timing   // the whole Run
}

// Run performs one denoise Run and returns its timings. The returned Steps
// slice is reused by the next Run.
func (d *DiT) Run() (DiTTimings, error) {
	d.clock.start = now()
	err := d.plan.Run(d.pred, d.vl, DiTSeq, d.img, nil, d.state, d.noise, &d.clock)
	end := now()
	if err != nil {
		return DiTTimings{}, err
	}
	return DiTTimings{CrossKV: d.clock.crossKV, Steps: d.clock.steps, Denoise: end.sub(d.clock.start)}, nil
}

// Output is the last Run's action prediction [Horizon, MaxActionDim].
func (d *DiT) Output() []float32 { return d.pred }

// StepFLOPs is the multiply-add count ×2 of one DiT step (41 rows): the
// 32 blocks' projections (K/V only in self blocks), attention, FF and the
// output projection.
func (d *DiT) StepFLOPs() float64 {
	c := d.cfg
	T, W := float64(c.Tokens()), float64(c.Width)
	var f float64
	for i := range c.Layers {
		f += 2 * T * (2*W*W + 2*W*float64(c.FF)) // q, o, ff1, ff2
		keys := T
		switch c.Kind(i) {
		case actionhead.SelfBlock:
			f += 2 * T * 2 * W * W
		case actionhead.TextBlock:
			keys = DiTSeq - DiTImageRows
		default:
			keys = DiTImageRows
		}
		f += 2 * 2 * T * keys * W
	}
	return f + 2*T*W*float64(c.OutputDim)
}

// stepClock is the Tapper that timestamps the plan's phases.
type stepClock struct {
	start, stepStart instant
	crossKV          Timing
	steps            []Timing
}

func (c *stepClock) Tap(name string, step int, _ []int, _ []float32) {
	switch name {
	case actionhead.TapStateFeatures:
		c.crossKV = now().sub(c.start)
	case actionhead.TapActionFeatures:
		c.stepStart = now()
	case actionhead.TapDiTOut:
		if step >= 0 && step < len(c.steps) {
			c.steps[step] = now().sub(c.stepStart)
		}
	}
}

// instant is a wall-clock and process-CPU reading.
type instant struct {
	wall time.Time
	cpu  time.Duration
}

func now() instant { return instant{wall: time.Now(), cpu: benchcpu.Now()} }

func (a instant) sub(b instant) Timing {
	return Timing{Wall: a.wall.Sub(b.wall), CPU: a.cpu - b.cpu}
}
