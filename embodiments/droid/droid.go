package main

import (
	"fmt"
	"math"
	"unsafe"

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
	// norm32's constants (setStateBounds): per dim lo, hi − lo and a mask
	// that is all-ones where hi and lo are close (the dim normalises to 0);
	// clipMask is all-ones when clipping
	norms    [17]dimNorm
	clipMask uint32
	// per-step relative bounds: [Horizon][D]
	relEEFMin, relEEFMax     [Horizon * 9]float64
	relJointMin, relJointMax [Horizon * 7]float64
	// bounds per step and column (eef 0–8, gripper 9, joints 10–16):
	// (lo, (hi−lo)/2) pairs, [Horizon][17][2]
	bounds  [Horizon * 34]float64
	clipped [Horizon * 17]float32 // the chunk's columns 0–16, clipped (steps)
	// absolute gripper bounds
	gripLo, gripHi float64

	state [MaxStateDim]float32
	out   pdk.Actions
	eef   [Horizon * 9]float32
	grip  [Horizon]float32
	joint [Horizon * 7]float32
	re    []float32 // Reencode's result, reused
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
	d.setStateBounds(clip)
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
	for k := 0; k < Horizon; k++ {
		b := d.bounds[k*34 : k*34+34]
		for j := 0; j < 9; j++ {
			b[2*j], b[2*j+1] = d.relEEFMin[k*9+j], (d.relEEFMax[k*9+j]-d.relEEFMin[k*9+j])*0.5
		}
		b[18], b[19] = d.gripLo, (d.gripHi-d.gripLo)*0.5
		for j := 0; j < 7; j++ {
			b[20+2*j], b[21+2*j] = d.relJointMin[k*7+j], (d.relJointMax[k*7+j]-d.relJointMin[k*7+j])*0.5
		}
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

// clipBits clips a float32, given and returned as its bits, to [−1, 1]
// like pdk's clip32: a magnitude in (1, +Inf] becomes 1 with the value's
// sign; NaN, −0 and in-range values pass through. Integer-only, so Go
// compiles the condition to a select (no branch; Go does not select
// between floats, and on wasm a float's bits otherwise make a round trip
// through memory). The arithmetic is on uint64, where the subtraction
// wraps just as well for magnitudes ≤ 1, so a wasm guest (whose registers
// are 64-bit) needs no masking back to 32 bits.
func clipBits(b uint32) uint32 {
	w := uint64(b)
	out := w
	if w&0x7FFFFFFF-0x3F800001 < 0x7F800000-0x3F800000 {
		out = w&0x80000000 | 0x3F800000
	}
	return uint32(out)
}

//lint:ignore U1000 used by the gwbench build (bench_exports_gwbench.go)
func validateState(st []pdk.StateInput) error {
	_, _, _, err := stateGroups(st)
	return err
}

// stateGroups validates st (validateState) and returns its eef_9d,
// gripper_position and joint_position groups. In the shape the host
// sends (validStateFast) they are st[0], st[1] and st[2]: no lookup, which
// in a wasm guest would cost a call and a key comparison per group.
func stateGroups(st []pdk.StateInput) (e, g, j *pdk.StateInput, err error) {
	if validStateFast(st) {
		return &st[0], &st[1], &st[2], nil
	}
	if err := validateStateSlow(st); err != nil {
		return nil, nil, nil, err
	}
	return findState(st, "eef_9d"), findState(st, "gripper_position"), findState(st, "joint_position"), nil
}

// validateStateSlow is validateState one condition at a time, for the
// error.
func validateStateSlow(st []pdk.StateInput) error {
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
				known = known || pdk.Equal(g.key, s.Key)
			}
			if !known {
				return pdk.Errorf(abi.CodeInvalidState, "state."+s.Key, "unknown state group (want eef_9d, gripper_position, joint_position)")
			}
		}
	}
	return nil
}

// validStateFast reports whether st is valid in the shape the host sends
// (the three groups in description order): the conditions of
// validateState's loop, combined without branches (each is a trip through
// Go's dispatch loop in a wasm guest). false sends validateState down its
// loop, which finds the error (or accepts another order).
func validStateFast(st []pdk.StateInput) bool {
	if len(st) != 3 || !pdk.Equal(st[0].Key, "eef_9d") || !pdk.Equal(st[1].Key, "gripper_position") || !pdk.Equal(st[2].Key, "joint_position") {
		return false
	}
	e, g, j := &st[0], &st[1], &st[2]
	if b2u(e.Steps > 1)|b2u(g.Steps > 1)|b2u(j.Steps > 1)|b2u(e.Dim != 9)|b2u(len(e.Values) != 9)|
		b2u(g.Dim != 1)|b2u(len(g.Values) != 1)|b2u(j.Dim != 7)|b2u(len(j.Values) != 7) != 0 {
		return false
	}
	// x − x is +0 for finite x and NaN for ±Inf and NaN (pdk.AllFinite).
	ev, gv, jv := (*[9]float64)(e.Values), g.Values[0], (*[7]float64)(j.Values)
	nf := b2u(ev[0]-ev[0] != 0) | b2u(ev[1]-ev[1] != 0) | b2u(ev[2]-ev[2] != 0) | b2u(ev[3]-ev[3] != 0) |
		b2u(ev[4]-ev[4] != 0) | b2u(ev[5]-ev[5] != 0) | b2u(ev[6]-ev[6] != 0) | b2u(ev[7]-ev[7] != 0) |
		b2u(ev[8]-ev[8] != 0) | b2u(gv-gv != 0) |
		b2u(jv[0]-jv[0] != 0) | b2u(jv[1]-jv[1] != 0) | b2u(jv[2]-jv[2] != 0) | b2u(jv[3]-jv[3] != 0) |
		b2u(jv[4]-jv[4] != 0) | b2u(jv[5]-jv[5] != 0) | b2u(jv[6]-jv[6] != 0)
	return nf == 0
}

// validCamerasFast is validStateFast for validateCameras: both cameras in
// description order, every condition combined without branches.
func validCamerasFast(cs []pdk.CameraInput) bool {
	if len(cs) != 2 || !pdk.Equal(cs[0].Key, cameras[0]) || !pdk.Equal(cs[1].Key, cameras[1]) {
		return false
	}
	// validCamera for both, written out (two calls fewer in a wasm guest).
	a, b := &cs[0], &cs[1]
	ra, rb := float64(a.Width)/float64(a.Height), float64(b.Width)/float64(b.Height)
	bad := b2u(a.Frames != len(videoDelta)) | b2u(a.Channels != 3) |
		b2u(a.Height < 64) | b2u(a.Width < 64) | b2u(a.Height > 4096) | b2u(a.Width > 4096) |
		b2u(ra < 1.686) | b2u(ra > 1.814) |
		b2u(b.Frames != len(videoDelta)) | b2u(b.Channels != 3) |
		b2u(b.Height < 64) | b2u(b.Width < 64) | b2u(b.Height > 4096) | b2u(b.Width > 4096) |
		b2u(rb < 1.686) | b2u(rb > 1.814)
	return bad == 0
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func findState(st []pdk.StateInput, key string) *pdk.StateInput {
	for i := range st {
		if pdk.Equal(st[i].Key, key) {
			return &st[i]
		}
	}
	return nil
}

//lint:ignore U1000 used by the gwbench build (bench_exports_gwbench.go)
func checkDType(dt string) error {
	_, err := isFloat64(dt)
	return err
}

// isFloat64 checks the state dtype (checkDType) and reports whether it is
// float64, with one string comparison for float32 (a call in a wasm
// guest).
func isFloat64(dt string) (bool, error) {
	if pdk.Equal(dt, "float32") {
		return false, nil
	}
	if pdk.Equal(dt, "float64") {
		return true, nil
	}
	return false, pdk.Errorf(abi.CodeInvalidState, "state_dtype", "%q, want float32 or float64", dt)
}

// Pre implements pdk.Plugin.
func (d *Droid) Pre(obs *pdk.Observation) ([]float32, error) {
	if !d.ready {
		return nil, pdk.Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	if obs.Embodiment != "" && !pdk.Equal(obs.Embodiment, Tag) {
		return nil, pdk.Errorf(abi.CodeInvalidEmbodiment, "embodiment", "%q, this plugin serves %s", obs.Embodiment, Tag)
	}
	f64, err := isFloat64(obs.StateDType)
	if err != nil {
		return nil, err
	}
	n := pdk.RuneCount(obs.Instruction)
	if n < 1 || n > MaxInstrChars {
		return nil, pdk.Errorf(abi.CodeInvalidInstruction, "instruction", "length %d characters, want 1 to %d", n, MaxInstrChars)
	}
	if err := validateCameras(obs); err != nil {
		return nil, err
	}
	eg, gg, jg, err := stateGroups(obs.State)
	if err != nil {
		return nil, err
	}
	if err := checkRotation(eg.Values, f64); err != nil {
		return nil, err
	}
	// Only d.state[:17] is ever written; the padding stays zero.
	off := 0
	if f64 {
		byGroup := [...]*pdk.StateInput{eg, gg, jg} // in groups' order
		for i, g := range groups {
			s := byGroup[i]
			pdk.NormalizeMinMax64(d.state[off:off+g.dim], s.Values, d.lo[off:off+g.dim], d.hi[off:off+g.dim], d.clip)
			off += g.dim
		}
		return d.state[:], nil
	}
	// float32 state: pdk.NormalizeMinMax32 over the 17 dims with per-dim
	// constants from setStateBounds (validateState checked the widths).
	// One loop over the gathered values: unrolled, Go's wasm code computed
	// every constant's address up front and spilled them.
	var x [17]float64
	*(*[9]float64)(x[:9]) = *(*[9]float64)(eg.Values)
	x[9] = gg.Values[0]
	*(*[7]float64)(x[10:]) = *(*[7]float64)(jg.Values)
	for i := range x {
		d.state[i] = d.norms[i].norm32(x[i], d.clipMask)
	}
	return d.state[:], nil
}

// checkRotation refuses an eef_9d state whose rot6d (values 3–8) has no
// rotation: Post's Gram-Schmidt of it, in the state's dtype, would divide
// by zero (a zero or subnormal vector, or two parallel ones) and every
// action would be NaN.
func checkRotation(eef []float64, f64 bool) error {
	var m pdk.Mat3
	if f64 {
		m = pdk.Rot6DToMat64(eef[3:9])
	} else {
		r := [6]float32{float32(eef[3]), float32(eef[4]), float32(eef[5]), float32(eef[6]), float32(eef[7]), float32(eef[8])}
		m = pdk.Rot6DToMat32(r[:])
	}
	if !pdk.AllFinite(m[:]) {
		return pdk.Errorf(abi.CodeInvalidState, "state.eef_9d", "rotation (values 3 to 8, two rot6d vectors) is degenerate: a vector is zero or the two are parallel")
	}
	return nil
}

// dimNorm holds one state dim's normalisation constants (setStateBounds).
type dimNorm struct {
	lo, rng float64
	zero    uint32
}

// setStateBounds derives norm32's per-dim constants from d.lo and d.hi.
func (d *Droid) setStateBounds(clip bool) {
	d.clip = clip
	d.clipMask = 0
	if clip {
		d.clipMask = ^uint32(0)
	}
	for i := range d.lo {
		n := &d.norms[i]
		n.lo, n.rng, n.zero = d.lo[i], d.hi[i]-d.lo[i], 0
		if pdk.IsClose(d.hi[i], d.lo[i]) {
			n.zero = ^uint32(0)
		}
	}
}

// norm32 is pdk.NormalizeMinMax32 for state dim i.
func (d *Droid) norm32(i int, x float64) float32 { return d.norms[i].norm32(x, d.clipMask) }

// norm32 is pdk.NormalizeMinMax32 for one dim: the same operations, without
// branches (the clip and the zeroing of constant dims select on the
// result's bits, so Go emits wasm selects). clipMask is Droid.clipMask.
func (n *dimNorm) norm32(x float64, clipMask uint32) float32 {
	v := float32((float64(float32(x)) - n.lo) / n.rng)
	b := math.Float32bits(float32(float32(2*v) - 1))
	b ^= (clipBits(b) ^ b) & clipMask // b&^clipMask | clipBits(b)&clipMask, cheaper (inlines)
	return math.Float32frombits(b &^ n.zero)
}

func validateCameras(obs *pdk.Observation) error {
	if validCamerasFast(obs.Cameras) {
		return nil
	}
	return validateCamerasSlow(obs)
}

// validateCamerasSlow is validateCameras one condition at a time, for the
// error.
func validateCamerasSlow(obs *pdk.Observation) error {
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
			if !pdk.Equal(c.Key, cameras[0]) && !pdk.Equal(c.Key, cameras[1]) {
				return pdk.Errorf(abi.CodeInvalidCamera, "images."+c.Key, "unknown camera (want exterior_image_1_left and wrist_image_left)")
			}
		}
	}
	return nil
}

// Post implements pdk.Plugin as upstream's post-processing does: slice
// [:40, :17], un-normalise, compose relative eef (T_abs = T_state·T_rel)
// and joints onto the raw state, un-normalise the absolute gripper.
func (d *Droid) Post(in *pdk.PostInput) (*pdk.Actions, error) {
	if !d.ready {
		return nil, pdk.Errorf(abi.CodePluginError, "", "plugin not initialised")
	}
	if in.Horizon < Horizon || in.Dim < 17 || len(in.ActionPred) != in.Horizon*in.Dim {
		return nil, pdk.Errorf(abi.CodeInvalidAction, abi.TensorActionPred, "shape [%d, %d] (%d values), want at least [%d, 17]", in.Horizon, in.Dim, len(in.ActionPred), Horizon)
	}
	f64, err := isFloat64(in.StateDType)
	if err != nil {
		return nil, err
	}
	eg, _, jg, err := stateGroups(in.State)
	if err != nil {
		return nil, err
	}
	f32 := !f64
	eefState := eg.Values
	jointState := jg.Values

	// Reference frame: T_state from the raw state (rotation by
	// Gram-Schmidt in the state's dtype), round-tripped through a
	// quaternion as scipy does.
	var rs pdk.Mat3
	var ts [3]float64
	// Widths were validated (9 and 7): fixed-size conversions, unrolled
	// (each loop trip is a jump through Go's dispatch loop in a wasm guest).
	e, j := (*[9]float64)(eefState), (*[7]float64)(jointState)
	if f32 {
		s32 := [9]float32{float32(e[0]), float32(e[1]), float32(e[2]), float32(e[3]), float32(e[4]),
			float32(e[5]), float32(e[6]), float32(e[7]), float32(e[8])}
		rs = pdk.Rot6DToMat32(s32[3:])
		ts = [3]float64{float64(s32[0]), float64(s32[1]), float64(s32[2])}
	} else {
		rs = pdk.Rot6DToMat64(eefState[3:])
		ts = [3]float64{eefState[0], eefState[1], eefState[2]}
	}
	rs = pdk.QuatRoundTrip(&rs)

	js := *j
	if f32 {
		js = [7]float64{float64(float32(j[0])), float64(float32(j[1])), float64(float32(j[2])), float64(float32(j[3])),
			float64(float32(j[4])), float64(float32(j[5])), float64(float32(j[6]))}
	}
	d.steps(in.ActionPred, in.Dim, &rs, &ts, &js)
	return &d.out, nil
}

var _ pdk.Plugin = (*Droid)(nil)

// steps decodes the 40 steps of the chunk (row stride dim) into d.eef,
// d.grip and d.joint. The step body is unrolled by hand and the eef
// composition uses scalar locals: in wasm guests every branch
// is a trip through Go's block-dispatch loop (a loop back-edge also costs
// the host's stop check), every non-inlined call and memory round trip is
// dear. Column j of step k un-normalises as float64(fl32(clip(x)+1))·hs +
// lo with (lo, hs = (hi−lo)/2) precomputed in Init: the same value as
// pdk.UnnormalizeMinMax (halving is exact in both orders). Clipping runs
// first, over the chunk's bits (clipBits), into d.clipped.
//
// The eef composition performs exactly the floating-point operations of
// pdk.Rot6DToMat64, Mat3.Mul and Mat3.Apply, in the same order
// (TestStepMatchesHelpers); products are wrapped in explicit conversions
// so that no platform fuses a multiply-add. The reference passes every
// rotation through scipy's Rotation (from_matrix, as_matrix), which
// re-orthonormalises it. The relative rotation comes out of Gram-Schmidt
// and the composed one is a product of two orthonormal matrices, so on
// these both round trips change entries by a few float64 ulp only, below
// the float32 resolution of the output: steps skips them
// (TestStepMatchesRoundTrip bounds the difference; the state rotation,
// once per request, keeps its round trip in Post).
func (d *Droid) steps(pred []float32, dim int, rs *pdk.Mat3, ts *[3]float64, js *[7]float64) {
	for k := 0; k < Horizon; k++ {
		s := (*[17]uint32)(unsafe.Pointer((*[17]float32)(pred[k*dim:])))
		c := (*[17]uint32)(unsafe.Pointer((*[17]float32)(d.clipped[k*17:])))
		c[0], c[1], c[2], c[3] = clipBits(s[0]), clipBits(s[1]), clipBits(s[2]), clipBits(s[3])
		c[4], c[5], c[6], c[7] = clipBits(s[4]), clipBits(s[5]), clipBits(s[6]), clipBits(s[7])
		c[8], c[9], c[10], c[11] = clipBits(s[8]), clipBits(s[9]), clipBits(s[10]), clipBits(s[11])
		c[12], c[13], c[14], c[15] = clipBits(s[12]), clipBits(s[13]), clipBits(s[14]), clipBits(s[15])
		c[16] = clipBits(s[16])
	}
	// Two passes over the clipped chunk: the affine columns (xyz, gripper,
	// joints), then the rotations. Each loop body keeps fewer values live
	// than one combined body, and Go's wasm code spills less (≈5 % faster
	// in the guest, same operations).
	for k := 0; k < Horizon; k++ {
		x := (*[17]float32)(d.clipped[k*17:])
		b := (*[34]float64)(d.bounds[k*34:])
		px := float64(float64(x[0]+1)*b[1]) + b[0]
		py := float64(float64(x[1]+1)*b[3]) + b[2]
		pz := float64(float64(x[2]+1)*b[5]) + b[4]
		o := (*[9]float32)(d.eef[k*9:])
		o[0] = float32((float64(float64(rs[0]*px)+float64(rs[1]*py)) + float64(rs[2]*pz)) + ts[0])
		o[1] = float32((float64(float64(rs[3]*px)+float64(rs[4]*py)) + float64(rs[5]*pz)) + ts[1])
		o[2] = float32((float64(float64(rs[6]*px)+float64(rs[7]*py)) + float64(rs[8]*pz)) + ts[2])
		d.grip[k] = float32(float64(float64(x[9]+1)*b[19]) + b[18])
		jo := (*[7]float32)(d.joint[k*7:])
		jo[0] = float32(js[0] + (float64(float64(x[10]+1)*b[21]) + b[20]))
		jo[1] = float32(js[1] + (float64(float64(x[11]+1)*b[23]) + b[22]))
		jo[2] = float32(js[2] + (float64(float64(x[12]+1)*b[25]) + b[24]))
		jo[3] = float32(js[3] + (float64(float64(x[13]+1)*b[27]) + b[26]))
		jo[4] = float32(js[4] + (float64(float64(x[14]+1)*b[29]) + b[28]))
		jo[5] = float32(js[5] + (float64(float64(x[15]+1)*b[31]) + b[30]))
		jo[6] = float32(js[6] + (float64(float64(x[16]+1)*b[33]) + b[32]))
	}
	s0, s1, s2, s3, s4, s5 := rs[0], rs[1], rs[2], rs[3], rs[4], rs[5]
	for k := 0; k < Horizon; k++ {
		x := (*[17]float32)(d.clipped[k*17:])
		b := (*[34]float64)(d.bounds[k*34:])
		// Gram-Schmidt of the relative rot6d: rows u, v, w = u × v.
		a0 := float64(float64(x[3]+1)*b[7]) + b[6]
		a1 := float64(float64(x[4]+1)*b[9]) + b[8]
		a2 := float64(float64(x[5]+1)*b[11]) + b[10]
		na := math.Sqrt(float64(float64(a0*a0)+float64(a1*a1)) + float64(a2*a2))
		u0, u1, u2 := a0/na, a1/na, a2/na
		b0 := float64(float64(x[6]+1)*b[13]) + b[12]
		b1 := float64(float64(x[7]+1)*b[15]) + b[14]
		b2 := float64(float64(x[8]+1)*b[17]) + b[16]
		dot := float64(float64(u0*b0)+float64(u1*b1)) + float64(u2*b2)
		v0, v1, v2 := b0-float64(dot*u0), b1-float64(dot*u1), b2-float64(dot*u2)
		nb := math.Sqrt(float64(float64(v0*v0)+float64(v1*v1)) + float64(v2*v2))
		v0, v1, v2 = v0/nb, v1/nb, v2/nb
		w0 := float64(u1*v2) - float64(u2*v1)
		w1 := float64(u2*v0) - float64(u0*v2)
		w2 := float64(u0*v1) - float64(u1*v0)
		// Rows 0 and 1 of rs·[u; v; w].
		o := (*[9]float32)(d.eef[k*9:])
		o[3] = float32(float64(float64(s0*u0)+float64(s1*v0)) + float64(s2*w0))
		o[4] = float32(float64(float64(s0*u1)+float64(s1*v1)) + float64(s2*w1))
		o[5] = float32(float64(float64(s0*u2)+float64(s1*v2)) + float64(s2*w2))
		o[6] = float32(float64(float64(s3*u0)+float64(s4*v0)) + float64(s5*w0))
		o[7] = float32(float64(float64(s3*u1)+float64(s4*v1)) + float64(s5*w1))
		o[8] = float32(float64(float64(s3*u2)+float64(s4*v2)) + float64(s5*w2))
	}
}
