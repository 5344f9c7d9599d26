package emu

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/core/safetensors"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/kernels/arena"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
)

// tinyDir is the n17-tiny golden checkpoint (testdata/n17-tiny/README.md
// says where it was copied from).
const tinyDir = "../../testdata/n17-tiny"

func readNpy(t *testing.T, name string) *npy.Array {
	a, err := npy.ReadFile(filepath.Join(tinyDir, "caseA", name))
	require.NoError(t, err)
	return a
}

func f32s(t *testing.T, name string) []float32 {
	v, err := readNpy(t, name).Float32s()
	require.NoError(t, err)
	return v
}

// The emulated DiT on the n17-tiny checkpoint reproduces the golden
// dit_out taps of case A (all four Euler steps) from the golden inputs:
// with fp32 weights within 1e-4 of the max magnitude, with the served
// mixed_dit (bfp8_b) arena at PCC ≥ 0.999.
func TestGoldenTinyDiT(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err, "the committed tiny checkpoint")
	d, err := schedule.FromConfig(raw)
	require.NoError(t, err)
	set, err := safetensors.Open(tinyDir)
	require.NoError(t, err)
	defer set.Close()
	src := arena.FromSafetensors(set)

	act, state, temb := f32s(t, "action_features.npy"), f32s(t, "state_features.npy"), f32s(t, "temb.npy")
	vl, want := f32s(t, "adapter_out.npy"), f32s(t, "dit_out.npy")
	ids, err := readNpy(t, "input_ids.npy").Int64s()
	require.NoError(t, err)
	am, err := readNpy(t, "attention_mask.npy").Int64s()
	require.NoError(t, err)
	S := len(ids)
	image, valid := make([]bool, S), make([]bool, S)
	for i, id := range ids {
		image[i], valid[i] = id == 151655, am[i] == 1
	}
	D, R, O, H := d.Width, d.Rows, d.OutDim, d.Rows-1

	for _, p := range []arena.Policy{arena.FP32(), arena.MixedDiT()} {
		s, err := schedule.Plan(d)
		require.NoError(t, err)
		pl, err := arena.Build(s, p)
		require.NoError(t, err)
		data, dig, err := pl.PackBytes(context.Background(), src)
		require.NoError(t, err)
		dit, err := New(pl, data, 2)
		require.NoError(t, err)
		kv, err := dit.PrepareCross(vl, S, image, valid)
		require.NoError(t, err)
		assert.Equal(t, 21, kv.TextKeys)
		assert.Equal(t, 448, kv.ImageKeys)
		var got []float32
		for k := 0; k < 4; k++ {
			x := append(append([]float32(nil), state...), act[k*H*D:(k+1)*H*D]...)
			out := make([]float32, R*O)
			require.NoError(t, dit.Forward(out, x, temb[k*D:(k+1)*D], kv))
			got = append(got, out...)
		}
		rel, c := maxRel(got, want), tensor.PCC(got, want)
		t.Logf("%s arena (%d B, %s): dit_out max rel %.3g, PCC %.7f", p.Name, pl.Size, dig, rel, c)
		if p.Name == "fp32" {
			assert.Less(t, rel, 1e-4)
		} else {
			assert.GreaterOrEqual(t, c, 0.999)
		}
	}
}
