// Package safety is the gate every decoded action chunk passes after the
// plugin's post stage (issue 28): it checks the chunk against the limits
// the embodiment's plugin declares (abi.ActionLimit, the manifest's
// action_limits) and, per policy, rejects the chunk, clamps it into the
// limits, or lets it through unchecked.
//
// A Gate is built once per plugin (New) and is immutable afterwards: any
// number of goroutines may call Check at once. Check works on the chunk in
// place and allocates nothing unless it finds a violation.
//
// The limits, per action group and dimension d, on the chunk a[k][d]
// (k = 0 … horizon−1) and the request's state s (its last timestep):
//
//	bounds          lo[d] ≤ a[k][d] ≤ hi[d]   (min/max ∩ the gripper range)
//	max_step_delta  |a[k][d] − a[k−1][d]| ≤ L[d]   for k ≥ 1
//	max_jump        |a[0][d] − s[d]| ≤ J[d]
//	non-finite      a[k][d] is neither NaN nor ±Inf (always checked)
//
// Values are float32 (the actions' dtype); comparisons are exact: a bound
// is compared as the nearest float32 on its inner side (so a float32 is
// outside the float32 bound exactly when it is outside the declared
// float64 one), differences are computed in float64 from the float32
// values and compared with the declared float64 limits.
//
// Policies:
//
//   - Off: Check returns at once; nothing is read or changed.
//   - Reject: the first violation, scanning groups in description order,
//     then steps, then dimensions (per value: non-finite, bounds, then
//     jump or step delta), fails the check with an *Error naming group,
//     step, dimension, kind, limit and value. The chunk is not changed.
//   - Clamp: values are changed in place, in the same scan order, each
//     value once: a[k][d] is projected onto the intersection of its bounds
//     and, when the group has the limit, [r − L, r + L], r being the
//     already clamped a[k−1][d] (k ≥ 1, max_step_delta) or s[d] (k = 0,
//     max_jump). Projection onto the intersection of two intervals is the
//     same as clipping to either one, then the other, so the order of the
//     two clips does not matter; rounding goes inward (the result is the
//     float32 nearest the limit that does not exceed it). If the
//     intersection is empty — only possible at step 0, when the state lies
//     farther than max_jump outside the bounds — the bounds win: the value
//     becomes the bound nearest the state (the smallest jump the bounds
//     allow, still over its limit). A clamped
//     chunk therefore passes Reject whenever the state is within reach of
//     the bounds (TestClampedPassesReject). Non-finite values cannot be
//     clamped: they fail the check as in Reject.
//
// A chunk inside every limit is left untouched (bit-identical) under every
// policy.
//
// At the edge, an *Error is answered with HTTP 422 Unprocessable Entity and
// code "unsafe_action" (the request was well-formed; the chunk the policy
// produced for it is not safe to send); ZeroMQ and openpi front ends send
// their protocol's error reply with the same code and message. Other
// errors from Check (a chunk or state that does not match the gate's
// description) are internal errors (500).
package safety

import (
	"errors"
	"fmt"
	"math"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// Policy says what the gate does with a violation.
type Policy uint8

// Policies. The zero value is Off.
const (
	Off    Policy = iota // no check
	Reject               // fail the request with *Error
	Clamp                // clip into the limits, report what changed
)

// String returns "off", "reject" or "clamp".
func (p Policy) String() string {
	switch p {
	case Off:
		return "off"
	case Reject:
		return "reject"
	case Clamp:
		return "clamp"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParsePolicy parses "off", "reject" or "clamp".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "off":
		return Off, nil
	case "reject":
		return Reject, nil
	case "clamp":
		return Clamp, nil
	}
	return Off, fmt.Errorf("safety: policy %q: want off, reject or clamp", s)
}

// Kind is the kind of limit a value violated.
type Kind uint8

// Kinds of violation.
const (
	KindMin          Kind = iota + 1 // below action_limits.<g>.min
	KindMax                          // above action_limits.<g>.max
	KindGripper                      // outside action_limits.<g>.gripper
	KindMaxStepDelta                 // change from the previous step over max_step_delta
	KindMaxJump                      // step 0's distance from the state over max_jump
	KindNonFinite                    // NaN or ±Inf
	numKinds
)

var kindNames = [numKinds]string{"", "min", "max", "gripper", "max_step_delta", "max_jump", "non_finite"}

// String returns the kind's name: the manifest key of its limit ("min",
// "max", "gripper", "max_step_delta", "max_jump") or "non_finite".
func (k Kind) String() string {
	if k < numKinds && k > 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText writes String, so that JSON and msgpack reports carry the name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Kinds lists every kind, for metrics that pre-register their labels.
func Kinds() []Kind {
	return []Kind{KindMin, KindMax, KindGripper, KindMaxStepDelta, KindMaxJump, KindNonFinite}
}

// Violation is one value outside its limits.
type Violation struct {
	Group string `json:"group" msgpack:"group"`
	Step  int    `json:"step" msgpack:"step"`
	Dim   int    `json:"dim" msgpack:"dim"`
	Kind  Kind   `json:"kind" msgpack:"kind"`
	// Limit is the declared limit: the bound for min, max and gripper,
	// L for max_step_delta, J for max_jump (0 for non_finite).
	Limit float64 `json:"limit" msgpack:"limit"`
	// Value is what exceeded it, before any clamping: the value for min,
	// max, gripper and non_finite; the signed change a[k][d] − a[k−1][d]
	// for max_step_delta (a[k−1] as clamped, under Clamp); the signed
	// distance a[0][d] − s[d] for max_jump.
	Value float64 `json:"value" msgpack:"value"`
}

// Path names the value as the response's actions do:
// "actions.<group>[step][dim]".
func (v *Violation) Path() string {
	return fmt.Sprintf("actions.%s[%d][%d]", v.Group, v.Step, v.Dim)
}

// String describes the violation, e.g. "actions.eef_9d[3][2]: change
// 0.21 from step 2 exceeds max_step_delta 0.0471".
func (v *Violation) String() string {
	p := v.Path()
	switch v.Kind {
	case KindMin:
		return fmt.Sprintf("%s: value %g is below min %g", p, v.Value, v.Limit)
	case KindMax:
		return fmt.Sprintf("%s: value %g is above max %g", p, v.Value, v.Limit)
	case KindGripper:
		return fmt.Sprintf("%s: value %g is outside the gripper range (limit %g)", p, v.Value, v.Limit)
	case KindMaxStepDelta:
		return fmt.Sprintf("%s: change %g from step %d exceeds max_step_delta %g", p, v.Value, v.Step-1, v.Limit)
	case KindMaxJump:
		return fmt.Sprintf("%s: distance %g from the state exceeds max_jump %g", p, v.Value, v.Limit)
	case KindNonFinite:
		return fmt.Sprintf("%s: value %g is not finite", p, v.Value)
	}
	return fmt.Sprintf("%s: %s %g, limit %g", p, v.Kind, v.Value, v.Limit)
}

// ErrUnsafe is the sentinel every *Error matches (errors.Is).
var ErrUnsafe = errors.New("safety: unsafe action")

// Error is a chunk refused by the gate: the first violation found.
type Error struct {
	Violation
}

// Error returns "safety: unsafe action: <violation>".
func (e *Error) Error() string { return "safety: unsafe action: " + e.Violation.String() }

// Is reports whether target is ErrUnsafe.
func (e *Error) Is(target error) bool { return target == ErrUnsafe }

// Code is the error body's code: "unsafe_action".
func (e *Error) Code() string { return "unsafe_action" }

// HTTPStatus is the status the HTTP edge answers with: 422.
func (e *Error) HTTPStatus() int { return 422 }

// Verdict is what a Check did, for the response's "safety" member and for
// metrics. The zero value means "nothing found" (or policy off).
type Verdict struct {
	Policy Policy `json:"-" msgpack:"-"`
	// Clamped counts the values Clamp changed (0 under Reject and Off).
	Clamped int `json:"clamped" msgpack:"clamped"`
	// First is the first violation found in scan order; nil when none.
	First *Violation `json:"first,omitempty" msgpack:"first,omitempty"`
	// ByKind counts the violations found per kind (index Kind); a value
	// counts once, under the first kind it violated. Under Reject the
	// check stops at the first.
	ByKind [numKinds]int `json:"-" msgpack:"-"`
	// ByGroup splits ByKind per action group: one entry per group with a
	// violation, in scan order (nil when none; allocated only then).
	ByGroup []GroupCount `json:"-" msgpack:"-"`
}

// GroupCount is one action group's violations per kind (index Kind).
type GroupCount struct {
	Group  string
	ByKind [numKinds]int
}

// count counts one violation of kind in group.
func (v *Verdict) count(group string, k Kind) {
	v.ByKind[k]++
	if n := len(v.ByGroup); n == 0 || v.ByGroup[n-1].Group != group {
		v.ByGroup = append(v.ByGroup, GroupCount{Group: group})
	}
	v.ByGroup[len(v.ByGroup)-1].ByKind[k]++
}

// Group is one decoded action group as post returns it (the same fields as
// plugins.ActionGroup): row-major [Horizon, Dim] float32, physical units.
type Group struct {
	Key     string
	Horizon int
	Dim     int
	Values  []float32
}

// State is one raw state group of the request (the same fields as
// plugins.StateGroup): Steps is 0 for a flat [D] list, else the number of
// timesteps, row-major; the gate reads the last one.
type State struct {
	Key    string
	Steps  int
	Values []float64
}

// group is one action group's compiled limits.
type group struct {
	key            string
	dim            int
	lo, hi         []float32 // inner float32 bounds; ±MaxFloat32 where none
	loLim, hiLim   []float64 // the declared bounds, for reports
	loKind, hiKind []Kind
	delta          []float64 // nil: no max_step_delta
	jump           []float64 // nil: no max_jump
	stateKey       string    // the state group max_jump compares with
}

// Gate checks chunks of one embodiment. Immutable; safe for concurrent use.
type Gate struct {
	policy Policy
	groups []group
}

// New compiles limits for the action groups of d (abi.CheckActionLimits
// must accept them; groups without limits are not checked). A nil or empty
// limits map gives a gate that checks only finiteness.
func New(policy Policy, d *abi.Description, limits map[string]abi.ActionLimit) (*Gate, error) {
	if policy > Clamp {
		return nil, fmt.Errorf("safety: %s: unknown policy", policy)
	}
	if err := abi.CheckActionLimits(d, limits); err != nil {
		return nil, fmt.Errorf("safety: embodiment %s: %w", d.Embodiment, err)
	}
	g := &Gate{policy: policy}
	for i := range d.Actions {
		a := &d.Actions[i]
		l := limits[a.Key]
		c := group{key: a.Key, dim: a.Dim, stateKey: l.JumpState(a), delta: clone(l.MaxStepDelta), jump: clone(l.MaxJump)}
		c.lo, c.hi = make([]float32, a.Dim), make([]float32, a.Dim)
		c.loLim, c.hiLim = make([]float64, a.Dim), make([]float64, a.Dim)
		c.loKind, c.hiKind = make([]Kind, a.Dim), make([]Kind, a.Dim)
		for j := 0; j < a.Dim; j++ {
			lo, hi := math.Inf(-1), math.Inf(1)
			lk, hk := KindMin, KindMax
			if l.Min != nil {
				lo = l.Min[j]
			}
			if l.Max != nil {
				hi = l.Max[j]
			}
			mn, mx := lo, hi
			if gr := l.Gripper; gr != nil {
				if gr[0] >= lo {
					lo, lk = gr[0], KindGripper
				}
				if gr[1] <= hi {
					hi, hk = gr[1], KindGripper
				}
			}
			if lo > hi {
				return nil, fmt.Errorf("safety: embodiment %s: action_limits.%s: dimension %d: min/max [%g, %g] and gripper %v do not overlap", d.Embodiment, a.Key, j, mn, mx, l.Gripper)
			}
			// "No bound" is ±MaxFloat32 inside, so that ±Inf values
			// leave the fast path and are reported as non-finite.
			c.lo[j], c.hi[j] = max(up32(lo), -math.MaxFloat32), min(down32(hi), math.MaxFloat32)
			c.loLim[j], c.hiLim[j] = lo, hi
			c.loKind[j], c.hiKind[j] = lk, hk
		}
		g.groups = append(g.groups, c)
	}
	return g, nil
}

// Override returns base with the groups of over replaced (a config key's
// per-embodiment override: a group in over replaces that group's limits
// as a whole; base is not modified).
func Override(base, over map[string]abi.ActionLimit) map[string]abi.ActionLimit {
	out := make(map[string]abi.ActionLimit, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// Policy returns the gate's policy.
func (g *Gate) Policy() Policy {
	if g == nil {
		return Off
	}
	return g.policy
}

// Check runs the gate over actions (post's output, in any order; every
// group of the description must be present) with the request's state.
// Under Reject a violation returns an *Error; under Clamp actions' Values
// are changed in place and the Verdict says how. A nil Gate is Off.
func (g *Gate) Check(actions []Group, state []State) (Verdict, error) {
	if g == nil || g.policy == Off {
		return Verdict{}, nil
	}
	v := Verdict{Policy: g.policy}
	for i := range g.groups {
		c := &g.groups[i]
		a, err := c.find(i, actions)
		if err != nil {
			return v, err
		}
		var s []float64
		if c.jump != nil {
			if s, err = c.state(state); err != nil {
				return v, err
			}
		}
		if err := c.check(a, s, &v); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (c *group) find(i int, actions []Group) (*Group, error) {
	var a *Group
	if i < len(actions) && actions[i].Key == c.key {
		a = &actions[i]
	} else {
		for j := range actions {
			if actions[j].Key == c.key {
				a = &actions[j]
				break
			}
		}
	}
	switch {
	case a == nil:
		return nil, fmt.Errorf("safety: action group %s missing from the chunk", c.key)
	case a.Dim != c.dim || a.Horizon < 0 || len(a.Values) != a.Horizon*a.Dim:
		return nil, fmt.Errorf("safety: action group %s: shape [%d, %d] with %d values, want [horizon, %d]", c.key, a.Horizon, a.Dim, len(a.Values), c.dim)
	}
	return a, nil
}

// state returns the last timestep of the state group c's jump refers to.
func (c *group) state(state []State) ([]float64, error) {
	for i := range state {
		st := &state[i]
		if st.Key != c.stateKey {
			continue
		}
		n := c.dim
		rows := max(st.Steps, 1)
		if len(st.Values) != rows*n {
			return nil, fmt.Errorf("safety: state group %s: %d values, want %d steps of %d (action group %s's max_jump)", st.Key, len(st.Values), rows, n, c.key)
		}
		row := st.Values[(rows-1)*n:]
		for d, x := range row {
			if x-x != 0 {
				return nil, fmt.Errorf("safety: state group %s[%d]: %g is not finite (action group %s's max_jump)", st.Key, d, x, c.key)
			}
		}
		return row, nil
	}
	return nil, fmt.Errorf("safety: state group %s missing (action group %s's max_jump)", c.stateKey, c.key)
}

// check scans one group (see the package doc for the order and the
// semantics); s is the state row for max_jump, nil without one. The loop
// tests each value against its bounds and its reach (one comparison pair
// each, NaN and ±Inf failing them) and leaves everything else to value.
func (c *group) check(a *Group, s []float64, v *Verdict) error {
	n := c.dim
	lo, hi := c.lo[:n:n], c.hi[:n:n]
	for k := 0; k < a.Horizon; k++ {
		row := a.Values[k*n : (k+1)*n : (k+1)*n]
		switch {
		case k == 0 && c.jump != nil:
			jump := c.jump[:n:n]
			s = s[:n:n]
			for d, x := range row {
				if x >= lo[d] && x <= hi[d] {
					if diff := float64(x) - s[d]; diff <= jump[d] && diff >= -jump[d] {
						continue
					}
				}
				if err := c.value(row, k, d, true, s[d], jump[d], KindMaxJump, v); err != nil {
					return err
				}
			}
		case k > 0 && c.delta != nil:
			delta := c.delta[:n:n]
			prev := a.Values[(k-1)*n : k*n : k*n]
			for d, x := range row {
				if x >= lo[d] && x <= hi[d] {
					if diff := float64(x) - float64(prev[d]); diff <= delta[d] && diff >= -delta[d] {
						continue
					}
				}
				if err := c.value(row, k, d, true, float64(prev[d]), delta[d], KindMaxStepDelta, v); err != nil {
					return err
				}
			}
		default:
			for d, x := range row {
				if x >= lo[d] && x <= hi[d] {
					continue
				}
				if err := c.value(row, k, d, false, 0, 0, 0, v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// value handles a value of row (step k, dimension d) that failed the fast
// test: it finds the violation (non-finite, bounds, then the reach
// [r − L, r + L] of kind when reach is set), and under Clamp projects the
// value onto the intersection of bounds and reach (see the package doc).
func (c *group) value(row []float32, k, d int, reach bool, r, L float64, kind Kind, v *Verdict) error {
	x := row[d]
	lo, hi := c.lo[d], c.hi[d]
	f := float64(x)
	if f-f != 0 {
		return c.fail(v, Violation{Group: c.key, Step: k, Dim: d, Kind: KindNonFinite, Value: f})
	}
	diff := f - r
	switch {
	case x < lo:
		kind = c.loKind[d]
	case x > hi:
		kind = c.hiKind[d]
	case reach && (diff > L || diff < -L):
	default:
		return nil
	}
	if v.Policy != Clamp || v.First == nil {
		viol := Violation{Group: c.key, Step: k, Dim: d, Kind: kind}
		switch {
		case x < lo:
			viol.Limit, viol.Value = c.loLim[d], f
		case x > hi:
			viol.Limit, viol.Value = c.hiLim[d], f
		default:
			viol.Limit, viol.Value = L, diff
		}
		if v.Policy != Clamp {
			return c.fail(v, viol)
		}
		v.First = &viol
	}
	v.count(c.key, kind)
	y := min(max(x, lo), hi)
	if reach {
		rlo, rhi := up32(r-L), down32(r+L)
		switch elo, ehi := max(lo, rlo), min(hi, rhi); {
		case elo <= ehi:
			y = min(max(x, elo), ehi)
		case rlo > hi: // out of reach above the bounds
			y = hi
		default: // below them
			y = lo
		}
	}
	if math.Float32bits(y) != math.Float32bits(x) {
		row[d] = y
		v.Clamped++
	}
	return nil
}

func (c *group) fail(v *Verdict, viol Violation) error {
	v.count(c.key, viol.Kind)
	if v.First == nil {
		f := viol
		v.First = &f
	}
	return &Error{Violation: viol}
}

// down32 returns the largest float32 ≤ x (x itself when exact; -Inf/+Inf
// pass through).
func down32(x float64) float32 {
	f := float32(x)
	if float64(f) > x {
		f = step32(f, -1)
	}
	return f
}

// up32 returns the smallest float32 ≥ x.
func up32(x float64) float32 {
	f := float32(x)
	if float64(f) < x {
		f = step32(f, 1)
	}
	return f
}

// step32 returns the float32 next to the finite or infinite, non-NaN f in
// direction dir (+1 up, -1 down): math.Nextafter32 without its NaN and
// equality branches.
func step32(f float32, dir int) float32 {
	if f == 0 {
		return math.Float32frombits(1) * float32(dir)
	}
	b := math.Float32bits(f)
	if (f > 0) == (dir > 0) {
		b++
	} else {
		b--
	}
	return math.Float32frombits(b)
}

func clone(v []float64) []float64 {
	if v == nil {
		return nil
	}
	return append([]float64(nil), v...)
}
