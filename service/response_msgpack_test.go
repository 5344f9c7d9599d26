package service

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/gr00tgw/gr00tgw/wire"
)

// TestResponseMsgpackMatchesVmihailenco: the wire codec writes the
// /predict response and the error body with the values
// vmihailenco/msgpack wrote (the response path's former encoder, still
// the tests' decoder): the same keys, omitempty fields left out alike,
// the same numbers; decoded by both decoders alike.
func TestResponseMsgpackMatchesVmihailenco(t *testing.T) {
	seed := uint64(1) << 40
	full := PredictResponse{
		Actions:       map[string][][]float64{"arm": {{0.1, -2.5}, {3, 4}}, "grip": {{1}, {0}}},
		ActionHorizon: 2, ActionKeys: []string{"arm", "grip"}, ActionDims: map[string]int{"arm": 2, "grip": 1},
		Normalized: true, Embodiment: "droid", EmbodimentID: 26, Version: "v", Model: "m", Layout: "l",
		Images: map[string]ImageReport{"cam": {Frames: 1, ReceivedHW: [2]int{180, 320}, VitGridTHW: [3]int{1, 16, 28}}},
		SeqLen: 300, PromptTokens: -1, StateDtype: "float32", NoiseSource: "seed", Seed: &seed,
		TimingMS:  Timing{Decode: 1.5, Total: 70000.25, DeviceStages: map[string]float64{"vit": 3}},
		Plugin:    PluginReport{Name: "droid", Version: "1"},
		RequestID: "rid", RTC: &RTCReport{Horizon: 40, Overlap: 12, Frozen: 4, RampRate: 6, Source: "request"},
		ActionPredNormalized: [][]float64{{1e-300}}, ActionPredValidHD: [][]float64{},
	}
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"full response", full},
		{"zero response", PredictResponse{}},
		{"pointer", &full},
		{"error body", ErrorBody{Error: "e", Code: CodeInvalid, Field: "images.cam[0]", Detail: "e", RequestID: "r"}},
		{"bare error body", ErrorBody{Error: "e", Code: CodeInternal, Detail: "e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := msgpack.Marshal(tc.v)
			require.NoError(t, err)
			got, err := wire.Marshal(tc.v, wire.EncodingNPY)
			require.NoError(t, err)
			assert.Equal(t, asJSON(t, want), asJSON(t, got))
			assert.Len(t, got, len(want)-len(seedWidth(tc.v)), "only the seed is written shorter")
		})
	}
}

// seedWidth is what vmihailenco wrote wider: a uint64 always as 9 bytes
// (the wire codec writes the shortest form).
func seedWidth(v any) []byte {
	var r *PredictResponse
	switch x := v.(type) {
	case PredictResponse:
		r = &x
	case *PredictResponse:
		r = x
	}
	if r == nil || r.Seed == nil {
		return nil
	}
	short, _ := wire.Marshal(*r.Seed, wire.EncodingNPY)
	return make([]byte, 9-len(short))
}

// asJSON decodes msgpack with vmihailenco into a generic tree and writes
// it as JSON (maps sorted, number types folded), for comparison.
func asJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	require.NoError(t, msgpack.Unmarshal(b, &v))
	j, err := json.Marshal(v)
	require.NoError(t, err)
	return string(j)
}
