package abi

import (
	"math"
	"testing"
)

func limitsDesc() *Description {
	return &Description{
		State: []StateGroup{{Key: "eef", Dim: 3}, {Key: "joints", Dim: 2}, {Key: "grip2", Dim: 2}, {Key: "g1", Dim: 1}},
		Actions: []ActionGroup{
			{Key: "eef", Dim: 3, Rep: RepRelative, StateKey: "eef"},
			{Key: "joints", Dim: 2, Rep: RepAbsolute},
			{Key: "grip", Dim: 1, Rep: RepAbsolute},
		},
	}
}

func TestCheckActionLimits(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name string
		l    map[string]ActionLimit
		want string // "" = valid
	}{
		{"valid", map[string]ActionLimit{
			"eef":    {Min: []float64{-1, -1, 0}, Max: []float64{1, 1, inf}, MaxStepDelta: []float64{.1, .1, .1}, MaxJump: []float64{.2, .2, .2}},
			"joints": {MaxJump: []float64{1, 1}},
			"grip":   {Gripper: []float64{0, 1}, MaxJump: []float64{1}, JumpFrom: "g1"},
		}, ""},
		{"unknown group", map[string]ActionLimit{"arm": {Gripper: []float64{0, 1}}}, "action_limits.arm: no such action group (the description has [eef joints grip])"},
		{"width", map[string]ActionLimit{"eef": {Min: []float64{0, 0}}}, "action_limits.eef: 2 values per limit, the group has 3 dimensions"},
		{"lengths differ", map[string]ActionLimit{"joints": {Min: []float64{0, 0}, Max: []float64{1}}}, "action_limits.joints.max: 1 values, the group's other limits have 2"},
		{"empty", map[string]ActionLimit{"joints": {Min: []float64{}}}, "action_limits.joints.min: empty (omit the key for no limit)"},
		{"nothing", map[string]ActionLimit{"joints": {}}, "action_limits.joints: no limit declared"},
		{"min +inf", map[string]ActionLimit{"joints": {Min: []float64{0, inf}}}, "action_limits.joints.min[1]: +Inf admits no value"},
		{"max -inf", map[string]ActionLimit{"joints": {Max: []float64{-inf, 0}}}, "action_limits.joints.max[0]: -Inf admits no value"},
		{"nan", map[string]ActionLimit{"joints": {Max: []float64{0, math.NaN()}}}, "action_limits.joints.max[1]: NaN"},
		{"min above max", map[string]ActionLimit{"joints": {Min: []float64{0, 2}, Max: []float64{1, 1}}}, "action_limits.joints.min[1]: 2 is above max[1] 1"},
		{"step delta 0", map[string]ActionLimit{"joints": {MaxStepDelta: []float64{1, 0}}}, "action_limits.joints.max_step_delta[1]: 0 is not a finite value > 0"},
		{"jump inf", map[string]ActionLimit{"joints": {MaxJump: []float64{inf, 1}}}, "action_limits.joints.max_jump[0]: +Inf is not a finite value > 0"},
		{"gripper shape", map[string]ActionLimit{"grip": {Gripper: []float64{0}}}, "action_limits.grip.gripper: 1 values, want [lo, hi]"},
		{"gripper order", map[string]ActionLimit{"grip": {Gripper: []float64{1, 0}}}, "action_limits.grip.gripper: [1 0] is not a finite range"},
		{"jump_from alone", map[string]ActionLimit{"grip": {Gripper: []float64{0, 1}, JumpFrom: "g1"}}, `action_limits.grip.jump_from: "g1" without max_jump`},
		{"jump_from relative", map[string]ActionLimit{"eef": {MaxJump: []float64{1, 1, 1}, JumpFrom: "joints"}}, `action_limits.eef.jump_from: "joints" on a relative group`},
		{"jump state missing", map[string]ActionLimit{"grip": {MaxJump: []float64{1}}}, `action_limits.grip.max_jump: state group "grip" does not exist`},
		{"jump state width", map[string]ActionLimit{"grip": {MaxJump: []float64{1}, JumpFrom: "grip2"}}, `action_limits.grip.max_jump: state group "grip2" has 2 dimensions, the action group 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckActionLimits(limitsDesc(), tt.l)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !startsWith(err.Error(), tt.want)):
				t.Fatalf("error %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestJumpState(t *testing.T) {
	d := limitsDesc()
	j := []float64{1}
	for _, tt := range []struct {
		l    ActionLimit
		g    ActionGroup
		want string
	}{
		{ActionLimit{}, d.Actions[0], ""},
		{ActionLimit{MaxJump: j}, d.Actions[0], "eef"},
		{ActionLimit{MaxJump: j}, d.Actions[1], "joints"},
		{ActionLimit{MaxJump: j, JumpFrom: "g1"}, d.Actions[2], "g1"},
	} {
		if got := tt.l.JumpState(&tt.g); got != tt.want {
			t.Errorf("JumpState(%+v, %s) = %q, want %q", tt.l, tt.g.Key, got, tt.want)
		}
	}
}

func startsWith(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
