package httpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/service"
)

// gateLimits are the fake DROID's limits in the gate tests: binary
// fractions, so that "clipped exactly to the limit" is an exact float32.
// eef_9d has bounds, a step delta and a jump (its own state group, which
// the requests set to zero); gripper_position a gripper range; the joints
// bounds only.
func gateLimits() map[string]abi.ActionLimit {
	nine := func(x float64) []float64 {
		v := make([]float64, 9)
		for i := range v {
			v[i] = x
		}
		return v
	}
	seven := func(x float64) []float64 { return nine(x)[:7] }
	return map[string]abi.ActionLimit{
		"eef_9d":           {Min: nine(-1), Max: nine(1), MaxStepDelta: nine(0.5), MaxJump: nine(0.25)},
		"gripper_position": {Gripper: []float64{0, 1}},
		"joint_position":   {Min: seven(-2), Max: seven(2)},
	}
}

// Columns of the fake's action_pred per group (fakeDecode slices the
// groups in order: eef_9d 0–8, gripper 9, joints 10–16).
var gateCol = map[string]int{"eef_9d": 0, "gripper_position": 9, "joint_position": 10}

// plant is one value put into the chunk through the request's noise (the
// fakes' actions are the noise plus the group's first state value, zero
// here).
type plant struct {
	group     string
	step, dim int
	value     float64
}

// gateBody is the DROID demo request with zero state and explicit noise:
// zero, but for the planted values.
func gateBody(t *testing.T, plants ...plant) []byte {
	m := demoRequest(t)
	m["state"] = map[string]any{"eef_9d": make([]float64, 9), "gripper_position": []float64{0}, "joint_position": make([]float64, 7)}
	noise := make([][]float64, testHorizon)
	for i := range noise {
		noise[i] = make([]float64, testActionDim)
	}
	for _, p := range plants {
		noise[p.step][gateCol[p.group]+p.dim] = p.value
	}
	m["noise"] = noise
	return mustJSON(t, m)
}

type gateAnswer struct {
	Actions map[string][][]float64 `json:"actions"`
	Safety  *service.SafetyReport  `json:"safety"`
	Error   string                 `json:"error"`
	Code    string                 `json:"code"`
	Field   string                 `json:"field"`
}

func gateFixture(t *testing.T, policy string) *fixture {
	f := newFixture(t, true, func(c *config.Config, _ *fixtureOptions, f *fixture) {
		c.Safety.Policy = policy
		f.binding.ActionLimits = gateLimits()
	})
	t.Cleanup(func() { _ = f.shutdown(context.Background()) })
	return f
}

func (f *fixture) gatePredict(t *testing.T, body []byte) (int, gateAnswer) {
	resp, b := f.do(t, "POST", "/predict", body, nil)
	var a gateAnswer
	require.NoError(t, json.Unmarshal(b, &a), string(b))
	return resp.StatusCode, a
}

// The gate in the pipeline: a chunk inside every limit passes every
// policy bit-identical to the gate off; each planted kind of violation is
// refused under reject (422 unsafe_action naming the value) and clipped
// exactly to its limit under clamp (the response says what changed); off
// changes nothing.
func TestSafetyGatePolicies(t *testing.T) {
	fx := map[string]*fixture{}
	for _, p := range []string{"off", "reject", "clamp"} {
		fx[p] = gateFixture(t, p)
	}

	inside := gateBody(t, plant{"eef_9d", 0, 1, 0.2}, plant{"eef_9d", 1, 1, 0.5}, plant{"gripper_position", 5, 0, 1},
		plant{"joint_position", 9, 6, -2})
	st, off := fx["off"].gatePredict(t, inside)
	require.Equal(t, 200, st, off.Error)
	assert.Nil(t, off.Safety, "no safety member with the gate off")
	for _, p := range []string{"reject", "clamp"} {
		st, a := fx[p].gatePredict(t, inside)
		require.Equal(t, 200, st, a.Error)
		assert.Equal(t, bitsOf(off.Actions), bitsOf(a.Actions), "%s: a chunk inside every limit is untouched", p)
		require.NotNil(t, a.Safety, p)
		assert.Equal(t, service.SafetyReport{Policy: p}, *a.Safety, p)
	}

	for _, tc := range []struct {
		kind    string
		plant   plant
		limit   float64
		value   float64 // as reported: the value, or the change / distance
		message string
	}{
		{"min", plant{"joint_position", 5, 3, -3}, -2, -3, "actions.joint_position[5][3]: value -3 is below min -2"},
		{"max", plant{"joint_position", 7, 0, 2.5}, 2, 2.5, "actions.joint_position[7][0]: value 2.5 is above max 2"},
		{"gripper", plant{"gripper_position", 3, 0, 1.5}, 1, 1.5, "actions.gripper_position[3][0]: value 1.5 is outside the gripper range (limit 1)"},
		{"max_step_delta", plant{"eef_9d", 10, 2, 0.75}, 0.5, 0.75, "actions.eef_9d[10][2]: change 0.75 from step 9 exceeds max_step_delta 0.5"},
		{"max_jump", plant{"eef_9d", 0, 4, -0.375}, 0.25, -0.375, "actions.eef_9d[0][4]: distance -0.375 from the state exceeds max_jump 0.25"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			body := gateBody(t, tc.plant)
			st, off := fx["off"].gatePredict(t, body)
			require.Equal(t, 200, st, off.Error)
			assert.Nil(t, off.Safety)
			assert.Equal(t, tc.plant.value, off.Actions[tc.plant.group][tc.plant.step][tc.plant.dim], "off leaves the violation in place")

			st, rej := fx["reject"].gatePredict(t, body)
			require.Equal(t, 422, st)
			assert.Equal(t, service.CodeUnsafeAction, rej.Code)
			assert.Equal(t, tc.plant.fieldPath(), rej.Field)
			assert.Equal(t, "safety: unsafe action: "+tc.message, rej.Error)

			st, cl := fx["clamp"].gatePredict(t, body)
			require.Equal(t, 200, st, cl.Error)
			want := math.Copysign(tc.limit, tc.plant.value)
			if tc.kind == "min" || tc.kind == "max" || tc.kind == "gripper" {
				want = tc.limit
			}
			assert.Equal(t, want, cl.Actions[tc.plant.group][tc.plant.step][tc.plant.dim], "clipped exactly to the limit")
			require.NotNil(t, cl.Safety)
			assert.Equal(t, "clamp", cl.Safety.Policy)
			assert.Equal(t, 1, cl.Safety.Clamped)
			assert.Equal(t, &service.SafetyViolation{Group: tc.plant.group, Step: tc.plant.step, Dim: tc.plant.dim, Kind: tc.kind,
				Limit: tc.limit, Value: tc.value}, cl.Safety.First)
			// Only the planted value changed.
			off.Actions[tc.plant.group][tc.plant.step][tc.plant.dim] = want
			assert.Equal(t, bitsOf(off.Actions), bitsOf(cl.Actions))
		})
	}
}

func (p plant) fieldPath() string { return fmt.Sprintf("actions.%s[%d][%d]", p.group, p.step, p.dim) }

// bitsOf is the actions' float64 bit patterns, for bit-identical checks.
func bitsOf(a map[string][][]float64) map[string][][]uint64 {
	out := map[string][][]uint64{}
	for k, rows := range a {
		for _, r := range rows {
			br := make([]uint64, len(r))
			for i, x := range r {
				br[i] = math.Float64bits(x)
			}
			out[k] = append(out[k], br)
		}
	}
	return out
}

// safety.limits_file replaces the plugin's limits of the groups it lists:
// here the joints' max tightened from 2 to 1, the other groups unchanged.
func TestSafetyLimitsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "limits.yaml")
	require.NoError(t, os.WriteFile(file, []byte(droidInfo.Name+":\n  joint_position:\n    max: [1, 1, 1, 1, 1, 1, 1]\n"), 0o600))
	f := newFixture(t, true, func(c *config.Config, _ *fixtureOptions, f *fixture) {
		c.Safety.Policy = "reject"
		c.Safety.LimitsFile = file
		f.binding.ActionLimits = gateLimits()
	})
	t.Cleanup(func() { _ = f.shutdown(context.Background()) })
	st, a := f.gatePredict(t, gateBody(t, plant{"joint_position", 2, 1, 1.5}))
	require.Equal(t, 422, st)
	assert.Equal(t, "safety: unsafe action: actions.joint_position[2][1]: value 1.5 is above max 1", a.Error)
	st, a = f.gatePredict(t, gateBody(t, plant{"joint_position", 2, 1, -3}))
	require.Equal(t, 200, st, "the override replaced the group's min too: %s", a.Error)
	st, a = f.gatePredict(t, gateBody(t, plant{"gripper_position", 2, 0, 1.5}))
	require.Equal(t, 422, st, "other groups keep the plugin's limits")
	assert.Equal(t, "actions.gripper_position[2][0]", a.Field)
}
