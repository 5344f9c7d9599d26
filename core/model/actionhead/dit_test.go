package actionhead

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/safetensors"
	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// planDiT is a test double: a DiT that runs another plan's fp32 blocks
// through the public interface, recording how it was called.
type planDiT struct {
	p        *DenoisePlan
	prepares int
	tembs    [][]float32
	fail     error
}

func (d *planDiT) PrepareCross(vl []float32, S int, imageMask, attnMask []bool) error {
	d.prepares++
	if d.fail != nil {
		return d.fail
	}
	return d.p.crossKV(vl, S, imageMask, attnMask)
}

func (d *planDiT) Forward(dst, x, temb []float32) error {
	s := -1
	for i := range d.p.m.temb {
		if slices.Equal(d.p.m.temb[i], temb) {
			s = i
		}
	}
	if s < 0 {
		return errors.New("unknown temb")
	}
	d.tembs = append(d.tembs, slices.Clone(temb))
	copy(d.p.z, x)
	d.p.dit(s)
	copy(dst, d.p.out)
	return nil
}

// TestUseDiT: a DiT installed with UseDiT is called once per Run for the
// cross K/V and once per step with the step's temb; computing the fp32
// blocks through the interface gives bit-identical actions and taps, and
// UseDiT(nil) restores the built-in path. PrepareCross errors wrap ErrInput.
func TestUseDiT(t *testing.T) {
	f := loadTiny(t, tensor.Default())
	c := f.cfg
	vl, _ := readF32(t, TapAdapter)
	dp, err := f.m.NewDenoisePlan(f.S)
	require.NoError(t, err)
	require.Nil(t, dp.DiT())
	want := make([]float32, c.Horizon*c.MaxActionDim)
	wantRec := &Recorder{}
	require.NoError(t, dp.Run(want, vl, f.S, f.imageMask, f.valid, f.state, f.noise, wantRec))

	other, err := f.m.NewDenoisePlan(f.S)
	require.NoError(t, err)
	alt := &planDiT{p: other}
	dp.UseDiT(alt)
	require.Equal(t, DiT(alt), dp.DiT())
	got := make([]float32, len(want))
	rec := &Recorder{}
	require.NoError(t, dp.Run(got, vl, f.S, f.imageMask, f.valid, f.state, f.noise, rec))
	require.Equal(t, want, got)
	require.Equal(t, 1, alt.prepares)
	require.Len(t, alt.tembs, c.NumSteps)
	for s := range c.NumSteps {
		require.Equal(t, f.m.Temb(s), alt.tembs[s])
	}
	for _, name := range []string{TapDiTOut, TapVelocity} {
		_, w, _ := wantRec.Stacked(name)
		_, g, _ := rec.Stacked(name)
		require.Equal(t, w, g, name)
	}
	require.Nil(t, f.m.Temb(c.NumSteps))

	alt.fail = errors.New("no keys")
	err = dp.Run(got, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil)
	require.ErrorIs(t, err, ErrInput)
	require.ErrorContains(t, err, "no keys")

	dp.UseDiT(nil)
	require.NoError(t, dp.Run(got, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil))
	require.Equal(t, want, got)
}

// TestLoadWithoutDiT: a model without its fp32 transformer refuses to Run
// until a DiT is installed, and then gives the same actions as the full
// model (the DiT here runs the full model's blocks).
func TestLoadWithoutDiT(t *testing.T) {
	f := loadTiny(t, tensor.Default())
	c := f.cfg
	vl, _ := readF32(t, TapAdapter)
	set, err := safetensors.Open(filepath.Join(tinyDir, "model.safetensors"))
	require.NoError(t, err)
	defer set.Close()
	bare, err := LoadWithoutDiT(c, FromSafetensors(set), tensor.Default(), droidSlot)
	require.NoError(t, err)
	require.False(t, bare.HasDiT())
	require.True(t, f.m.HasDiT())
	require.Equal(t, f.m.Temb(2), bare.Temb(2))

	full, err := f.m.NewDenoisePlan(f.S)
	require.NoError(t, err)
	want := make([]float32, c.Horizon*c.MaxActionDim)
	require.NoError(t, full.Run(want, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil))

	dp, err := bare.NewDenoisePlan(f.S)
	require.NoError(t, err)
	got := make([]float32, len(want))
	require.ErrorIs(t, dp.Run(got, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil), ErrConfig)
	other, err := f.m.NewDenoisePlan(f.S)
	require.NoError(t, err)
	dp.UseDiT(&planDiT{p: other})
	require.NoError(t, dp.Run(got, vl, f.S, f.imageMask, f.valid, f.state, f.noise, nil))
	require.Equal(t, want, got)
}
