package client

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/gateway/wire"
)

// TestRows: (1, H, D) and (H, D) float arrays become H rows; other shapes
// and arrays whose data does not fill the shape are errors naming them.
func TestRows(t *testing.T) {
	for _, c := range []struct {
		name string
		a    *wire.Array
		want [][]float64
		err  string
	}{
		{"batch of one", wire.Float32Array([]int{1, 2, 2}, []float32{1, 2, 3, 4}), [][]float64{{1, 2}, {3, 4}}, ""},
		{"plain", wire.Float32Array([]int{3, 1}, []float32{1, 2, 3}), [][]float64{{1}, {2}, {3}}, ""},
		{"batch of two", wire.Float32Array([]int{2, 1, 1}, []float32{1, 2}), nil, "action of shape (2, 1, 1), want (horizon, dim)"},
		{"vector", wire.Float32Array([]int{2}, []float32{1, 2}), nil, "action of shape (2,), want (horizon, dim)"},
		{"data short of the shape", &wire.Array{DType: "<f4", Shape: []int{2, 2}, Data: make([]byte, 12)}, nil, "action array float32 (2, 2) is not a float array"},
	} {
		got, err := rows(c.a)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}

// TestWithSeedKeepsTheRest: the robot protocols' demo request is the
// demo's with seed in place of noise.
func TestWithSeedKeepsTheRest(t *testing.T) {
	got, err := WithSeed(json.RawMessage(`{"images":{"c":["x"]},"noise":[[1]],"embodiment":"e"}`), RobotDemoSeed)
	require.NoError(t, err)
	assert.JSONEq(t, `{"images":{"c":["x"]},"seed":42,"embodiment":"e"}`, string(got))
}
