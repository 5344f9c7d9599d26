package adapt

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/gateway"
)

// chunkFake returns a [h, d] chunk whose value at (i, j) is i*1000+j.
type chunkFake struct {
	h, d int
	err  error
	got  *device.Inputs
}

func (f *chunkFake) Predict(_ context.Context, in *device.Inputs) (*device.Result, error) {
	f.got = in
	if f.err != nil {
		return nil, f.err
	}
	r := &device.Result{ActionPred: make([]float32, f.h*f.d), Horizon: f.h, ActionDim: f.d}
	for i := range f.h {
		for j := range f.d {
			r.ActionPred[i*f.d+j] = float32(i*1000 + j)
		}
	}
	return r, nil
}
func (f *chunkFake) Facts() device.Facts { return device.Facts{Backend: "fake"} }
func (f *chunkFake) Close() error        { return nil }

func TestChunkBackend(t *testing.T) {
	ctx := context.Background()
	fake := &chunkFake{h: 40, d: 132}
	b := &chunkBackend{Backend: fake, horizon: 16, modelHorizon: 40, dim: 132}

	// Seeded: the model's chunk, first 16 steps kept, rows intact.
	res, err := b.Predict(ctx, &device.Inputs{Seed: 7})
	require.NoError(t, err)
	assert.Equal(t, 16, res.Horizon)
	assert.Equal(t, 132, res.ActionDim)
	require.Len(t, res.ActionPred, 16*132)
	assert.Equal(t, float32(15*1000+131), res.ActionPred[16*132-1])
	assert.Equal(t, uint64(7), fake.got.Seed)

	// Full-chunk noise passes through unchanged.
	noise := make([]float32, 40*132)
	_, err = b.Predict(ctx, &device.Inputs{Noise: noise})
	require.NoError(t, err)
	assert.Len(t, fake.got.Noise, 40*132)

	// Horizon-shaped noise is a 400 naming "noise", before the device runs.
	fake.got = nil
	_, err = b.Predict(ctx, &device.Inputs{Noise: make([]float32, 16*132)})
	var fe gateway.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "noise", fe.Field())
	assert.Nil(t, fake.got)

	// Backend errors pass through untouched.
	boom := errors.New("boom")
	fake.err = boom
	_, err = b.Predict(ctx, &device.Inputs{})
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, "fake", b.Facts().Backend)
}
