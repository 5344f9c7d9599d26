package pdk

import (
	"fmt"
	"strings"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// Table is a complete Plugin driven by its Description alone, for
// embodiments whose action groups are all NON_EEF with the DEFAULT format
// (absolute, or relative to a state group of the same width) — every
// embodiment without an SE(3) end-effector group. It implements upstream
// N1.7's state and action processing for them:
//
//   - Pre validates the observation against the Description (cameras and
//     their frame counts, frame sides within Layout.FrameSide and
//     width/height within Layout.FrameAspect when set, every state group
//     with its width, finite values, instruction length within
//     Language.MinChars..MaxChars) and min/max-normalises the state
//     groups, concatenated in order, into [MaxStateDim] (q01/q99 bounds
//     with use_percentiles, clipped to [−1, 1] with clip_outliers; dims
//     whose bounds are numpy-close give 0).
//   - Post keeps the first ActionHorizon rows and, column by column in
//     action order, un-normalises each absolute group with the action
//     bounds (q01/q99 or min/max) and each relative group with the
//     per-step relative_action min/max (upstream ignores use_percentiles
//     there), adding the raw state (in the request's state dtype).
//
// The arithmetic is that of NormalizeMinMax32/64 and UnnormalizeMinMax.
// Use NewTable; one Table serves one instance (the host never calls an
// instance concurrently).
type Table struct {
	desc     abi.Description
	ready    bool
	clip     bool
	stateOff []int // offset of each state group in the normalised state
	lo, hi   []float64
	alo, ahi []float64   // absolute groups: bounds per action column
	rlo, rhi [][]float64 // relative groups: per-step bounds, [group][step·dim]
	relState []int       // per action group: index of its state group, −1 if absolute
	state    []float32
	x32      []float32
	x64      []float64
	out      Actions
	camKeys  string    // for error messages
	re       []float32 // Reencode's result, reused
}

// NewTable returns a Table for d. It panics when d has an EEF or
// non-DEFAULT action group, or a relative group without a state group of
// its width: those need code of their own (see embodiments/droid).
func NewTable(d abi.Description) *Table {
	t := &Table{desc: d}
	n := 0
	for _, g := range d.State {
		t.stateOff = append(t.stateOff, n)
		n += g.Dim
	}
	t.x32, t.x64 = make([]float32, n), make([]float64, n)
	t.lo, t.hi = make([]float64, n), make([]float64, n)
	t.state = make([]float32, d.MaxStateDim)
	cols := 0
	for _, a := range d.Actions {
		if a.Type != abi.TypeNonEEF || a.Format != abi.FormatDefault {
			panic(fmt.Sprintf("pdk: NewTable: action group %s is %s/%s: a Table decodes NON_EEF/DEFAULT groups only", a.Key, a.Type, a.Format))
		}
		rel := -1
		if a.Rep == abi.RepRelative {
			for i, s := range d.State {
				if s.Key == a.StateKey && s.Dim == a.Dim {
					rel = i
				}
			}
			if rel < 0 {
				panic(fmt.Sprintf("pdk: NewTable: relative action group %s has no state group %q of width %d", a.Key, a.StateKey, a.Dim))
			}
		} else if a.Rep != abi.RepAbsolute {
			panic(fmt.Sprintf("pdk: NewTable: action group %s has rep %q", a.Key, a.Rep))
		}
		t.relState = append(t.relState, rel)
		t.out.Groups = append(t.out.Groups, ActionOutput{Key: a.Key, Horizon: d.ActionHorizon, Dim: a.Dim,
			Values: make([]float32, d.ActionHorizon*a.Dim)})
		cols += a.Dim
	}
	t.alo, t.ahi = make([]float64, cols), make([]float64, cols)
	t.rlo, t.rhi = make([][]float64, len(d.Actions)), make([][]float64, len(d.Actions))
	keys := make([]string, len(d.Cameras))
	for i, c := range d.Cameras {
		keys[i] = c.Key
	}
	t.camKeys = strings.Join(keys, ", ")
	return t
}

// Describe implements Plugin.
func (t *Table) Describe() abi.Description { return t.desc }

// Init implements Plugin: it reads the bounds of every group from the
// checkpoint's statistics for the embodiment.
func (t *Table) Init(cfg *abi.InitConfig) error {
	d := &t.desc
	if cfg.Embodiment != "" && cfg.Embodiment != d.Embodiment {
		return Errorf(abi.CodeInvalidConfig, "embodiment", "plugin serves %s, init names %s", d.Embodiment, cfg.Embodiment)
	}
	usePct, clip, useRel := true, true, true
	if p := cfg.Processor; p.MaxStateDim != 0 {
		usePct, clip, useRel = p.UsePercentiles, p.ClipOutliers, p.UseRelativeAction
	}
	t.clip = clip
	bounds := func(modality, key string, dim int) (lo, hi []float64, err error) {
		field := "statistics." + modality + "." + key
		s, ok := cfg.Statistics[modality][key]
		if !ok {
			return nil, nil, Errorf(abi.CodeInvalidConfig, field, "missing (statistics.json for %s)", d.Embodiment)
		}
		a, b := s.Min, s.Max
		if usePct && modality != "relative_action" {
			a, b = s.Q01, s.Q99
		}
		if modality == "relative_action" {
			if a.Rows < d.ActionHorizon || a.Cols != dim || b.Rows != a.Rows || b.Cols != dim {
				return nil, nil, Errorf(abi.CodeInvalidConfig, field, "min/max shape [%d][%d], want [≥%d][%d]", a.Rows, a.Cols, d.ActionHorizon, dim)
			}
			return a.Data[:d.ActionHorizon*dim], b.Data[:d.ActionHorizon*dim], nil
		}
		if a.Len() != dim || b.Len() != dim {
			return nil, nil, Errorf(abi.CodeInvalidConfig, field, "bounds have %d/%d values, want %d", a.Len(), b.Len(), dim)
		}
		return a.Data, b.Data, nil
	}
	for i, g := range d.State {
		lo, hi, err := bounds("state", g.Key, g.Dim)
		if err != nil {
			return err
		}
		copy(t.lo[t.stateOff[i]:], lo)
		copy(t.hi[t.stateOff[i]:], hi)
	}
	col := 0
	for i, a := range d.Actions {
		if t.relState[i] >= 0 {
			if !useRel {
				return Errorf(abi.CodeInvalidConfig, "processor.use_relative_action", "action group %s is relative, the checkpoint's use_relative_action is false", a.Key)
			}
			lo, hi, err := bounds("relative_action", a.Key, a.Dim)
			if err != nil {
				return err
			}
			t.rlo[i], t.rhi[i] = append([]float64(nil), lo...), append([]float64(nil), hi...)
		} else {
			lo, hi, err := bounds("action", a.Key, a.Dim)
			if err != nil {
				return err
			}
			copy(t.alo[col:], lo)
			copy(t.ahi[col:], hi)
		}
		col += a.Dim
	}
	t.ready = true
	return nil
}

// Pre implements Plugin.
func (t *Table) Pre(obs *Observation) ([]float32, error) {
	d := &t.desc
	if !t.ready {
		return nil, Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	if obs.Embodiment != "" && obs.Embodiment != d.Embodiment {
		return nil, Errorf(abi.CodeInvalidEmbodiment, "embodiment", "%q, this plugin serves %s", obs.Embodiment, d.Embodiment)
	}
	if obs.StateDType != "float32" && obs.StateDType != "float64" {
		return nil, Errorf(abi.CodeInvalidState, "state_dtype", "%q, want float32 or float64", obs.StateDType)
	}
	lang := d.Language
	if n := RuneCount(obs.Instruction); n < max(lang.MinChars, 1) || (lang.MaxChars > 0 && n > lang.MaxChars) {
		return nil, Errorf(abi.CodeInvalidInstruction, "instruction", "length %d characters, want %d to %d", n, max(lang.MinChars, 1), lang.MaxChars)
	}
	side, aspect := d.Layout.FrameSide, d.Layout.FrameAspect
	for _, want := range d.Cameras {
		c := obs.Camera(want.Key)
		field := "images." + want.Key
		switch {
		case c == nil:
			return nil, Errorf(abi.CodeInvalidCamera, field, "missing camera (want %s)", t.camKeys)
		case c.Frames != len(want.DeltaIndices):
			return nil, Errorf(abi.CodeInvalidCamera, field, "expected %d frames, got %d", len(want.DeltaIndices), c.Frames)
		case c.Channels != 3:
			return nil, Errorf(abi.CodeInvalidCamera, field, "expected 3 channels (RGB), got %d", c.Channels)
		case side != [2]int{} && (c.Height < side[0] || c.Width < side[0] || c.Height > side[1] || c.Width > side[1]):
			return nil, Errorf(abi.CodeInvalidCamera, field, "frame %dx%d: sides must be in [%d, %d]", c.Width, c.Height, side[0], side[1])
		}
		if aspect != [2]float64{} {
			if r := float64(c.Width) / float64(c.Height); r < aspect[0] || r > aspect[1] {
				return nil, Errorf(abi.CodeInvalidCamera, field, "frame %dx%d: width/height %.3f outside [%g, %g]", c.Width, c.Height, r, aspect[0], aspect[1])
			}
		}
	}
	if len(obs.Cameras) != len(d.Cameras) {
		for _, c := range obs.Cameras {
			if !t.hasCamera(c.Key) {
				return nil, Errorf(abi.CodeInvalidCamera, "images."+c.Key, "unknown camera (want %s)", t.camKeys)
			}
		}
	}
	for i, g := range d.State {
		s := obs.StateGroup(g.Key)
		field := "state." + g.Key
		switch {
		case s == nil:
			return nil, Errorf(abi.CodeInvalidState, field, "missing state group")
		case s.Steps > 1:
			return nil, Errorf(abi.CodeInvalidState, field, "expected 1 timestep, got %d", s.Steps)
		case len(s.Values) != g.Dim:
			return nil, Errorf(abi.CodeInvalidState, field, "expected %d values, got %d", g.Dim, len(s.Values))
		case !AllFinite(s.Values):
			return nil, Errorf(abi.CodeInvalidState, field, "values must be finite")
		}
		off := t.stateOff[i]
		for j, v := range s.Values {
			t.x64[off+j] = v
			t.x32[off+j] = float32(v)
		}
	}
	if len(obs.State) != len(d.State) {
		for _, s := range obs.State {
			if !t.hasState(s.Key) {
				return nil, Errorf(abi.CodeInvalidState, "state."+s.Key, "unknown state group")
			}
		}
	}
	n := len(t.x32)
	if obs.StateDType == "float64" {
		NormalizeMinMax64(t.state[:n], t.x64, t.lo, t.hi, t.clip)
	} else {
		NormalizeMinMax32(t.state[:n], t.x32, t.lo, t.hi, t.clip)
	}
	return t.state, nil
}

func (t *Table) hasCamera(key string) bool {
	for _, c := range t.desc.Cameras {
		if Equal(c.Key, key) {
			return true
		}
	}
	return false
}

func (t *Table) hasState(key string) bool {
	for _, s := range t.desc.State {
		if Equal(s.Key, key) {
			return true
		}
	}
	return false
}

// Post implements Plugin.
func (t *Table) Post(in *PostInput) (*Actions, error) {
	d := &t.desc
	if !t.ready {
		return nil, Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	cols := len(t.alo)
	h := d.ActionHorizon
	if in.Horizon < h || in.Dim < cols || len(in.ActionPred) != in.Horizon*in.Dim {
		return nil, Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "shape [%d, %d] (%d values), want at least [%d, %d]", in.Horizon, in.Dim, len(in.ActionPred), h, cols)
	}
	f32 := in.StateDType != "float64"
	col := 0
	for gi, a := range d.Actions {
		out := t.out.Groups[gi].Values
		if si := t.relState[gi]; si >= 0 {
			s := in.StateGroup(d.State[si].Key)
			if s == nil || len(s.Values) < a.Dim {
				return nil, Errorf(abi.CodeInvalidState, "state."+d.State[si].Key, "relative action group %s needs its %d state values", a.Key, a.Dim)
			}
			base := s.Values[len(s.Values)-a.Dim:] // the last step
			lo, hi := t.rlo[gi], t.rhi[gi]
			for k := 0; k < h; k++ {
				for j := 0; j < a.Dim; j++ {
					b := base[j]
					if f32 {
						b = float64(float32(b))
					}
					out[k*a.Dim+j] = float32(b + UnnormalizeMinMax(in.ActionPred[k*in.Dim+col+j], lo[k*a.Dim+j], hi[k*a.Dim+j]))
				}
			}
		} else {
			for k := 0; k < h; k++ {
				for j := 0; j < a.Dim; j++ {
					out[k*a.Dim+j] = float32(UnnormalizeMinMax(in.ActionPred[k*in.Dim+col+j], t.alo[col+j], t.ahi[col+j]))
				}
			}
		}
		col += a.Dim
	}
	return &t.out, nil
}

var _ Plugin = (*Table)(nil)
