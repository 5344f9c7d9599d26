package safety

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readF32npy reads a little-endian float32 .npy file (format 1.0) of n
// values; a minimal reader, enough for the caseA goldens.
func readF32npy(t *testing.T, path string, n int) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, len(b) > 10 && string(b[1:6]) == "NUMPY" && b[6] == 1, path)
	hl := int(binary.LittleEndian.Uint16(b[8:10]))
	require.Contains(t, string(b[10:10+hl]), "'descr': '<f4'", path)
	data := b[10+hl:]
	require.Len(t, data, 4*n, path)
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}

// TestGateOnCaseA runs the DROID plugin's golden output for the tiny random
// checkpoint (testdata/n17-tiny/caseA: post's physical actions and the raw
// state) through the gate with the shipped DROID limits. Random weights
// make the chunk jerk between steps: Reject refuses it, Clamp changes it
// into a chunk Reject accepts, Off leaves it alone.
func TestGateOnCaseA(t *testing.T) {
	dir := filepath.Join("..", "testdata", "n17-tiny", "caseA")
	load := func() ([]Group, []State) {
		c := []Group{
			{Key: "eef_9d", Horizon: 40, Dim: 9, Values: readF32npy(t, filepath.Join(dir, "actions_eef_9d.npy"), 360)},
			{Key: "gripper_position", Horizon: 40, Dim: 1, Values: readF32npy(t, filepath.Join(dir, "actions_gripper_position.npy"), 40)},
			{Key: "joint_position", Horizon: 40, Dim: 7, Values: readF32npy(t, filepath.Join(dir, "actions_joint_position.npy"), 280)},
		}
		var st []State
		for _, g := range []struct {
			key string
			n   int
		}{{"eef_9d", 9}, {"joint_position", 7}} {
			v := readF32npy(t, filepath.Join(dir, "state_raw_"+g.key+".npy"), g.n)
			f := make([]float64, g.n)
			for i, x := range v {
				f[i] = float64(x)
			}
			st = append(st, State{Key: g.key, Values: f})
		}
		return c, st
	}

	reject, _, _ := droidGate(t, Reject)
	c, st := load()
	_, err := reject.Check(c, st)
	var e *Error
	require.ErrorAs(t, err, &e)
	t.Logf("reject: %v", err)
	assert.True(t, strings.HasPrefix(e.Error(), "safety: unsafe action: actions."))

	clamp, _, _ := droidGate(t, Clamp)
	v, err := clamp.Check(c, st)
	require.NoError(t, err)
	require.NotNil(t, v.First)
	assert.Equal(t, e.Violation, *v.First, "Clamp reports the violation Reject refused")
	assert.Positive(t, v.Clamped)
	t.Logf("clamp: %d values changed; by kind %v", v.Clamped, v.ByKind)
	_, err = reject.Check(c, st)
	require.NoError(t, err, "the clamped chunk passes Reject")

	off, _, _ := droidGate(t, Off)
	c, st = load()
	c0, _ := load()
	_, err = off.Check(c, st)
	require.NoError(t, err)
	assert.Equal(t, bits(c0), bits(c))
}
