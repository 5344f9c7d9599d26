package pdk

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

// tableChunk is a [4, 8] chunk for tableDesc: joints moving by δ = (0.4,
// −0.5) per row relative to the state (inside every step's bounds), the
// gripper's normalised values (row 1's beyond 1: Post clips it), padding.
func tableChunk() []float32 {
	rel := [][2]float64{{-1, 1}, {-2, 2}, {-3, 3}, {-4, 4}, {-5, 5}, {-6, 6}} // step k: joint j bounds at rel[2k+j]
	pred := make([]float32, 4*8)
	for k := 0; k < 3; k++ {
		for j, d := range []float64{0.4, -0.5} {
			lo, hi := rel[2*k+j][0], rel[2*k+j][1]
			pred[k*8+j] = float32(2*(float64(k+1)*d-lo)/(hi-lo) - 1)
		}
	}
	copy(pred[2:], []float32{0.3, 9, 9, 9, 9, 9})
	pred[8+2], pred[16+2] = 1.5, -0.2
	for i := 3; i < 32; i += 8 {
		pred[i] = float32(i) // padded columns of every row
	}
	return pred
}

func tableState(j0, j1, g float64) []StateInput {
	return []StateInput{{Key: "joints", Dim: 2, Values: []float64{j0, j1}}, {Key: "grip", Dim: 1, Values: []float64{g}}}
}

func TestTableReencodeProperty(t *testing.T) {
	tb := newTable(t)
	pred := tableChunk()
	for _, dtype := range []string{"float32", "float64"} {
		prev := tableState(0.5, 3, 0.7)
		acts, err := tb.Post(&PostInput{ActionPred: pred, Horizon: 4, Dim: 8, StateDType: dtype, State: prev})
		require.NoError(t, err)
		oldJ := append([]float32(nil), acts.Groups[0].Values...)
		oldG := append([]float32(nil), acts.Groups[1].Values...)
		for shift := 0; shift < 3; shift++ {
			t.Run(fmt.Sprintf("%s/shift=%d", dtype, shift), func(t *testing.T) {
				now := prev
				if shift > 0 { // the state reached after `shift` rows
					now = tableState(float64(oldJ[(shift-1)*2]), float64(oldJ[(shift-1)*2+1]), 0.1)
				}
				out, err := tb.Reencode(&ReencodeInput{StateDType: dtype, ActionPred: pred, Horizon: 4, Dim: 8, Shift: shift, PrevState: prev, State: now})
				require.NoError(t, err)
				n := 3 - shift
				require.Len(t, out, n*8)
				for i := 0; i < n; i++ {
					k := shift + i
					assert.Equal(t, pred[k*8+3:k*8+8], out[i*8+3:i*8+8], "row %d: padded columns copied", i)
					assert.Equal(t, ClipUnit(pred[k*8+2]), out[i*8+2], "row %d: the absolute gripper is its clipped value", i)
				}
				pad := make([]float32, 4*8)
				copy(pad, out)
				acts, err := tb.Post(&PostInput{ActionPred: pad, Horizon: 4, Dim: 8, StateDType: dtype, State: now})
				require.NoError(t, err)
				for i := 0; i < n; i++ {
					k := shift + i
					for j := 0; j < 2; j++ {
						assert.InDelta(t, oldJ[k*2+j], acts.Groups[0].Values[i*2+j], 1e-5, "joints row %d col %d", i, j)
					}
					assert.Equal(t, oldG[k], acts.Groups[1].Values[i], "grip row %d", i)
				}
			})
		}
	}
}

func TestTableReencodeErrors(t *testing.T) {
	tb := newTable(t)
	good := func() *ReencodeInput {
		return &ReencodeInput{StateDType: "float32", ActionPred: tableChunk(), Horizon: 4, Dim: 8, Shift: 1,
			PrevState: tableState(0, 0, 0), State: tableState(1, 1, 1)}
	}
	for _, tc := range []struct {
		name, field, msg string
		edit             func(*ReencodeInput)
	}{
		{"shift at horizon", abi.AttrShift, "3 is outside 0..2", func(in *ReencodeInput) { in.Shift = 3 }},
		{"negative shift", abi.AttrShift, "-1 is outside 0..2", func(in *ReencodeInput) { in.Shift = -1 }},
		{"short chunk", abi.TensorActionPred, "want at least [3, 3]", func(in *ReencodeInput) { in.Horizon, in.ActionPred = 2, in.ActionPred[:16] }},
		{"dtype", "state_dtype", `"bf16"`, func(in *ReencodeInput) { in.StateDType = "bf16" }},
		{"prev state missing", "prev_state.joints", "needs 2 finite values", func(in *ReencodeInput) { in.PrevState = in.PrevState[1:] }},
		{"state not finite", "state.joints", "needs 2 finite values", func(in *ReencodeInput) { in.State[0].Values = []float64{math.NaN(), 0} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := good()
			tc.edit(in)
			_, err := tb.Reencode(in)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.field, e.Field)
			assert.Contains(t, e.Message, tc.msg)
		})
	}
	_, err := NewTable(tableDesc()).Reencode(good())
	require.ErrorContains(t, err, "not initialised")
}

// TestRunnerReencode drives gw_reencode's byte path: the feature in the
// description, the envelope in and out, and the errors.
func TestRunnerReencode(t *testing.T) {
	tb := newTable(t)
	r := NewRunner(tb)
	var d abi.Description
	require.NoError(t, json.Unmarshal(r.Describe()[abi.ResultHeaderSize:], &d))
	assert.Equal(t, []string{abi.FeatureReencode}, d.Features)
	assert.Nil(t, tb.Describe().Features, "the Table's own description is unchanged")

	pred := tableChunk()
	build := func(shift string, prev, cur []float64) []byte {
		var b envelope.Builder
		b.Attr(abi.AttrStateDType, "float64")
		if shift != "" {
			b.Attr(abi.AttrShift, shift)
		}
		b.Float32(abi.TensorActionPred, []int64{4, 8}, pred)
		b.Float64("state.joints", []int64{2}, cur)
		b.Float64("state.grip", []int64{1}, []float64{0})
		b.Float64("prev_state.joints", []int64{2}, prev)
		b.Float64("prev_state.grip", []int64{1}, []float64{0})
		in, err := b.Bytes()
		require.NoError(t, err)
		return in
	}
	st, e := decodeResult(t, r.Reencode(build("1", []float64{0.5, 3}, []float64{0.9, 2.5})))
	require.Equal(t, abi.StatusOK, st)
	got := e.Tensor(abi.TensorActionPred)
	require.NotNil(t, got)
	assert.Equal(t, []int64{2, 8}, got.Dims)
	v, err := got.Float32s()
	require.NoError(t, err)
	want, err := tb.Reencode(&ReencodeInput{StateDType: "float64", ActionPred: pred, Horizon: 4, Dim: 8, Shift: 1,
		PrevState: tableState(0.5, 3, 0), State: tableState(0.9, 2.5, 0)})
	require.NoError(t, err)
	assert.Equal(t, want, v)

	for _, tc := range []struct {
		name, shift, field string
		status             uint32
	}{
		{"no shift", "", abi.AttrShift, abi.StatusInvalid},
		{"shift not a number", "x", abi.AttrShift, abi.StatusInvalid},
		{"shift negative", "-2", abi.AttrShift, abi.StatusInvalid},
		{"shift past the horizon", "3", abi.AttrShift, abi.StatusInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, e := decodeResult(t, r.Reencode(build(tc.shift, []float64{0, 0}, []float64{0, 0})))
			assert.Equal(t, tc.status, st)
			field, _ := e.Attr(abi.AttrField)
			assert.Equal(t, tc.field, field)
		})
	}
	res := NewRunner(&fake{}).Reencode(build("1", []float64{0, 0}, []float64{0, 0}))
	assert.Equal(t, abi.StatusPluginError, binary.LittleEndian.Uint32(res), "a plugin without Reencoder")
}
