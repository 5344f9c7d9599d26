package httpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/record"
)

// recordFixture serves the fakes with the recorder on dir (and the gate
// under policy, the gate tests' limits), logging to logs.
func recordFixture(t *testing.T, dir, policy string, logs *bytes.Buffer, edit func(*config.Record)) *fixture {
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, f *fixture) {
		c.Record.Dir = dir
		if edit != nil {
			edit(&c.Record)
		}
		c.Safety.Policy = policy
		f.binding.ActionLimits = gateLimits()
		if logs != nil {
			o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		}
	})
	return f
}

// A recorded predict holds the request as sent (frames as the base64 text
// received, state, instruction, noise), the identity of what served it,
// the normalised action_pred and the actions answered, the safety verdict
// and the timings; a refused one its error. The directory is 0700, the
// files 0600.
func TestRecorderWritesWhatWasServed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	f := recordFixture(t, dir, "clamp", nil, nil)
	okBody := gateBody(t, plant{"eef_9d", 10, 2, 0.75})
	st, ok := f.gatePredict(t, okBody)
	require.Equal(t, 200, st, ok.Error)
	require.NoError(t, f.shutdown(context.Background()))

	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	files, err := record.List(dir)
	require.NoError(t, err)
	require.Len(t, files, 1)
	fi, err = os.Stat(files[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	rec, err := record.ReadFile(files[0])
	require.NoError(t, err)

	var sent map[string]any
	require.NoError(t, json.Unmarshal(okBody, &sent))
	assert.Equal(t, "http", rec.Protocol)
	assert.Equal(t, sent["instruction"], rec.Request.Instruction)
	require.Len(t, rec.Request.Frames, 4)
	images := sent["images"].(map[string]any)
	for _, fr := range rec.Request.Frames {
		assert.Equal(t, "base64", fr.Encoding)
		assert.Equal(t, images[fr.Camera].([]any)[fr.Step], string(fr.Data), "frame %s[%d] as sent", fr.Camera, fr.Step)
	}
	require.Len(t, rec.Request.State, 3)
	assert.Equal(t, "eef_9d", rec.Request.State[0].Key)
	assert.Equal(t, make([]float64, 9), rec.Request.State[0].Values)
	require.NotNil(t, rec.Noise)
	assert.Equal(t, []int{testHorizon, testActionDim}, rec.Noise.Shape)
	assert.Equal(t, "client", rec.NoiseSource)
	assert.Equal(t, droidInfo.Name, rec.Embodiment)
	assert.Equal(t, "sha-droid-1", rec.Plugin.SHA256)
	assert.Equal(t, "droid", rec.Plugin.Name)
	require.NotNil(t, rec.ActionPred)
	assert.Equal(t, []int{testHorizon, testActionDim}, rec.ActionPred.Shape)
	pred, err := rec.ActionPred.Float32s()
	require.NoError(t, err)
	assert.Equal(t, float32(0.75), pred[10*testActionDim+2], "action_pred as denoised (before the gate)")
	require.Len(t, rec.Actions, 3)
	for _, g := range rec.Actions {
		v, err := g.Tensor.Float32s()
		require.NoError(t, err)
		rows := ok.Actions[g.Key]
		require.Equal(t, []int{len(rows), len(rows[0])}, g.Tensor.Shape)
		for k, r := range rows {
			for d, x := range r {
				require.Equal(t, math.Float64bits(x), math.Float64bits(float64(v[k*len(r)+d])), "actions.%s[%d][%d] as answered", g.Key, k, d)
			}
		}
	}
	require.NotNil(t, rec.Safety)
	assert.Equal(t, &record.Safety{Policy: "clamp", Clamped: 1,
		First: &record.Violation{Group: "eef_9d", Step: 10, Dim: 2, Kind: "max_step_delta", Limit: 0.5, Value: 0.75}}, rec.Safety)
	assert.Contains(t, rec.TimingMS, "total")
	assert.Contains(t, rec.TimingMS, "safety")
	assert.Empty(t, rec.Error)
}

// A chunk the gate refuses is recorded with its error and the verdict
// (replay expects the refusal again).
func TestRecorderKeepsRejections(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	f := recordFixture(t, dir, "reject", nil, func(r *config.Record) { r.RedactInstruction = true })
	st, a := f.gatePredict(t, gateBody(t, plant{"joint_position", 5, 3, -3}))
	require.Equal(t, 422, st)
	require.Equal(t, "unsafe_action", a.Code)
	require.NoError(t, f.shutdown(context.Background()))
	files, err := record.List(dir)
	require.NoError(t, err)
	require.Len(t, files, 1)
	rec, err := record.ReadFile(files[0])
	require.NoError(t, err)
	assert.Contains(t, rec.Error, "unsafe action")
	require.NotNil(t, rec.Safety)
	assert.True(t, rec.Safety.Rejected)
	assert.Equal(t, "min", rec.Safety.First.Kind)
	assert.True(t, rec.Request.InstructionRedacted)
	assert.Empty(t, rec.Request.Instruction)
}

// Under a directory it cannot write, the recorder fails every record and
// the requests are served as if it were off: the failure is logged once
// and counted.
func TestRecorderReadOnlyDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ro")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o500))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	if fh, err := os.CreateTemp(dir, "probe"); err == nil {
		// Root writes through permissions: a directory below a regular
		// file cannot be created by anyone.
		_ = fh.Close()
		blocker := filepath.Join(base, "file")
		require.NoError(t, os.WriteFile(blocker, nil, 0o600))
		dir = filepath.Join(blocker, "ro")
	}
	var logs bytes.Buffer
	f := recordFixture(t, dir, "off", &logs, nil)
	for i := 0; i < 3; i++ {
		st, a := f.gatePredict(t, gateBody(t))
		require.Equal(t, 200, st, a.Error)
	}
	require.NoError(t, f.shutdown(context.Background()))
	s := f.core.RecorderStats()
	assert.Equal(t, uint64(0), s.Written)
	assert.Equal(t, uint64(3), s.Failed)
	n := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, "record:") {
			n++
		}
	}
	assert.Equal(t, 1, n, "one log line for the outage:\n%s", logs.String())
}

// record.sessions keeps only the named sessions' predicts, and a record
// carries the session the request named.
func TestRecorderSessionsFilter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	f := recordFixture(t, dir, "off", nil, func(r *config.Record) { r.Sessions = []string{"robot-a"} })
	for _, session := range []string{"robot-a", "robot-b", ""} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(gateBody(t), &m))
		if session != "" {
			m["session"] = session
		}
		st, a := f.gatePredict(t, mustJSON(t, m))
		require.Equal(t, 200, st, "session %q: %s", session, a.Error)
	}
	require.NoError(t, f.shutdown(context.Background()))
	files, err := record.List(dir)
	require.NoError(t, err)
	require.Len(t, files, 1, "only robot-a's predict is recorded")
	rec, err := record.ReadFile(files[0])
	require.NoError(t, err)
	assert.Equal(t, "robot-a", rec.Session)
}
