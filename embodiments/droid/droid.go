package main

import (
	"fmt"
	"unicode/utf8"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

// Identity and layout constants.
const (
	Name          = "droid"
	Version       = "1.0.0"
	Tag           = "oxe_droid_relative_eef_relative_joint"
	ProjectorSlot = 24
	Horizon       = 40
	MaxStateDim   = 132
	MaxActionDim  = 132
	MaxInstrChars = 2000
)

var cameras = []string{"exterior_image_1_left", "wrist_image_left"}

var videoDelta = []int{-15, 0}

// State and action groups in concatenation order.
var groups = []struct {
	key string
	dim int
}{{"eef_9d", 9}, {"gripper_position", 1}, {"joint_position", 7}}

// Droid implements pdk.Plugin. The zero value is not usable; call New.
type Droid struct {
	ready bool
	// state bounds (q01/q99 or min/max), concatenated over groups: [17]
	lo, hi [17]float64
	clip   bool
	// per-step relative bounds: [Horizon][D]
	relEEFMin, relEEFMax     [Horizon * 9]float64
	relJointMin, relJointMax [Horizon * 7]float64
	// absolute gripper bounds
	gripLo, gripHi float64

	state [MaxStateDim]float32
	x32   [17]float32
	out   pdk.Actions
	eef   [Horizon * 9]float32
	grip  [Horizon]float32
	joint [Horizon * 7]float32
}

// New returns an uninitialised DROID plugin.
func New() *Droid {
	d := &Droid{}
	d.out.Groups = []pdk.ActionOutput{
		{Key: "eef_9d", Horizon: Horizon, Dim: 9, Values: d.eef[:]},
		{Key: "gripper_position", Horizon: Horizon, Dim: 1, Values: d.grip[:]},
		{Key: "joint_position", Horizon: Horizon, Dim: 7, Values: d.joint[:]},
	}
	return d
}

// Describe implements pdk.Plugin.
func (d *Droid) Describe() abi.Description {
	desc := abi.Description{
		Name: Name, Version: Version, ABI: abi.Version,
		Embodiment: Tag, ProjectorSlot: ProjectorSlot,
		Language:      abi.Language{Key: "annotation.language.language_instruction", MinChars: 1, MaxChars: MaxInstrChars},
		ActionHorizon: Horizon, MaxStateDim: MaxStateDim, MaxActionDim: MaxActionDim,
		Layout: abi.Layout{
			Name:           "droid",
			VitGridTHW:     [3]int{1, 16, 28},
			TokensPerImage: 112,
			LMax:           51,
			FrameAspect:    [2]float64{1.686, 1.814},
			FrameSide:      [2]int{64, 4096},
		},
	}
	for _, c := range cameras {
		desc.Cameras = append(desc.Cameras, abi.Camera{Key: c, DeltaIndices: videoDelta, Height: 180, Width: 320})
	}
	for _, dt := range videoDelta {
		for _, c := range cameras {
			desc.Layout.FrameOrder = append(desc.Layout.FrameOrder, fmt.Sprintf("%s@%d", c, dt))
		}
	}
	for _, g := range groups {
		desc.State = append(desc.State, abi.StateGroup{Key: g.key, Dim: g.dim, DeltaIndices: []int{0}})
	}
	desc.Actions = []abi.ActionGroup{
		{Key: "eef_9d", Dim: 9, Rep: abi.RepRelative, Type: abi.TypeEEF, Format: abi.FormatXYZRot6D, StateKey: "eef_9d"},
		{Key: "gripper_position", Dim: 1, Rep: abi.RepAbsolute, Type: abi.TypeNonEEF, Format: abi.FormatDefault},
		{Key: "joint_position", Dim: 7, Rep: abi.RepRelative, Type: abi.TypeNonEEF, Format: abi.FormatDefault, StateKey: "joint_position"},
	}
	return desc
}

// Init implements pdk.Plugin: it copies the bounds it needs out of the
// checkpoint statistics. Without a processor config the N1.7 DROID
// defaults apply (use_percentiles and clip_outliers true).
func (d *Droid) Init(cfg *abi.InitConfig) error {
	if cfg.Embodiment != "" && cfg.Embodiment != Tag {
		return pdk.Errorf(abi.CodeInvalidConfig, "embodiment", "plugin serves %s, init names %s", Tag, cfg.Embodiment)
	}
	usePct, clip := true, true
	if p := cfg.Processor; p.MaxStateDim != 0 {
		usePct, clip = p.UsePercentiles, p.ClipOutliers
		if p.MaxStateDim != MaxStateDim || (p.MaxActionDim != 0 && p.MaxActionDim != MaxActionDim) {
			return pdk.Errorf(abi.CodeInvalidConfig, "processor.max_state_dim", "max_state_dim %d / max_action_dim %d, plugin needs %d / %d", p.MaxStateDim, p.MaxActionDim, MaxStateDim, MaxActionDim)
		}
	}
	off := 0
	for _, g := range groups {
		s, err := stats(cfg, "state", g.key)
		if err != nil {
			return err
		}
		lo, hi := s.Min, s.Max
		if usePct {
			lo, hi = s.Q01, s.Q99
		}
		if lo.Len() != g.dim || hi.Len() != g.dim {
			return pdk.Errorf(abi.CodeInvalidConfig, "statistics.state."+g.key, "bounds have %d/%d values, want %d", lo.Len(), hi.Len(), g.dim)
		}
		copy(d.lo[off:], lo.Data)
		copy(d.hi[off:], hi.Data)
		off += g.dim
	}
	d.clip = clip
	g, err := stats(cfg, "action", "gripper_position")
	if err != nil {
		return err
	}
	glo, ghi := g.Min, g.Max
	if usePct {
		glo, ghi = g.Q01, g.Q99
	}
	if glo.Len() != 1 || ghi.Len() != 1 {
		return pdk.Errorf(abi.CodeInvalidConfig, "statistics.action.gripper_position", "bounds have %d/%d values, want 1", glo.Len(), ghi.Len())
	}
	d.gripLo, d.gripHi = glo.Data[0], ghi.Data[0]
	// Relative actions: upstream un-normalises with the raw relative_action
	// dictionary's per-step min/max regardless of use_percentiles
	// (rationale-plugins.md "Relative action bounds").
	if err := relBounds(cfg, "eef_9d", 9, d.relEEFMin[:], d.relEEFMax[:]); err != nil {
		return err
	}
	if err := relBounds(cfg, "joint_position", 7, d.relJointMin[:], d.relJointMax[:]); err != nil {
		return err
	}
	d.ready = true
	return nil
}

func stats(cfg *abi.InitConfig, modality, key string) (*abi.Stats, error) {
	m, ok := cfg.Statistics[modality]
	if !ok {
		return nil, pdk.Errorf(abi.CodeInvalidConfig, "statistics."+modality, "missing (statistics.json for %s)", Tag)
	}
	s, ok := m[key]
	if !ok {
		return nil, pdk.Errorf(abi.CodeInvalidConfig, "statistics."+modality+"."+key, "missing")
	}
	return &s, nil
}

func relBounds(cfg *abi.InitConfig, key string, dim int, lo, hi []float64) error {
	s, err := stats(cfg, "relative_action", key)
	if err != nil {
		return err
	}
	for _, a := range []abi.Array{s.Min, s.Max} {
		if a.Rows < Horizon || a.Cols != dim {
			return pdk.Errorf(abi.CodeInvalidConfig, "statistics.relative_action."+key, "min/max shape [%d][%d], want [≥%d][%d]", a.Rows, a.Cols, Horizon, dim)
		}
	}
	copy(lo, s.Min.Data[:Horizon*dim])
	copy(hi, s.Max.Data[:Horizon*dim])
	return nil
}

// validateState checks the three raw state groups (present, [D] or [[D]],
// width, finite, no unknown groups).
func validateState(st []pdk.StateInput) error {
	for _, g := range groups {
		s := findState(st, g.key)
		// Field names are built only on failure: the hot path allocates nothing.
		switch {
		case s == nil:
			return pdk.Errorf(abi.CodeInvalidState, "state."+g.key, "missing state group")
		case s.Steps > 1:
			return pdk.Errorf(abi.CodeInvalidState, "state."+g.key, "expected 1 timestep, got %d", s.Steps)
		case s.Dim != g.dim || len(s.Values) != g.dim:
			return pdk.Errorf(abi.CodeInvalidState, "state."+g.key, "expected %d values, got %d", g.dim, len(s.Values))
		case !pdk.AllFinite(s.Values):
			return pdk.Errorf(abi.CodeInvalidState, "state."+g.key, "values must be finite")
		}
	}
	if len(st) != len(groups) {
		for _, s := range st {
			known := false
			for _, g := range groups {
				known = known || g.key == s.Key
			}
			if !known {
				return pdk.Errorf(abi.CodeInvalidState, "state."+s.Key, "unknown state group (want eef_9d, gripper_position, joint_position)")
			}
		}
	}
	return nil
}

func findState(st []pdk.StateInput, key string) *pdk.StateInput {
	for i := range st {
		if st[i].Key == key {
			return &st[i]
		}
	}
	return nil
}

func checkDType(dt string) error {
	if dt != "float32" && dt != "float64" {
		return pdk.Errorf(abi.CodeInvalidState, "state_dtype", "%q, want float32 or float64", dt)
	}
	return nil
}

// Pre implements pdk.Plugin.
func (d *Droid) Pre(obs *pdk.Observation) ([]float32, error) {
	if !d.ready {
		return nil, pdk.Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	if obs.Embodiment != "" && obs.Embodiment != Tag {
		return nil, pdk.Errorf(abi.CodeInvalidEmbodiment, "embodiment", "%q, this plugin serves %s", obs.Embodiment, Tag)
	}
	if err := checkDType(obs.StateDType); err != nil {
		return nil, err
	}
	n := utf8.RuneCountInString(obs.Instruction)
	if n < 1 || n > MaxInstrChars {
		return nil, pdk.Errorf(abi.CodeInvalidInstruction, "instruction", "length %d characters, want 1 to %d", n, MaxInstrChars)
	}
	if err := validateCameras(obs); err != nil {
		return nil, err
	}
	if err := validateState(obs.State); err != nil {
		return nil, err
	}
	off := 0
	clear(d.state[:])
	if obs.StateDType == "float64" {
		for _, g := range groups {
			s := obs.StateGroup(g.key)
			pdk.NormalizeMinMax64(d.state[off:off+g.dim], s.Values, d.lo[off:off+g.dim], d.hi[off:off+g.dim], d.clip)
			off += g.dim
		}
		return d.state[:], nil
	}
	for _, g := range groups {
		s := obs.StateGroup(g.key)
		for i, v := range s.Values {
			d.x32[off+i] = float32(v)
		}
		off += g.dim
	}
	pdk.NormalizeMinMax32(d.state[:17], d.x32[:], d.lo[:], d.hi[:], d.clip)
	return d.state[:], nil
}

func validateCameras(obs *pdk.Observation) error {
	for _, key := range cameras {
		c := obs.Camera(key)
		if c == nil {
			return pdk.Errorf(abi.CodeInvalidCamera, "images."+key, "missing camera (want exterior_image_1_left and wrist_image_left)")
		}
		if c.Frames != len(videoDelta) {
			return pdk.Errorf(abi.CodeInvalidCamera, "images."+key, "expected %d frames (t-15, t), got %d", len(videoDelta), c.Frames)
		}
		if c.Channels != 3 {
			return pdk.Errorf(abi.CodeInvalidCamera, "images."+key, "expected 3 channels (RGB), got %d", c.Channels)
		}
		if c.Height < 64 || c.Width < 64 || c.Height > 4096 || c.Width > 4096 {
			return pdk.Errorf(abi.CodeInvalidCamera, "images."+key, "frame %dx%d: sides must be in [64, 4096]", c.Width, c.Height)
		}
		if r := float64(c.Width) / float64(c.Height); r < 1.686 || r > 1.814 {
			return pdk.Errorf(abi.CodeInvalidCamera, "images."+key, "frame %dx%d: width/height %.3f outside [1.686, 1.814] (accepted: landscape 16:9, 7:4, 9:5 such as 320x180, 1280x720)", c.Width, c.Height, r)
		}
	}
	if len(obs.Cameras) != len(cameras) {
		for _, c := range obs.Cameras {
			if c.Key != cameras[0] && c.Key != cameras[1] {
				return pdk.Errorf(abi.CodeInvalidCamera, "images."+c.Key, "unknown camera (want exterior_image_1_left and wrist_image_left)")
			}
		}
	}
	return nil
}

// Post implements pdk.Plugin (spec §6): slice [:40, :17], un-normalise,
// compose relative eef (T_abs = T_state·T_rel) and joints onto the raw
// state, un-normalise the absolute gripper.
func (d *Droid) Post(in *pdk.PostInput) (*pdk.Actions, error) {
	if !d.ready {
		return nil, pdk.Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	if in.Horizon < Horizon || in.Dim < 17 || len(in.ActionPred) != in.Horizon*in.Dim {
		return nil, pdk.Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "shape [%d, %d] (%d values), want at least [%d, 17]", in.Horizon, in.Dim, len(in.ActionPred), Horizon)
	}
	if err := checkDType(in.StateDType); err != nil {
		return nil, err
	}
	if err := validateState(in.State); err != nil {
		return nil, err
	}
	f32 := in.StateDType != "float64"
	eefState := in.StateGroup("eef_9d").Values
	jointState := in.StateGroup("joint_position").Values

	// Reference frame: T_state from the raw state (rotation by
	// Gram-Schmidt in the state's dtype), round-tripped through a
	// quaternion as scipy does.
	var rs pdk.Mat3
	var ts [3]float64
	if f32 {
		var s32 [9]float32
		for i := range s32 {
			s32[i] = float32(eefState[i])
		}
		rs = pdk.Rot6DToMat32(s32[3:])
		ts = [3]float64{float64(s32[0]), float64(s32[1]), float64(s32[2])}
	} else {
		rs = pdk.Rot6DToMat64(eefState[3:])
		ts = [3]float64{eefState[0], eefState[1], eefState[2]}
	}
	rs = pdk.QuatRoundTrip(&rs)

	var js [7]float64
	for j := range js {
		js[j] = jointState[j]
		if f32 {
			js[j] = float64(float32(js[j]))
		}
	}
	// The step body is unrolled by hand and the eef composition uses
	// scalar locals (eefStep): loop headers and calls carry the host's
	// stop checks, and memory round trips are dear in wasm guests.
	un := pdk.UnnormalizeMinMax
	for k := 0; k < Horizon; k++ {
		row := in.ActionPred[k*in.Dim : k*in.Dim+17 : k*in.Dim+17]
		lo, hi := d.relEEFMin[k*9:k*9+9:k*9+9], d.relEEFMax[k*9:k*9+9:k*9+9]
		rel := [9]float64{
			un(row[0], lo[0], hi[0]), un(row[1], lo[1], hi[1]), un(row[2], lo[2], hi[2]),
			un(row[3], lo[3], hi[3]), un(row[4], lo[4], hi[4]), un(row[5], lo[5], hi[5]),
			un(row[6], lo[6], hi[6]), un(row[7], lo[7], hi[7]), un(row[8], lo[8], hi[8]),
		}
		eefStep((*[9]float64)(&rs), &ts, &rel, d.eef[k*9:k*9+9:k*9+9])

		d.grip[k] = float32(un(row[9], d.gripLo, d.gripHi))

		jl, jh := d.relJointMin[k*7:k*7+7:k*7+7], d.relJointMax[k*7:k*7+7:k*7+7]
		jo := d.joint[k*7 : k*7+7 : k*7+7]
		jo[0] = float32(js[0] + un(row[10], jl[0], jh[0]))
		jo[1] = float32(js[1] + un(row[11], jl[1], jh[1]))
		jo[2] = float32(js[2] + un(row[12], jl[2], jh[2]))
		jo[3] = float32(js[3] + un(row[13], jl[3], jh[3]))
		jo[4] = float32(js[4] + un(row[14], jl[4], jh[4]))
		jo[5] = float32(js[5] + un(row[15], jl[5], jh[5]))
		jo[6] = float32(js[6] + un(row[16], jl[6], jh[6]))
	}
	return &d.out, nil
}

var _ pdk.Plugin = (*Droid)(nil)
