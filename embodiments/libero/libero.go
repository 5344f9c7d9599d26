package main

import (
	"fmt"
	"unicode/utf8"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// Identity and layout constants.
const (
	Name          = "libero"
	Version       = "1.0.0"
	Tag           = "libero_sim"
	ProjectorSlot = 2
	Horizon       = 16
	MaxStateDim   = 132
	MaxActionDim  = 132
	MaxInstrChars = 2000
	stateDims     = 8
	actionDims    = 7
)

var cameras = []string{"image", "wrist_image"}

type group struct {
	key string
	dim int
}

var stateGroups = []group{{"x", 1}, {"y", 1}, {"z", 1}, {"roll", 1}, {"pitch", 1}, {"yaw", 1}, {"gripper", 2}}

var actionGroups = []group{{"x", 1}, {"y", 1}, {"z", 1}, {"roll", 1}, {"pitch", 1}, {"yaw", 1}, {"gripper", 1}}

// Libero implements pdk.Plugin. Use New.
type Libero struct {
	ready    bool
	lo, hi   [stateDims]float64
	alo, ahi [actionDims]float64
	clip     bool
	state    [MaxStateDim]float32
	x32      [stateDims]float32
	x64      [stateDims]float64
	out      pdk.Actions
	vals     [Horizon * actionDims]float32
}

// New returns an uninitialised plugin.
func New() *Libero {
	l := &Libero{}
	off := 0
	for _, g := range actionGroups {
		l.out.Groups = append(l.out.Groups, pdk.ActionOutput{Key: g.key, Horizon: Horizon, Dim: g.dim, Values: l.vals[off : off+Horizon*g.dim]})
		off += Horizon * g.dim
	}
	return l
}

// Describe implements pdk.Plugin.
func (l *Libero) Describe() abi.Description {
	d := abi.Description{
		Name: Name, Version: Version, ABI: abi.Version,
		Embodiment: Tag, ProjectorSlot: ProjectorSlot,
		Language:      abi.Language{Key: "annotation.human.action.task_description", MinChars: 1, MaxChars: MaxInstrChars},
		ActionHorizon: Horizon, MaxStateDim: MaxStateDim, MaxActionDim: MaxActionDim,
		Layout: abi.Layout{
			Name: "libero",
			// 256×256 frames: SmallestMaxSize(256) → crop 0.95 → 256 →
			// smart_resize(32) = 256×256 → 16×16 patches, 64 tokens/image.
			VitGridTHW:     [3]int{1, 16, 16},
			TokensPerImage: 64,
			LMax:           51,
			FrameAspect:    [2]float64{0.94, 1.06},
			FrameSide:      [2]int{64, 4096},
		},
	}
	for _, c := range cameras {
		d.Cameras = append(d.Cameras, abi.Camera{Key: c, DeltaIndices: []int{0}, Height: 256, Width: 256})
		d.Layout.FrameOrder = append(d.Layout.FrameOrder, c+"@0")
	}
	for _, g := range stateGroups {
		d.State = append(d.State, abi.StateGroup{Key: g.key, Dim: g.dim, DeltaIndices: []int{0}})
	}
	for _, g := range actionGroups {
		d.Actions = append(d.Actions, abi.ActionGroup{Key: g.key, Dim: g.dim, Rep: abi.RepAbsolute, Type: abi.TypeNonEEF, Format: abi.FormatDefault})
	}
	return d
}

// Init implements pdk.Plugin.
func (l *Libero) Init(cfg *abi.InitConfig) error {
	if cfg.Embodiment != "" && cfg.Embodiment != Tag {
		return pdk.Errorf(abi.CodeInvalidConfig, "embodiment", "plugin serves %s, init names %s", Tag, cfg.Embodiment)
	}
	usePct, clip := true, true
	if p := cfg.Processor; p.MaxStateDim != 0 {
		// use_relative_action is inert: libero_sim has no relative groups.
		usePct, clip = p.UsePercentiles, p.ClipOutliers
	}
	l.clip = clip
	bounds := func(modality string, groups []group, lo, hi []float64) error {
		off := 0
		for _, g := range groups {
			s, ok := cfg.Statistics[modality][g.key]
			field := fmt.Sprintf("statistics.%s.%s", modality, g.key)
			if !ok {
				return pdk.Errorf(abi.CodeInvalidConfig, field, "missing (statistics.json for %s)", Tag)
			}
			a, b := s.Min, s.Max
			if usePct {
				a, b = s.Q01, s.Q99
			}
			if a.Len() != g.dim || b.Len() != g.dim {
				return pdk.Errorf(abi.CodeInvalidConfig, field, "bounds have %d/%d values, want %d", a.Len(), b.Len(), g.dim)
			}
			copy(lo[off:], a.Data)
			copy(hi[off:], b.Data)
			off += g.dim
		}
		return nil
	}
	if err := bounds("state", stateGroups, l.lo[:], l.hi[:]); err != nil {
		return err
	}
	if err := bounds("action", actionGroups, l.alo[:], l.ahi[:]); err != nil {
		return err
	}
	l.ready = true
	return nil
}

// Pre implements pdk.Plugin.
func (l *Libero) Pre(obs *pdk.Observation) ([]float32, error) {
	if !l.ready {
		return nil, pdk.Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	if obs.Embodiment != "" && obs.Embodiment != Tag {
		return nil, pdk.Errorf(abi.CodeInvalidEmbodiment, "embodiment", "%q, this plugin serves %s", obs.Embodiment, Tag)
	}
	if obs.StateDType != "float32" && obs.StateDType != "float64" {
		return nil, pdk.Errorf(abi.CodeInvalidState, "state_dtype", "%q, want float32 or float64", obs.StateDType)
	}
	if n := utf8.RuneCountInString(obs.Instruction); n < 1 || n > MaxInstrChars {
		return nil, pdk.Errorf(abi.CodeInvalidInstruction, "instruction", "length %d characters, want 1 to %d", n, MaxInstrChars)
	}
	// Field names are built only on failure: the hot path allocates nothing.
	for _, k := range cameras {
		c := obs.Camera(k)
		switch {
		case c == nil:
			return nil, pdk.Errorf(abi.CodeInvalidCamera, "images."+k, "missing camera (want image and wrist_image)")
		case c.Frames != 1:
			return nil, pdk.Errorf(abi.CodeInvalidCamera, "images."+k, "expected 1 frame, got %d", c.Frames)
		case c.Channels != 3:
			return nil, pdk.Errorf(abi.CodeInvalidCamera, "images."+k, "expected 3 channels (RGB), got %d", c.Channels)
		case c.Height < 64 || c.Width < 64 || c.Height > 4096 || c.Width > 4096:
			return nil, pdk.Errorf(abi.CodeInvalidCamera, "images."+k, "frame %dx%d: sides must be in [64, 4096]", c.Width, c.Height)
		}
		if r := float64(c.Width) / float64(c.Height); r < 0.94 || r > 1.06 {
			return nil, pdk.Errorf(abi.CodeInvalidCamera, "images."+k, "frame %dx%d: width/height %.3f outside [0.94, 1.06] (square frames such as 256x256)", c.Width, c.Height, r)
		}
	}
	if len(obs.Cameras) != len(cameras) {
		for _, c := range obs.Cameras {
			if c.Key != cameras[0] && c.Key != cameras[1] {
				return nil, pdk.Errorf(abi.CodeInvalidCamera, "images."+c.Key, "unknown camera (want image and wrist_image)")
			}
		}
	}
	off := 0
	for _, g := range stateGroups {
		s := obs.StateGroup(g.key)
		switch {
		case s == nil:
			return nil, pdk.Errorf(abi.CodeInvalidState, "state."+g.key, "missing state group")
		case s.Steps > 1:
			return nil, pdk.Errorf(abi.CodeInvalidState, "state."+g.key, "expected 1 timestep, got %d", s.Steps)
		case len(s.Values) != g.dim:
			return nil, pdk.Errorf(abi.CodeInvalidState, "state."+g.key, "expected %d values, got %d", g.dim, len(s.Values))
		case !pdk.AllFinite(s.Values):
			return nil, pdk.Errorf(abi.CodeInvalidState, "state."+g.key, "values must be finite")
		}
		for i, v := range s.Values {
			l.x64[off+i] = v
			l.x32[off+i] = float32(v)
		}
		off += g.dim
	}
	if len(obs.State) != len(stateGroups) {
		for _, s := range obs.State {
			known := false
			for _, g := range stateGroups {
				known = known || g.key == s.Key
			}
			if !known {
				return nil, pdk.Errorf(abi.CodeInvalidState, "state."+s.Key, "unknown state group")
			}
		}
	}
	clear(l.state[:])
	if obs.StateDType == "float64" {
		pdk.NormalizeMinMax64(l.state[:stateDims], l.x64[:], l.lo[:], l.hi[:], l.clip)
	} else {
		pdk.NormalizeMinMax32(l.state[:stateDims], l.x32[:], l.lo[:], l.hi[:], l.clip)
	}
	return l.state[:], nil
}

// Post implements pdk.Plugin: slice [:16, :7] and un-normalise each
// absolute group with the action q01/q99 (or min/max) bounds.
func (l *Libero) Post(in *pdk.PostInput) (*pdk.Actions, error) {
	if !l.ready {
		return nil, pdk.Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	if in.Horizon < Horizon || in.Dim < actionDims || len(in.ActionPred) != in.Horizon*in.Dim {
		return nil, pdk.Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "shape [%d, %d] (%d values), want at least [%d, %d]", in.Horizon, in.Dim, len(in.ActionPred), Horizon, actionDims)
	}
	col := 0
	for gi, g := range actionGroups {
		out := l.out.Groups[gi].Values
		for k := 0; k < Horizon; k++ {
			for j := 0; j < g.dim; j++ {
				out[k*g.dim+j] = float32(pdk.UnnormalizeMinMax(in.ActionPred[k*in.Dim+col+j], l.alo[col+j], l.ahi[col+j]))
			}
		}
		col += g.dim
	}
	return &l.out, nil
}

var _ pdk.Plugin = (*Libero)(nil)
