package main

import (
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
)

// Describe is the libero_sim contract, as upstream N1.7's modality config
// for the tag (Isaac-GR00T gr00t/configs/data/embodiment_configs.py,
// "libero_sim"): cameras image and wrist_image at delta 0; state x, y, z,
// roll, pitch, yaw (1 each; roll/pitch/yaw are the client's axis-angle
// values) and gripper (2 finger positions); the same seven action keys,
// all absolute (the config has no action_configs), gripper of width 1;
// 16 steps. LIBERO clients send 256×256 frames (already rotated by 180°
// and with the gripper command binarised on their side: the policy does
// neither).
func Describe() abi.Description {
	d := abi.Description{
		Name: Name, Version: Version, ABI: abi.Version,
		Embodiment: Tag, ProjectorSlot: ProjectorSlot,
		Language:      abi.Language{Key: "annotation.human.action.task_description", MinChars: 1, MaxChars: 2000},
		ActionHorizon: Horizon, MaxStateDim: 132, MaxActionDim: 132,
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
	for _, c := range []string{"image", "wrist_image"} {
		d.Cameras = append(d.Cameras, abi.Camera{Key: c, DeltaIndices: []int{0}, Height: 256, Width: 256})
		d.Layout.FrameOrder = append(d.Layout.FrameOrder, c+"@0")
	}
	for _, k := range []string{"x", "y", "z", "roll", "pitch", "yaw", "gripper"} {
		dim := 1
		if k == "gripper" {
			dim = 2
		}
		d.State = append(d.State, abi.StateGroup{Key: k, Dim: dim, DeltaIndices: []int{0}})
		d.Actions = append(d.Actions, abi.ActionGroup{Key: k, Dim: 1, Rep: abi.RepAbsolute, Type: abi.TypeNonEEF, Format: abi.FormatDefault})
	}
	return d
}

// New returns an uninitialised plugin: a pdk.Table over Describe (min/max
// state normalisation, absolute un-normalisation of every action group).
func New() *pdk.Table { return pdk.NewTable(Describe()) }
