package openpiclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/wire"
)

// TestParseResult: actions, groups, timings and the request id; a reply
// without actions is an error; prev_total_ms is -1 when absent.
func TestParseResult(t *testing.T) {
	acts := wire.Float32Array([]int{1, 3}, []float32{1, 2, 3})
	arm := wire.Float32Array([]int{1, 2}, []float32{1, 2})
	m := wire.NewMap(4).Set("actions", acts).Set("action_groups", wire.NewMap(1).Set("arm", arm)).
		Set("server_timing", wire.NewMap(2).Set("infer_ms", 1.5).Set("prev_total_ms", 4.0)).Set("request_id", "r1")
	r, err := ParseResult(m)
	require.NoError(t, err)
	assert.Equal(t, &Result{Actions: acts, Groups: map[string]*wire.Array{"arm": arm}, InferMS: 1.5, PrevTotalMS: 4, RequestID: "r1"}, r)

	r, err = ParseResult(wire.NewMap(1).Set("actions", acts))
	require.NoError(t, err)
	assert.Equal(t, -1.0, r.PrevTotalMS)
	assert.Empty(t, r.Groups)

	_, err = ParseResult(wire.NewMap(1).Set("actions", "no"))
	assert.EqualError(t, err, "openpiclient: reply has no actions array")
}

// TestFromRaw: cameras (T dropped for single frames), state groups,
// prompt and embodiment as openpi's observation keys.
func TestFromRaw(t *testing.T) {
	raw := &rawobs.Observation{Frames: map[string][]rawobs.Frame{"b": {{Pix: []byte{1, 2, 3}, Height: 1, Width: 1}}, "a": {{Pix: []byte{4, 5, 6}, Height: 1, Width: 1}}},
		State: map[string][]float64{"arm": {0.5}}, Instruction: "pick", Embodiment: "bot"}
	for _, single := range []bool{false, true} {
		m, err := FromRaw(raw, single)
		require.NoError(t, err)
		var names []string
		for _, k := range m.Keys {
			names = append(names, k.Name)
		}
		assert.Equal(t, []string{"observation/a", "observation/b", "observation/arm", "prompt", "embodiment"}, names)
		a, _ := m.Get("observation/a")
		want := []int{1, 1, 1, 3}
		if single {
			want = []int{1, 1, 3}
		}
		assert.Equal(t, want, a.(*wire.Array).Shape, "single %v", single)
		s, _ := m.Get("observation/arm")
		assert.Equal(t, []int{1}, s.(*wire.Array).Shape)
		p, _ := m.Get("prompt")
		assert.Equal(t, "pick", p)
	}
}

// FuzzDecode: any reply frame decodes or fails with an error, and a
// decoded map parses as a result or fails with an error.
func FuzzDecode(f *testing.F) {
	b, err := wire.Marshal(wire.NewMap(1).Set("actions", wire.Float32Array([]int{1}, []float32{1})), wire.EncodingOpenPI)
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decode(b)
		if err != nil {
			return
		}
		if m, ok := v.(*wire.Map); ok {
			_, _ = ParseResult(m)
		}
	})
}
