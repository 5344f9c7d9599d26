package safety

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// droidGate is a gate over DROID's description (as embodiments/droid
// declares it) and the limits its plugin.yaml ships, with a 40-step chunk
// inside them and the state it starts from.
func droidGate(tb testing.TB, p Policy) (*Gate, []Group, []State) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "embodiments", "droid", plugins.ManifestFile))
	require.NoError(tb, err)
	m, err := plugins.ParseManifestTemplate(b)
	require.NoError(tb, err)
	d := &abi.Description{
		Embodiment: "oxe_droid_relative_eef_relative_joint",
		State:      []abi.StateGroup{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}},
		Actions: []abi.ActionGroup{
			{Key: "eef_9d", Dim: 9, Rep: abi.RepRelative, StateKey: "eef_9d"},
			{Key: "gripper_position", Dim: 1, Rep: abi.RepAbsolute},
			{Key: "joint_position", Dim: 7, Rep: abi.RepRelative, StateKey: "joint_position"},
		},
	}
	g, err := New(p, d, m.ActionLimits)
	require.NoError(tb, err)
	const h = 40
	eefS := []float64{0.52, 0, 0.33, 1, 0, 0, 0, -1, 0}
	jointS := []float64{0, 0.35, 0, -2, 0, 2.2, 0.4}
	st := []State{{Key: "eef_9d", Values: eefS}, {Key: "gripper_position", Values: []float64{0.5}}, {Key: "joint_position", Values: jointS}}
	c := []Group{
		{Key: "eef_9d", Horizon: h, Dim: 9, Values: make([]float32, h*9)},
		{Key: "gripper_position", Horizon: h, Dim: 1, Values: make([]float32, h)},
		{Key: "joint_position", Horizon: h, Dim: 7, Values: make([]float32, h*7)},
	}
	for k := 0; k < h; k++ {
		for d, s := range eefS {
			v := s
			if d < 3 {
				v += 0.001 * float64(k+1)
			}
			c[0].Values[k*9+d] = float32(v)
		}
		c[1].Values[k] = float32(k%2) * 0.9
		for d, s := range jointS {
			c[2].Values[k*7+d] = float32(s + 0.002*float64(k+1))
		}
	}
	_, err = newGateOrFail(tb, Reject, d, m.ActionLimits).Check(c, st)
	require.NoError(tb, err, "the benchmark chunk must be clean")
	return g, c, st
}

func newGateOrFail(tb testing.TB, p Policy, d *abi.Description, l map[string]abi.ActionLimit) *Gate {
	g, err := New(p, d, l)
	require.NoError(tb, err)
	return g
}

// BenchmarkGateDROID: one DROID chunk ([40, 9] + [40, 1] + [40, 7]) through
// the gate with the shipped limits. Target (issue 28): ≤ 5 µs per chunk.
// cpu-ns/op is the thread's CPU time per chunk (Linux), which a loaded
// machine does not inflate the way it inflates ns/op.
func BenchmarkGateDROID(b *testing.B) {
	for _, p := range []Policy{Reject, Clamp} {
		b.Run(p.String()+"/clean", func(b *testing.B) {
			g, c, st := droidGate(b, p)
			b.ReportAllocs()
			defer lockThread()()
			cpu0 := threadCPU()
			for b.Loop() {
				if _, err := g.Check(c, st); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0)
		})
	}
	// Every joint value jumps: each step is clamped (the copy that restores
	// the chunk, 680 floats, is included).
	b.Run("clamp/violating", func(b *testing.B) {
		g, c, st := droidGate(b, Clamp)
		for i := range c[2].Values {
			c[2].Values[i] += float32(i%3) * 0.2
		}
		orig := copyChunk(c)
		b.ReportAllocs()
		defer lockThread()()
		cpu0 := threadCPU()
		for b.Loop() {
			for i := range c {
				copy(c[i].Values, orig[i].Values)
			}
			v, err := g.Check(c, st)
			if err != nil || v.Clamped == 0 {
				b.Fatal(err, v.Clamped)
			}
		}
		reportCPU(b, cpu0)
	})
}

func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu := threadCPU(); cpu > 0 && b.N > 0 {
		b.ReportMetric(float64((cpu-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func TestDROIDBenchChunkClean(t *testing.T) {
	for _, p := range []Policy{Reject, Clamp} {
		g, c, st := droidGate(t, p)
		v, err := g.Check(c, st)
		require.NoError(t, err)
		require.Zero(t, v.Clamped)
	}
}
