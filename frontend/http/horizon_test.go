package httpfront

import (
	"context"
	"encoding/json"
	"github.com/gr00tgw/gr00tgw/service"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
)

// shortHorizon is a libero-like embodiment horizon: the model still
// denoises testHorizon (40) steps, the embodiment decodes the first 16.
const shortHorizon = 16

// shortFixture serves droidInfo with a 16-step action horizon over the
// fakes' 40-step model chunk (no warm-up: the fake demo golden is 40 rows).
func shortFixture(t *testing.T, modelHorizon int) *fixture {
	t.Helper()
	f := newFixture(t, false, func(c *config.Config, o *fixtureOptions, d *fixture) {
		c.WarmupRuns = 0
		d.binding.Demo = nil
		d.deps.Model.ActionHorizon = modelHorizon
	})
	f.emb.info.ActionHorizon = shortHorizon
	require.NoError(t, f.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil }))
	return f
}

// noiseRows is a [h, testActionDim] noise array with distinct values.
func noiseRows(h int) [][]float64 {
	n := make([][]float64, h)
	for i := range n {
		n[i] = make([]float64, testActionDim)
		for j := range n[i] {
			n[i][j] = float64(i) + float64(j)/256
		}
	}
	return n
}

// TestShortEmbodimentHorizon: noise, /info's noise shape and the backend's
// result follow the model's denoised horizon (40); the response's
// action_horizon and action groups follow the embodiment's (16).
func TestShortEmbodimentHorizon(t *testing.T) {
	f := shortFixture(t, testHorizon)

	resp, b := f.do(t, "GET", "/info", nil, nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
	var info struct {
		Noise struct {
			Shape []int `json:"shape"`
		} `json:"noise"`
		Task struct {
			ActionHorizon int `json:"action_horizon"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal(b, &info))
	assert.Equal(t, []int{testHorizon, testActionDim}, info.Noise.Shape)
	assert.Equal(t, shortHorizon, info.Task.ActionHorizon)
	_, b = f.do(t, "GET", "/v2/models/GR00T-N1.7-3B", nil, nil)
	assert.Contains(t, string(b), `{"name":"actions.eef_9d","datatype":"FP32","shape":[16,9]}`)

	noise := noiseRows(testHorizon)
	req := body(t, func(m map[string]any) { m["noise"] = noise; m["return_normalized"] = true })
	var first []byte
	for i := range 2 {
		resp, b := f.do(t, "POST", "/predict", req, nil)
		require.Equal(t, 200, resp.StatusCode, string(b))
		var pr service.PredictResponse
		require.NoError(t, json.Unmarshal(b, &pr))
		assert.Equal(t, shortHorizon, pr.ActionHorizon)
		assert.Equal(t, "client", pr.NoiseSource)
		for _, g := range droidInfo.ActionGroups {
			require.Len(t, pr.Actions[g.Key], shortHorizon, g.Key)
		}
		// The fake backend echoes the noise; the fake plugin adds
		// the group's first state value: rows are the noise's first 16.
		off := state(demoRequest(t))["eef_9d"].([]any)[0].(float64)
		assert.InDelta(t, noise[15][3]+off, pr.Actions["eef_9d"][15][3], 1e-5)
		// Model-space chunk: the model's 40 steps; the decoded
		// valid slice: the embodiment's 16 × Σ dims (17).
		require.Len(t, pr.ActionPredNormalized, testHorizon)
		assert.Len(t, pr.ActionPredNormalized[39], testActionDim)
		assert.InDelta(t, noise[39][131], pr.ActionPredNormalized[39][131], 1e-6)
		require.Len(t, pr.ActionPredValidHD, shortHorizon)
		assert.Len(t, pr.ActionPredValidHD[15], 17)
		assert.InDelta(t, noise[15][16], pr.ActionPredValidHD[15][16], 1e-6)
		pr.TimingMS, pr.RequestID = service.Timing{}, ""
		out, err := json.Marshal(pr)
		require.NoError(t, err)
		if i == 0 {
			first = out
		} else {
			assert.Equal(t, string(first), string(out), "deterministic")
		}
	}

	// With a batch dimension too.
	resp, b = f.do(t, "POST", "/predict", body(t, func(m map[string]any) { m["noise"] = [][][]float64{noise} }), nil)
	require.Equal(t, 200, resp.StatusCode, string(b))

	// Embodiment-horizon noise cannot determine the model's chunk.
	calls := f.backend.calls.Load()
	resp, b = f.do(t, "POST", "/predict", body(t, func(m map[string]any) { m["noise"] = noiseRows(shortHorizon) }), nil)
	assert.Equal(t, 400, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"field":"noise"`)
	assert.Contains(t, string(b), "want [40, 132] or [1, 40, 132]")
	assert.Equal(t, calls, f.backend.calls.Load(), "rejected before the device")

	// Seeded requests are unaffected.
	resp, b = f.do(t, "POST", "/predict", body(t, func(m map[string]any) { delete(m, "noise"); m["seed"] = 3 }), nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
}

// TestModelHorizonDefault: a loader that leaves ModelInfo.ActionHorizon 0
// gets the embodiment's horizon for noise and results (DROID: 40 = 40).
func TestModelHorizonDefault(t *testing.T) {
	assert.Equal(t, 16, (&service.ModelInfo{}).ChunkHorizon(&service.EmbodimentInfo{ActionHorizon: 16}))
	assert.Equal(t, 40, (&service.ModelInfo{ActionHorizon: 40}).ChunkHorizon(&service.EmbodimentInfo{ActionHorizon: 16}))
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { d.deps.Model.ActionHorizon = 0 })
	_, b := f.do(t, "GET", "/info", nil, nil)
	assert.Contains(t, string(b), `"shape":[40,132]`)
	resp, b := f.do(t, "POST", "/predict", body(t, nil), nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Equal(t, f.binding.Demo.Golden, decodeActions(t, b))
}

func decodeActions(t *testing.T, b []byte) map[string][][]float64 {
	t.Helper()
	var pr service.PredictResponse
	require.NoError(t, json.Unmarshal(b, &pr))
	return pr.Actions
}

// TestModelHorizonBelowEmbodiment: a model that denoises fewer steps than
// the embodiment decodes cannot serve it; the start fails.
func TestModelHorizonBelowEmbodiment(t *testing.T) {
	for _, h := range []int{-1, 8} {
		f := newFixture(t, false, func(c *config.Config, o *fixtureOptions, d *fixture) {
			c.WarmupRuns = 0
			d.deps.Model.ActionHorizon = h
		})
		f.emb.info.ActionHorizon = shortHorizon
		err := f.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil })
		require.Error(t, err, h)
		assert.Contains(t, err.Error(), "action_horizon")
	}
}
