package safety

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// testDesc: eef relative (to state eef), grip absolute (gripper range),
// joints absolute (max_jump from state joints), free without limits.
func testDesc() *abi.Description {
	return &abi.Description{
		Embodiment: "test",
		State:      []abi.StateGroup{{Key: "eef", Dim: 3}, {Key: "joints", Dim: 2}},
		Actions: []abi.ActionGroup{
			{Key: "eef", Dim: 3, Rep: abi.RepRelative, StateKey: "eef"},
			{Key: "grip", Dim: 1, Rep: abi.RepAbsolute},
			{Key: "joints", Dim: 2, Rep: abi.RepAbsolute},
			{Key: "free", Dim: 1, Rep: abi.RepAbsolute},
		},
	}
}

func testLimits() map[string]abi.ActionLimit {
	return map[string]abi.ActionLimit{
		"eef":    {Min: []float64{-1, -1, 0}, Max: []float64{1, 1, 2}, MaxStepDelta: []float64{0.25, 0.25, 0.5}, MaxJump: []float64{0.5, 0.5, 0.5}},
		"grip":   {Gripper: []float64{0, 1}},
		"joints": {Min: []float64{-3, math.Inf(-1)}, Max: []float64{3, math.Inf(1)}, MaxJump: []float64{1, 1}},
	}
}

func testState() []State {
	return []State{
		{Key: "eef", Values: []float64{0, 0, 1}},
		// Two timesteps: the gate compares with the last one.
		{Key: "joints", Steps: 2, Values: []float64{100, 100, 0.5, -0.5}},
	}
}

// cleanChunk is inside every limit: 4 steps.
func cleanChunk() []Group {
	return []Group{
		{Key: "eef", Horizon: 4, Dim: 3, Values: []float32{0.125, 0, 1, 0.25, 0.125, 1.25, 0.375, 0.25, 1.5, 0.5, 0.375, 1.75}},
		{Key: "grip", Horizon: 4, Dim: 1, Values: []float32{0, 1, 1, 0.5}},
		{Key: "joints", Horizon: 4, Dim: 2, Values: []float32{0.75, -0.25, 2, 5, -3, 100, 3, 1e30}},
		{Key: "free", Horizon: 4, Dim: 1, Values: []float32{-1e30, 0, 1e30, 7}},
	}
}

func copyChunk(c []Group) []Group {
	out := slices.Clone(c)
	for i := range out {
		out[i].Values = slices.Clone(c[i].Values)
	}
	return out
}

func newGate(t testing.TB, p Policy) *Gate {
	g, err := New(p, testDesc(), testLimits())
	require.NoError(t, err)
	return g
}

func TestCleanChunkUntouched(t *testing.T) {
	for _, p := range []Policy{Off, Reject, Clamp} {
		t.Run(p.String(), func(t *testing.T) {
			g := newGate(t, p)
			c, want := cleanChunk(), cleanChunk()
			v, err := g.Check(c, testState())
			require.NoError(t, err)
			assert.Equal(t, Verdict{Policy: p}, v)
			for i := range c {
				for j := range c[i].Values {
					require.Equal(t, math.Float32bits(want[i].Values[j]), math.Float32bits(c[i].Values[j]))
				}
			}
			st := testState()
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := g.Check(c, st); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs)
		})
	}
}

// TestViolations plants one violation of each kind in the clean chunk: Reject
// names it, Clamp sets the value exactly to the limit, Off changes nothing.
func TestViolations(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		name       string
		group      int
		idx        int // index into Values
		x          float32
		want       Violation
		clampedTo  float32 // Clamp's value at idx
		clampMore  int     // values Clamp changes beyond idx (later steps pulled along)
		clampError bool    // Clamp fails as well (non-finite)
	}{
		{name: "min", group: 2, idx: 2*2 + 0, x: -3.5,
			want: Violation{Group: "joints", Step: 2, Dim: 0, Kind: KindMin, Limit: -3, Value: -3.5}, clampedTo: -3},
		// eef step 3 dim 2 below min 0: the bounds and the reach from step 2
		// (1.5 ± 0.5) intersect in [1, 2]: the projection is 1.
		{name: "min within reach", group: 0, idx: 3*3 + 2, x: -0.5,
			want: Violation{Group: "eef", Step: 3, Dim: 2, Kind: KindMin, Limit: 0, Value: -0.5}, clampedTo: 1},
		{name: "max", group: 2, idx: 1*2 + 0, x: 3.5,
			want: Violation{Group: "joints", Step: 1, Dim: 0, Kind: KindMax, Limit: 3, Value: 3.5}, clampedTo: 3},
		{name: "gripper high", group: 1, idx: 2, x: 1.5,
			want: Violation{Group: "grip", Step: 2, Dim: 0, Kind: KindGripper, Limit: 1, Value: 1.5}, clampedTo: 1},
		{name: "gripper low", group: 1, idx: 0, x: -0.25,
			want: Violation{Group: "grip", Step: 0, Dim: 0, Kind: KindGripper, Limit: 0, Value: -0.25}, clampedTo: 0},
		// eef step 1 dim 0: 0.25 → 0.625 is a change of 0.5 from 0.125
		// (limit 0.25): clamped to 0.375; step 2 (0.375) is then within reach.
		{name: "max_step_delta", group: 0, idx: 1*3 + 0, x: 0.625,
			want: Violation{Group: "eef", Step: 1, Dim: 0, Kind: KindMaxStepDelta, Limit: 0.25, Value: 0.5}, clampedTo: 0.375},
		// eef step 0 dim 1: state 0, 0.75 > jump 0.5: clamped to 0.5; step 1
		// (0.125) is then 0.375 away (limit 0.25) and is pulled to 0.25.
		{name: "max_jump relative", group: 0, idx: 1, x: 0.75,
			want: Violation{Group: "eef", Step: 0, Dim: 1, Kind: KindMaxJump, Limit: 0.5, Value: 0.75}, clampedTo: 0.5, clampMore: 1},
		// joints step 0 dim 1: the state's last row says -0.5; -2 is 1.5 away.
		{name: "max_jump absolute", group: 2, idx: 1, x: -2,
			want: Violation{Group: "joints", Step: 0, Dim: 1, Kind: KindMaxJump, Limit: 1, Value: -1.5}, clampedTo: -1.5},
		{name: "nan", group: 0, idx: 4, x: nan,
			want: Violation{Group: "eef", Step: 1, Dim: 1, Kind: KindNonFinite, Value: math.NaN()}, clampError: true},
		{name: "inf without bounds", group: 3, idx: 2, x: inf,
			want: Violation{Group: "free", Step: 2, Dim: 0, Kind: KindNonFinite, Value: math.Inf(1)}, clampError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planted := cleanChunk()
			planted[tt.group].Values[tt.idx] = tt.x

			// Off: nothing read, nothing changed.
			c := copyChunk(planted)
			v, err := newGate(t, Off).Check(c, testState())
			require.NoError(t, err)
			assert.Equal(t, Verdict{}, v)
			assert.Equal(t, bits(planted), bits(c))

			// Reject: the named violation, chunk unchanged.
			c = copyChunk(planted)
			_, err = newGate(t, Reject).Check(c, testState())
			var e *Error
			require.ErrorAs(t, err, &e)
			require.ErrorIs(t, err, ErrUnsafe)
			assertViolation(t, tt.want, e.Violation)
			assert.Equal(t, "unsafe_action", e.Code())
			assert.Equal(t, 422, e.HTTPStatus())
			assert.Equal(t, bits(planted), bits(c))

			// Clamp: exactly the limit, everything else as it was.
			c = copyChunk(planted)
			v, err = newGate(t, Clamp).Check(c, testState())
			if tt.clampError {
				require.ErrorAs(t, err, &e)
				assertViolation(t, tt.want, e.Violation)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, v.First)
			assertViolation(t, tt.want, *v.First)
			assert.Equal(t, 1+tt.clampMore, v.Clamped)
			assert.Equal(t, 1, v.ByKind[tt.want.Kind])
			require.Equal(t, math.Float32bits(tt.clampedTo), math.Float32bits(c[tt.group].Values[tt.idx]), "clamped %v", c[tt.group].Values[tt.idx])
			changed := 0
			for i := range c {
				for j := range c[i].Values {
					if math.Float32bits(c[i].Values[j]) != math.Float32bits(planted[i].Values[j]) {
						changed++
					}
				}
			}
			assert.Equal(t, v.Clamped, changed)
			// The clamped chunk passes Reject.
			_, err = newGate(t, Reject).Check(c, testState())
			require.NoError(t, err)
		})
	}
}

func assertViolation(t *testing.T, want, got Violation) {
	t.Helper()
	if math.IsNaN(want.Value) {
		require.True(t, math.IsNaN(got.Value), "value %v", got.Value)
		want.Value, got.Value = 0, 0
	}
	require.Equal(t, want, got)
}

func bits(c []Group) [][]uint32 {
	out := make([][]uint32, len(c))
	for i := range c {
		for _, x := range c[i].Values {
			out[i] = append(out[i], math.Float32bits(x))
		}
	}
	return out
}

func TestErrorMessage(t *testing.T) {
	for _, tt := range []struct {
		v    Violation
		want string
	}{
		{Violation{"eef_9d", 3, 2, KindMaxStepDelta, 0.0471, 0.21}, "safety: unsafe action: actions.eef_9d[3][2]: change 0.21 from step 2 exceeds max_step_delta 0.0471"},
		{Violation{"joint_position", 0, 6, KindMaxJump, 0.08, -0.5}, "safety: unsafe action: actions.joint_position[0][6]: distance -0.5 from the state exceeds max_jump 0.08"},
		{Violation{"x", 1, 0, KindMin, -1, -1.5}, "safety: unsafe action: actions.x[1][0]: value -1.5 is below min -1"},
		{Violation{"x", 1, 0, KindMax, 1, 1.5}, "safety: unsafe action: actions.x[1][0]: value 1.5 is above max 1"},
		{Violation{"g", 0, 0, KindGripper, 1, 2}, "safety: unsafe action: actions.g[0][0]: value 2 is outside the gripper range (limit 1)"},
		{Violation{"g", 0, 0, KindNonFinite, 0, math.Inf(-1)}, "safety: unsafe action: actions.g[0][0]: value -Inf is not finite"},
	} {
		assert.Equal(t, tt.want, (&Error{tt.v}).Error())
	}
}

// TestClampRoundsInward: a bound that is not a float32 clamps to the
// nearest float32 inside it, and float32(bound) itself is a violation when
// it lies outside.
func TestClampRoundsInward(t *testing.T) {
	d := &abi.Description{Actions: []abi.ActionGroup{{Key: "a", Dim: 2, Rep: abi.RepAbsolute}}}
	lim := map[string]abi.ActionLimit{"a": {Min: []float64{-0.1, -0.1}, Max: []float64{0.1, 0.1}, MaxStepDelta: []float64{0.3, 0.3}}}
	g, err := New(Clamp, d, lim)
	require.NoError(t, err)
	c := []Group{{Key: "a", Horizon: 2, Dim: 2, Values: []float32{float32(0.1), float32(-0.1), -0.1, 0.1}}}
	require.Greater(t, float64(float32(0.1)), 0.1)
	v, err := g.Check(c, nil)
	require.NoError(t, err)
	below := math.Nextafter32(float32(0.1), 0)
	// float32(±0.1) lie outside ±0.1: all four move to the float32 inside.
	assert.Equal(t, []float32{below, -below, -below, below}, c[0].Values)
	assert.Equal(t, 4, v.Clamped)
	// Step 1 moved by ≈ 0.2 < 0.3: only the bounds acted.
	assert.Equal(t, 4, v.ByKind[KindMax]+v.ByKind[KindMin])
}

// TestClampBoundsWinOverJump: a state far outside the bounds makes bounds
// and jump unsatisfiable together; Clamp keeps the bounds.
func TestClampBoundsWinOverJump(t *testing.T) {
	g := newGate(t, Clamp)
	c := cleanChunk()
	st := testState()
	st[0].Values = []float64{5, 0, 1} // eef x state 5: bounds [-1, 1], jump 0.5
	v, err := g.Check(c, st)
	require.NoError(t, err)
	assert.Equal(t, float32(1), c[0].Values[0])
	assert.Equal(t, Violation{Group: "eef", Step: 0, Dim: 0, Kind: KindMaxJump, Limit: 0.5, Value: 0.125 - 5}, *v.First)
}

// TestClampedPassesReject: random chunks (states inside the bounds) come out
// of Clamp inside every limit.
func TestClampedPassesReject(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	clamp, reject := newGate(t, Clamp), newGate(t, Reject)
	for it := 0; it < 2000; it++ {
		c := cleanChunk()
		for i := range c[:3] {
			for j := range c[i].Values {
				c[i].Values[j] = float32(rng.NormFloat64() * 2)
			}
		}
		st := testState()
		st[0].Values = []float64{rng.Float64()*2 - 1, rng.Float64()*2 - 1, rng.Float64() * 2}
		st[1].Values[2], st[1].Values[3] = rng.Float64()*6-3, rng.NormFloat64()*10
		_, err := clamp.Check(c, st)
		require.NoError(t, err)
		_, err = reject.Check(c, st)
		require.NoError(t, err, "iteration %d", it)
	}
}

func TestCheckErrors(t *testing.T) {
	g := newGate(t, Reject)
	c := cleanChunk()
	_, err := g.Check(c[1:], testState())
	require.EqualError(t, err, "safety: action group eef missing from the chunk")
	_, err = g.Check(c, testState()[1:])
	require.EqualError(t, err, "safety: state group eef missing (action group eef's max_jump)")
	c[1].Values = c[1].Values[:3]
	_, err = g.Check(c, testState())
	require.EqualError(t, err, "safety: action group grip: shape [4, 1] with 3 values, want [horizon, 1]")
	st := testState()
	st[1].Values = st[1].Values[:3]
	_, err = g.Check(cleanChunk(), st)
	require.EqualError(t, err, "safety: state group joints: 3 values, want 2 steps of 2 (action group joints's max_jump)")
	st = testState()
	st[0].Values[1] = math.NaN()
	_, err = g.Check(cleanChunk(), st)
	require.EqualError(t, err, "safety: state group eef[1]: NaN is not finite (action group eef's max_jump)")
	require.False(t, errors.Is(err, ErrUnsafe))

	// Groups in another order are found by key.
	c = cleanChunk()
	slices.Reverse(c)
	_, err = g.Check(c, testState())
	require.NoError(t, err)
	// A nil gate is off.
	var nilGate *Gate
	_, err = nilGate.Check(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, Off, nilGate.Policy())
}

func TestNew(t *testing.T) {
	_, err := New(Reject, testDesc(), map[string]abi.ActionLimit{"grip": {Min: []float64{2}, Gripper: []float64{0, 1}}})
	require.EqualError(t, err, "safety: embodiment test: action_limits.grip: dimension 0: min/max [2, +Inf] and gripper [0 1] do not overlap")
	_, err = New(Reject, testDesc(), map[string]abi.ActionLimit{"nope": {Gripper: []float64{0, 1}}})
	require.ErrorContains(t, err, "safety: embodiment test: action_limits.nope: no such action group")
	_, err = New(Policy(7), testDesc(), nil)
	require.EqualError(t, err, "safety: policy(7): unknown policy")
	// Gripper tighter than min/max: the gripper's kind is reported.
	g, err := New(Reject, testDesc(), map[string]abi.ActionLimit{"grip": {Min: []float64{-5}, Max: []float64{0.5}, Gripper: []float64{0, 1}}})
	require.NoError(t, err)
	c := cleanChunk()
	_, err = g.Check(c, nil)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Violation{Group: "grip", Step: 1, Dim: 0, Kind: KindMax, Limit: 0.5, Value: 1}, e.Violation)
	c[1].Values = []float32{-0.5, 0, 0, 0}
	_, err = g.Check(c, nil)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Violation{Group: "grip", Step: 0, Dim: 0, Kind: KindGripper, Limit: 0, Value: -0.5}, e.Violation)
}

func TestOverride(t *testing.T) {
	base := testLimits()
	over := map[string]abi.ActionLimit{"grip": {Gripper: []float64{0, 0.5}}, "free": {Max: []float64{1}}}
	got := Override(base, over)
	assert.Equal(t, over["grip"], got["grip"])
	assert.Equal(t, over["free"], got["free"])
	assert.Equal(t, base["eef"], got["eef"])
	assert.Equal(t, abi.ActionLimit{Gripper: []float64{0, 1}}, base["grip"])
}

func TestPolicyAndKindNames(t *testing.T) {
	for _, p := range []Policy{Off, Reject, Clamp} {
		q, err := ParsePolicy(p.String())
		require.NoError(t, err)
		assert.Equal(t, p, q)
	}
	_, err := ParsePolicy("warn")
	require.EqualError(t, err, `safety: policy "warn": want off, reject or clamp`)
	var names []string
	for _, k := range Kinds() {
		b, err := k.MarshalText()
		require.NoError(t, err)
		names = append(names, string(b))
	}
	assert.Equal(t, []string{"min", "max", "gripper", "max_step_delta", "max_jump", "non_finite"}, names)
}

// TestRounding: down32/up32 are the float32 neighbours of x on each side,
// as math.Nextafter32 finds them.
func TestRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	xs := []float64{0, 0.1, -0.1, 1, -1, 1e-45, -1e-45, 1e-50, -1e-50, math.MaxFloat32, -math.MaxFloat32, 1e39, -1e39, math.Inf(1), math.Inf(-1)}
	for i := 0; i < 10000; i++ {
		xs = append(xs, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(80)-40)))
	}
	for _, x := range xs {
		d, u := down32(x), up32(x)
		require.LessOrEqual(t, float64(d), x, "down32(%g)", x)
		require.GreaterOrEqual(t, float64(u), x, "up32(%g)", x)
		if float64(float32(x)) == x {
			require.Equal(t, float32(x), d)
			require.Equal(t, float32(x), u)
			continue
		}
		require.Equal(t, u, math.Nextafter32(d, float32(math.Inf(1))), "x %g", x)
	}
}

// TestVerdictJSON: the response's "safety" member.
func TestVerdictJSON(t *testing.T) {
	c := cleanChunk()
	c[1].Values[2] = 1.5
	v, err := newGate(t, Clamp).Check(c, testState())
	require.NoError(t, err)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	assert.JSONEq(t, `{"clamped":1,"first":{"group":"grip","step":2,"dim":0,"kind":"gripper","limit":1,"value":1.5}}`, string(b))
	b, err = json.Marshal(Verdict{Policy: Clamp})
	require.NoError(t, err)
	assert.JSONEq(t, `{"clamped":0}`, string(b))
}
