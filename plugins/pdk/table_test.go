package pdk

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// tableDesc: one camera, a 2-wide joint state decoded relative, a 1-wide
// gripper decoded absolute, horizon 3.
func tableDesc() abi.Description {
	return abi.Description{
		Name: "t", Version: "0.1.0", ABI: abi.Version, Embodiment: "test_table", ProjectorSlot: 10,
		Cameras:  []abi.Camera{{Key: "cam", DeltaIndices: []int{-1, 0}, Height: 64, Width: 64}},
		State:    []abi.StateGroup{{Key: "joints", Dim: 2}, {Key: "grip", Dim: 1}},
		Actions:  []abi.ActionGroup{{Key: "joints", Dim: 2, Rep: abi.RepRelative, Type: abi.TypeNonEEF, Format: abi.FormatDefault, StateKey: "joints"}, {Key: "grip", Dim: 1, Rep: abi.RepAbsolute, Type: abi.TypeNonEEF, Format: abi.FormatDefault}},
		Language: abi.Language{Key: "task", MinChars: 1, MaxChars: 10}, ActionHorizon: 3, MaxStateDim: 8, MaxActionDim: 8,
		Layout: abi.Layout{FrameSide: [2]int{16, 128}, FrameAspect: [2]float64{0.9, 1.1}},
	}
}

const tableStats = `{"embodiment": "test_table", "processor": {"use_percentiles": true, "clip_outliers": true, "use_relative_action": true, "max_state_dim": 8},
 "statistics": {
  "state": {"joints": {"min": [-2, -2], "max": [2, 2], "q01": [-1, 0], "q99": [1, 4]}, "grip": {"min": [0], "max": [1], "q01": [0.5], "q99": [0.5]}},
  "action": {"grip": {"min": [0], "max": [1], "q01": [0.1], "q99": [0.9]}},
  "relative_action": {"joints": {"min": [[-1, -2], [-3, -4], [-5, -6], [0, 0]], "max": [[1, 2], [3, 4], [5, 6], [0, 0]], "q01": [[0, 0], [0, 0], [0, 0], [0, 0]], "q99": [[0, 0], [0, 0], [0, 0], [0, 0]]}}}}`

func newTable(t *testing.T) *Table {
	var cfg abi.InitConfig
	require.NoError(t, json.Unmarshal([]byte(tableStats), &cfg))
	tb := NewTable(tableDesc())
	require.NoError(t, tb.Init(&cfg))
	return tb
}

func tableObs() *Observation {
	return &Observation{Instruction: "go", StateDType: "float32",
		Cameras: []CameraInput{{Key: "cam", Frames: 2, Height: 64, Width: 64, Channels: 3}},
		State:   []StateInput{{Key: "joints", Dim: 2, Values: []float64{0.5, 3}}, {Key: "grip", Dim: 1, Values: []float64{0.7}}}}
}

func TestTablePrePost(t *testing.T) {
	tb := newTable(t)
	st, err := tb.Pre(tableObs())
	require.NoError(t, err)
	require.Len(t, st, 8)
	// q01/q99 bounds: joints (0.5 − −1)/2 → 0.75 → 0.5; (3 − 0)/4 → 0.5;
	// grip bounds numpy-close → 0; padding 0.
	assert.Equal(t, []float32{0.5, 0.5, 0, 0, 0, 0, 0, 0}, st)

	pred := make([]float32, 4*8) // the model's chunk: 4 steps × 8
	for k := 0; k < 4; k++ {
		pred[k*8+0], pred[k*8+1], pred[k*8+2] = 1, -1, 0
	}
	acts, err := tb.Post(&PostInput{ActionPred: pred, Horizon: 4, Dim: 8, StateDType: "float32",
		State: []StateInput{{Key: "joints", Dim: 2, Values: []float64{0.5, 3}}, {Key: "grip", Dim: 1, Values: []float64{0.7}}}})
	require.NoError(t, err)
	require.Len(t, acts.Groups, 2)
	// Relative: state + per-step min/max (not q01/q99): step k maps +1 to
	// max[k] and −1 to min[k].
	assert.Equal(t, []float32{0.5 + 1, 3 - 2, 0.5 + 3, 3 - 4, 0.5 + 5, 3 - 6}, acts.Groups[0].Values)
	// Absolute: 0 → the midpoint of q01/q99.
	for _, v := range acts.Groups[1].Values {
		assert.InDelta(t, 0.5, v, 1e-7)
	}
	assert.Len(t, acts.Groups[1].Values, 3, "the embodiment's horizon, not the model's")
}

func TestTableErrors(t *testing.T) {
	tb := newTable(t)
	for _, tc := range []struct {
		name, code, field string
		edit              func(o *Observation)
	}{
		{"missing camera", abi.CodeInvalidCamera, "images.cam", func(o *Observation) { o.Cameras = nil }},
		{"frames", abi.CodeInvalidCamera, "images.cam", func(o *Observation) { o.Cameras[0].Frames = 1 }},
		{"side", abi.CodeInvalidCamera, "images.cam", func(o *Observation) { o.Cameras[0].Width, o.Cameras[0].Height = 256, 256 }},
		{"aspect", abi.CodeInvalidCamera, "images.cam", func(o *Observation) { o.Cameras[0].Width = 100 }},
		{"unknown camera", abi.CodeInvalidCamera, "images.other", func(o *Observation) {
			o.Cameras = append(o.Cameras, CameraInput{Key: "other", Frames: 1, Height: 64, Width: 64, Channels: 3})
		}},
		{"missing state", abi.CodeInvalidState, "state.grip", func(o *Observation) { o.State = o.State[:1] }},
		{"width", abi.CodeInvalidState, "state.joints", func(o *Observation) { o.State[0].Values = []float64{1} }},
		{"unknown state", abi.CodeInvalidState, "state.x", func(o *Observation) { o.State = append(o.State, StateInput{Key: "x", Values: []float64{1}}) }},
		{"instruction", abi.CodeInvalidInstruction, "instruction", func(o *Observation) { o.Instruction = "far too long!" }},
		{"embodiment", abi.CodeInvalidEmbodiment, "embodiment", func(o *Observation) { o.Embodiment = "other" }},
	} {
		o := tableObs()
		tc.edit(o)
		_, err := tb.Pre(o)
		var e *Error
		require.ErrorAs(t, err, &e, tc.name)
		assert.Equal(t, tc.code, e.Code, tc.name)
		assert.Equal(t, tc.field, e.Field, tc.name)
	}
	_, err := tb.Post(&PostInput{ActionPred: make([]float32, 8), Horizon: 1, Dim: 8})
	require.Error(t, err)

	// Init refuses statistics that do not fit the description.
	var cfg abi.InitConfig
	require.NoError(t, json.Unmarshal([]byte(tableStats), &cfg))
	delete(cfg.Statistics["relative_action"], "joints")
	require.ErrorContains(t, NewTable(tableDesc()).Init(&cfg), "statistics.relative_action.joints")
	require.NoError(t, json.Unmarshal([]byte(tableStats), &cfg))
	cfg.Processor.UseRelativeAction = false
	require.ErrorContains(t, NewTable(tableDesc()).Init(&cfg), "use_relative_action")

	// Descriptions a Table cannot decode panic at construction.
	d := tableDesc()
	d.Actions[1].Type = abi.TypeEEF
	assert.PanicsWithValue(t, "pdk: NewTable: action group grip is eef/default: a Table decodes NON_EEF/DEFAULT groups only", func() { NewTable(d) })
	d = tableDesc()
	d.Actions[0].StateKey = "grip"
	assert.Panics(t, func() { NewTable(d) })
}
