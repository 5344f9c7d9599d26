package service

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// BenchmarkSafetyStage is the gate as the pipeline runs it on a DROID
// chunk inside the shipped limits (the budget: ≤ 5 µs per chunk):
// the response's rows to float32, Check under reject, the report.
func BenchmarkSafetyStage(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "embodiments", "droid", plugins.ManifestFile))
	require.NoError(b, err)
	m, err := plugins.ParseManifestTemplate(raw)
	require.NoError(b, err)
	info := EmbodimentInfo{Name: "oxe_droid_relative_eef_relative_joint", Plugin: "droid", ActionHorizon: 40,
		StateGroups:  []Group{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}},
		ActionGroups: []Group{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}}}
	d := &abi.Description{Embodiment: info.Name,
		State: []abi.StateGroup{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}},
		Actions: []abi.ActionGroup{{Key: "eef_9d", Dim: 9, Rep: abi.RepRelative, StateKey: "eef_9d"},
			{Key: "gripper_position", Dim: 1, Rep: abi.RepAbsolute},
			{Key: "joint_position", Dim: 7, Rep: abi.RepRelative, StateKey: "joint_position"}}}
	cfg := config.Default()
	cfg.Safety.Policy = "reject"
	s, err := New(Options{Config: cfg})
	require.NoError(b, err)
	e := &entry{tag: info.Name, info: info, b: &Binding{ActionLimits: m.ActionLimits, Description: d}}
	e.gate, err = s.newGate(e)
	require.NoError(b, err)
	state := map[string][]float64{"eef_9d": {0.52, 0, 0.33, 1, 0, 0, 0, -1, 0}, "gripper_position": {0.5},
		"joint_position": {0, 0.35, 0, -2, 0, 2.2, 0.4}}
	acts := map[string][][]float64{}
	for _, g := range info.ActionGroups {
		rows := make([][]float64, 40)
		for k := range rows {
			rows[k] = append([]float64(nil), state[g.Key]...)
		}
		acts[g.Key] = rows
	}
	p := &prediction{s: s, ctx: context.Background(), e: e, info: info, protocol: "http", mattrs: metric.WithAttributes(),
		v: &validated{state: state}, resp: &PredictResponse{Actions: acts}}
	require.NoError(b, p.gate())
	require.Zero(b, p.resp.Safety.Clamped)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := p.gate(); err != nil {
			b.Fatal(err)
		}
	}
}
