//go:build linux

package runner_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/model/noise"
	"github.com/gr00tgw/gr00tgw/device/runner"
)

// echoLayout has a noise span of 40 values: torch's vectorised path (16 at
// a time) and its redrawn tail.
var echoLayout = runner.Layout{MaxPatches: 16, MaxImages: 1, MaxSeq: 8, PixelCols: 4, StateDim: 2, ActionHorizon: 5, ActionDim: 8}

// echoNoiseRunner (helper mode fake-echonoise) answers every PREDICT with
// the noise it was sent as action_pred, or with -1 everywhere when the
// noise was null (the runner would draw it from the seed). Its RESULTs
// carry extra {"echo_predictions": n}: a fact that changes after HELLO.
func echoNoiseRunner(w *runner.Wire) int {
	predictions := 0
	_ = w.Send(runner.MsgHello, 0, runner.HelloBody{Protocol: 1, PID: os.Getpid(), Facts: runner.Facts{Backend: "fake"}, Layout: echoLayout}, -1)
	segs := map[uint32][]byte{}
	for {
		m, err := w.Recv(0)
		if err != nil {
			return 1
		}
		switch m.Type {
		case runner.MsgPing:
			_ = w.Send(runner.MsgPong, m.ID, nil, -1)
		case runner.MsgAttach:
			var a runner.AttachBody
			_ = json.Unmarshal(m.Body, &a)
			mem, err := syscall.Mmap(m.FD, 0, a.Size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
			_ = syscall.Close(m.FD)
			if err != nil {
				_ = w.Send(runner.MsgError, m.ID, runner.ErrorBody{Kind: runner.KindInput, Message: err.Error()}, -1)
				continue
			}
			segs[a.Segment] = mem
			_ = w.Send(runner.MsgAttached, m.ID, a, -1)
		case runner.MsgPredict:
			var p runner.PredictBody
			_ = json.Unmarshal(m.Body, &p)
			mem := segs[p.Segment]
			out := mem[p.Output.Offset : p.Output.Offset+4*p.Output.Count]
			if p.Noise != nil {
				copy(out, mem[p.Noise.Offset:p.Noise.Offset+4*p.Noise.Count])
			} else {
				for i := 0; i < len(out); i += 4 {
					binary.LittleEndian.PutUint32(out[i:], math.Float32bits(-1))
				}
			}
			predictions++
			_ = w.Send(runner.MsgResult, m.ID, runner.ResultBody{Horizon: echoLayout.ActionHorizon, ActionDim: echoLayout.ActionDim,
				Stages: []runner.StageNS{{Name: "denoise", NS: 1}}, Extra: map[string]any{"echo_predictions": predictions}}, -1)
		case runner.MsgClose:
			_ = w.Send(runner.MsgClosed, m.ID, nil, -1)
			return 0
		}
	}
}

// TestPoolDrawNoise: with DrawNoise, a request without noise reaches the
// runner with the noise noise.Randn draws from its seed (the Go backend's,
// torch's CPU randn); explicit noise is sent as it is; without DrawNoise
// the noise goes null (the runner draws it).
func TestPoolDrawNoise(t *testing.T) {
	n := echoLayout.ActionHorizon * echoLayout.ActionDim
	predict := func(p *runner.Pool, seed uint64, nz []float32) []float32 {
		in := fakeInputs()
		in.Seed, in.Noise = seed, nz
		res, err := p.Predict(context.Background(), in)
		require.NoError(t, err)
		require.Len(t, res.ActionPred, n)
		return res.ActionPred
	}
	randn := func(seed uint64) []float32 {
		v := make([]float32, n)
		noise.Randn(v, seed)
		return v
	}

	p, err := openPool(t, "fake-echonoise", 1, runner.Options{DrawNoise: true})
	require.NoError(t, err)
	defer p.Close()
	for _, seed := range []uint64{42, 7, 1 << 40} {
		bitsEqual(t, randn(seed), predict(p, seed, nil))
	}
	explicit := make([]float32, n)
	for i := range explicit {
		explicit[i] = float32(i) / 8
	}
	bitsEqual(t, explicit, predict(p, 42, explicit))
	bitsEqual(t, randn(42), predict(p, 42, nil)) // the span was written again, not left over
	require.NoError(t, p.Close())

	p, err = openPool(t, "fake-echonoise", 1, runner.Options{})
	require.NoError(t, err)
	defer p.Close()
	got := predict(p, 42, nil)
	for i, x := range got {
		require.Equal(t, float32(-1), x, "action_pred[%d]: noise was sent without DrawNoise", i)
	}
	bitsEqual(t, explicit, predict(p, 42, explicit))
}

// TestPoolDrawNoiseGoRunner: the Go runner given the client's noise for a
// seed answers what the in-process backend does for that seed.
func TestPoolDrawNoiseGoRunner(t *testing.T) {
	in := caseAInputs(t)
	in.Noise, in.Seed = nil, 1234
	want := reference(t, in)
	p, err := openPool(t, "serve", 1, runner.Options{DrawNoise: true})
	require.NoError(t, err)
	defer p.Close()
	res, err := p.Predict(context.Background(), in)
	require.NoError(t, err)
	bitsEqual(t, want, res.ActionPred)
}

// TestPoolMergesResultFacts: facts a RESULT reports as changed (extra) are
// what Facts reports from then on, HELLO's other facts kept.
func TestPoolMergesResultFacts(t *testing.T) {
	p, err := openPool(t, "fake-echonoise", 1, runner.Options{})
	require.NoError(t, err)
	defer p.Close()
	before := p.Facts()
	require.NotContains(t, before.Extra, "echo_predictions")
	for range 2 {
		_, err := p.Predict(context.Background(), fakeInputs())
		require.NoError(t, err)
	}
	f := p.Facts()
	require.Equal(t, float64(2), f.Extra["echo_predictions"])
	require.Equal(t, "process", f.Extra["isolation"], "HELLO's facts kept")
	require.NotContains(t, before.Extra, "echo_predictions", "an earlier snapshot is not modified")
}
