package zmqclient

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/rawobs"
	"github.com/gr00tgw/gr00tgw/wire"
)

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := wire.Marshal(v, wire.EncodingNPY)
	require.NoError(t, err)
	return b
}

// TestDecodeReply: arrays resolved; an error map, or N1.5's b"ERROR", is
// a *ServerError with its code, field and request id.
func TestDecodeReply(t *testing.T) {
	arr := wire.Float32Array([]int{1, 2}, []float32{1, 2})
	v, err := DecodeReply(marshal(t, wire.NewMap(1).Set("a", arr)))
	require.NoError(t, err)
	got, _ := v.(*wire.Map).Get("a")
	require.IsType(t, &wire.Array{}, got)
	assert.Equal(t, []float64{1, 2}, got.(*wire.Array).Float64s())

	_, err = DecodeReply(marshal(t, wire.NewMap(4).Set("error", "bad").Set("code", "invalid").Set("field", "state.x").Set("request_id", "r1")))
	var se *ServerError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, ServerError{Message: "bad", Code: "invalid", Field: "state.x", RequestID: "r1"}, *se)
	assert.EqualError(t, err, "server error: bad (code invalid, field state.x)")

	_, err = DecodeReply([]byte("ERROR"))
	require.True(t, errors.As(err, &se))
	assert.EqualError(t, err, `server error: server error (b"ERROR")`)

	_, err = DecodeReply([]byte{0xc1})
	assert.ErrorContains(t, err, "zmqclient: reply: ")
}

// TestParseModalityConfig: the as_json fields in wire order, markers,
// action configs with None as "".
func TestParseModalityConfig(t *testing.T) {
	ac := wire.NewMap(4).Set("rep", "relative").Set("type", "eef").Set("format", "default").Set("state_key", nil)
	asJSON := wire.NewMap(5).Set("delta_indices", []any{int64(0), int64(1)}).Set("modality_keys", []any{"arm"}).
		Set("sin_cos_embedding_keys", nil).Set("mean_std_embedding_keys", []any{}).Set("action_configs", []any{ac, nil})
	v := wire.NewMap(1).Set("action", wire.NewMap(2).Set("__ModalityConfig_class__", true).Set("as_json", asJSON))
	got, err := ParseModalityConfig(v)
	require.NoError(t, err)
	assert.Equal(t, map[string]ModalityConfig{"action": {
		DeltaIndices: []int{0, 1}, ModalityKeys: []string{"arm"}, MeanStdEmbeddingKeys: []string{},
		ActionConfigs: []ActionConfig{{"relative", "eef", "default", ""}},
		Markers:       []string{"__ModalityConfig_class__"},
		Fields:        []string{"delta_indices", "modality_keys", "sin_cos_embedding_keys", "mean_std_embedding_keys", "action_configs"},
	}}, got)

	for _, c := range []struct {
		v   any
		err string
	}{
		{"x", "zmqclient: get_modality_config reply is str"},
		{wire.NewMap(1).Set("video", int64(1)), "zmqclient: modality video is int"},
		{wire.NewMap(1).Set("video", wire.NewMap(0)), "zmqclient: modality video: as_json is nil"},
	} {
		_, err := ParseModalityConfig(c.v)
		assert.ErrorContains(t, err, c.err)
	}
}

// TestObservation: FromRaw's B = 1 arrays, Batch, and the three forms'
// trees.
func TestObservation(t *testing.T) {
	raw := &rawobs.Observation{Frames: map[string][]rawobs.Frame{"cam": {{Pix: []byte{1, 2, 3}, Height: 1, Width: 1}}},
		State: map[string][]float64{"arm": {0.5, 1}}, Instruction: "pick"}
	o, err := FromRaw(raw, "")
	require.NoError(t, err)
	assert.Equal(t, "annotation.language.language_instruction", o.LanguageKey)
	assert.Equal(t, []int{1, 1, 1, 1, 3}, o.Video["cam"].Shape)
	assert.Equal(t, []int{1, 1, 2}, o.State["arm"].Shape)

	b := o.Batch(2)
	assert.Equal(t, []int{2, 1, 1, 1, 3}, b.Video["cam"].Shape)
	assert.Equal(t, []byte{1, 2, 3, 1, 2, 3}, b.Video["cam"].Data)
	assert.Equal(t, []string{"pick", "pick"}, b.Language)

	nested := o.Value(Nested).(*wire.Map)
	assert.Equal(t, []string{"video", "state", "language"}, keys(nested))
	lang, _ := nested.Get("language")
	l, _ := lang.(*wire.Map).Get("annotation.language.language_instruction")
	assert.Equal(t, []any{[]any{"pick"}}, l)
	flat := o.Value(Flat).(*wire.Map)
	assert.Equal(t, []string{"video.cam", "state.arm", "annotation.language.language_instruction"}, keys(flat))
	l, _ = flat.Get("annotation.language.language_instruction")
	assert.Equal(t, []any{"pick"}, l)

	_, err = FromRaw(&rawobs.Observation{Frames: map[string][]rawobs.Frame{"c": nil}}, "k")
	assert.EqualError(t, err, "zmqclient: c: rawobs: no frames")
}

func keys(m *wire.Map) []string {
	out := make([]string, 0, m.Len())
	for _, k := range m.Keys {
		out = append(out, k.Name)
	}
	return out
}

// FuzzDecodeReply: any reply payload decodes or fails with an error, and
// a decoded one parses as a modality config or fails with an error.
func FuzzDecodeReply(f *testing.F) {
	f.Add(marshal(f, wire.NewMap(1).Set("error", "x")))
	f.Add(marshal(f, wire.NewMap(1).Set("video", wire.NewMap(1).Set("as_json", wire.NewMap(1).Set("action_configs", []any{int64(1)})))))
	f.Add(marshal(f, []any{wire.NewMap(1).Set("a", wire.Float32Array([]int{1}, []float32{1})), wire.NewMap(0)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeReply(b)
		if err != nil {
			return
		}
		_, _ = ParseModalityConfig(v)
	})
}
