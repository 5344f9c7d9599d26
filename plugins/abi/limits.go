package abi

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// ActionLimit is one action group's safety limits, declared in the plugin
// manifest under action_limits.<group key> (ABI.md §10, "Action limits").
// Every list, when present, has one entry per dimension of the group
// (Description.Actions[i].Dim) and is in the physical units post returns.
// An absent list sets no limit of that kind; ±.inf in Min/Max leaves one
// dimension unbounded on that side.
//
// The values bound post's output, the decoded chunk [action_horizon, dim]:
//   - Min, Max: every value of dimension d lies in [Min[d], Max[d]].
//   - Gripper: [lo, hi], the gripper's range: every value of every
//     dimension lies in it (it marks the group as a gripper; with Min/Max
//     as well, the tighter bound applies).
//   - MaxStepDelta: |a[k][d] − a[k−1][d]| ≤ MaxStepDelta[d] for k ≥ 1.
//   - MaxJump: |a[0][d] − s[d]| ≤ MaxJump[d], s the request's state (the
//     last timestep sent). The state group is, for a relative group, the
//     one its description names (state_key: post composes the relative
//     action onto it, so this bounds the relative action's distance from
//     zero/identity at step 0); for an absolute group, JumpFrom (default:
//     the state group of the same key), which must have the group's width.
type ActionLimit struct {
	Min          []float64 `json:"min,omitempty" yaml:"min,omitempty"`
	Max          []float64 `json:"max,omitempty" yaml:"max,omitempty"`
	Gripper      []float64 `json:"gripper,omitempty" yaml:"gripper,omitempty"`
	MaxStepDelta []float64 `json:"max_step_delta,omitempty" yaml:"max_step_delta,omitempty"`
	MaxJump      []float64 `json:"max_jump,omitempty" yaml:"max_jump,omitempty"`
	// JumpFrom names the state group MaxJump compares step 0 with, for an
	// absolute group only; "" means the group's own key.
	JumpFrom string `json:"jump_from,omitempty" yaml:"jump_from,omitempty"`
}

// Validate checks one group's limits on their own (no description): the
// lists have one common length, no value is NaN, Min[d] ≤ Max[d], Gripper
// is a finite [lo, hi] with lo ≤ hi, step deltas and jumps are finite and
// > 0, and JumpFrom comes with MaxJump. Errors name the field, e.g.
// "action_limits.eef_9d.max_step_delta[3]: -1 is not > 0".
func (l *ActionLimit) Validate(group string) error {
	p := "action_limits." + group
	n := -1
	for _, f := range []struct {
		name string
		v    []float64
	}{{"min", l.Min}, {"max", l.Max}, {"max_step_delta", l.MaxStepDelta}, {"max_jump", l.MaxJump}} {
		if f.v == nil {
			continue
		}
		if len(f.v) == 0 {
			return fmt.Errorf("%s.%s: empty (omit the key for no limit)", p, f.name)
		}
		if n >= 0 && len(f.v) != n {
			return fmt.Errorf("%s.%s: %d values, the group's other limits have %d", p, f.name, len(f.v), n)
		}
		n = len(f.v)
		for d, x := range f.v {
			switch {
			case math.IsNaN(x):
				return fmt.Errorf("%s.%s[%d]: NaN", p, f.name, d)
			case f.name == "min" && math.IsInf(x, 1), f.name == "max" && math.IsInf(x, -1):
				return fmt.Errorf("%s.%s[%d]: %v admits no value", p, f.name, d, x)
			case (f.name == "max_step_delta" || f.name == "max_jump") && !(x > 0 && !math.IsInf(x, 0)):
				return fmt.Errorf("%s.%s[%d]: %v is not a finite value > 0", p, f.name, d, x)
			}
		}
	}
	if l.Min != nil && l.Max != nil {
		for d := range l.Min {
			if l.Min[d] > l.Max[d] {
				return fmt.Errorf("%s.min[%d]: %v is above max[%d] %v", p, d, l.Min[d], d, l.Max[d])
			}
		}
	}
	if l.Gripper != nil {
		g := l.Gripper
		if len(g) != 2 {
			return fmt.Errorf("%s.gripper: %d values, want [lo, hi]", p, len(g))
		}
		if math.IsNaN(g[0]) || math.IsNaN(g[1]) || math.IsInf(g[0], 0) || math.IsInf(g[1], 0) || g[0] > g[1] {
			return fmt.Errorf("%s.gripper: %v is not a finite range [lo, hi] with lo ≤ hi", p, g)
		}
	}
	if l.JumpFrom != "" && l.MaxJump == nil {
		return fmt.Errorf("%s.jump_from: %q without max_jump", p, l.JumpFrom)
	}
	if n < 0 && l.Gripper == nil {
		return fmt.Errorf("%s: no limit declared (want min, max, gripper, max_step_delta or max_jump)", p)
	}
	return nil
}

// Width returns the number of dimensions the limits' lists have, or 0 when
// only Gripper is set.
func (l *ActionLimit) Width() int {
	for _, v := range [][]float64{l.Min, l.Max, l.MaxStepDelta, l.MaxJump} {
		if v != nil {
			return len(v)
		}
	}
	return 0
}

// JumpState returns the state group MaxJump of action group g compares
// step 0 with (see ActionLimit), or "" when l declares no MaxJump.
func (l *ActionLimit) JumpState(g *ActionGroup) string {
	switch {
	case l.MaxJump == nil:
		return ""
	case g.Rep == RepRelative:
		return g.StateKey
	case l.JumpFrom != "":
		return l.JumpFrom
	}
	return g.Key
}

// CheckActionLimits checks limits against a description: every key is an
// action group, each list has the group's width, and a MaxJump's state
// group exists with the group's width (JumpFrom is refused on a relative
// group: its reference is the description's state_key). Keys are checked
// in sorted order, so the error reported is stable.
func CheckActionLimits(d *Description, limits map[string]ActionLimit) error {
	for _, k := range slices.Sorted(maps.Keys(limits)) {
		l := limits[k]
		if err := l.Validate(k); err != nil {
			return err
		}
		var g *ActionGroup
		for i := range d.Actions {
			if d.Actions[i].Key == k {
				g = &d.Actions[i]
			}
		}
		if g == nil {
			return fmt.Errorf("action_limits.%s: no such action group (the description has %v)", k, actionKeys(d))
		}
		if w := l.Width(); w != 0 && w != g.Dim {
			return fmt.Errorf("action_limits.%s: %d values per limit, the group has %d dimensions", k, w, g.Dim)
		}
		if g.Rep == RepRelative && l.JumpFrom != "" {
			return fmt.Errorf("action_limits.%s.jump_from: %q on a relative group (its max_jump compares with its state_key %q)", k, l.JumpFrom, g.StateKey)
		}
		if s := l.JumpState(g); s != "" {
			dim := -1
			for _, sg := range d.State {
				if sg.Key == s {
					dim = sg.Dim
				}
			}
			switch {
			case dim < 0:
				return fmt.Errorf("action_limits.%s.max_jump: state group %q does not exist (set jump_from, or drop max_jump)", k, s)
			case dim != g.Dim:
				return fmt.Errorf("action_limits.%s.max_jump: state group %q has %d dimensions, the action group %d (set jump_from, or drop max_jump)", k, s, dim, g.Dim)
			}
		}
	}
	return nil
}

func actionKeys(d *Description) []string {
	ks := make([]string, len(d.Actions))
	for i, g := range d.Actions {
		ks[i] = g.Key
	}
	return ks
}
