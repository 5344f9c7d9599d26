package emu

import (
	"context"
	"testing"

	"github.com/gr00tgw/gr00tgw/kernels/arena"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Session reuses its buffers across requests of different key counts
// and still matches a fresh DiT.Forward bit for bit; once warm, its
// PrepareCross and Forward allocate nothing.
func TestSessionReuseAndAllocs(t *testing.T) {
	d := schedule.N17Tiny()
	dit, _, err := Load(context.Background(), arena.Synthetic{Dims: d, Seed: 3}, d, arena.MixedDiT(), 2)
	require.NoError(t, err)
	sess := dit.NewSession()
	defer sess.Close()
	in := randomInputs(d, 7)
	out := make([]float32, d.Rows*d.OutDim)
	want := make([]float32, len(out))
	// three shapes: all keys, with padding (fewer keys), all keys again
	valid := make([]bool, in.vlRows)
	for i := range valid {
		valid[i] = i%5 != 0
	}
	for _, v := range [][]bool{nil, valid, nil, valid} {
		require.NoError(t, sess.PrepareCross(in.vl, in.vlRows, in.image, v))
		require.NoError(t, sess.Forward(out, in.x, in.temb))
		kv, err := dit.PrepareCross(in.vl, in.vlRows, in.image, v)
		require.NoError(t, err)
		require.NoError(t, dit.Forward(want, in.x, in.temb, kv))
		require.Equal(t, want, out)
	}
	// a failed PrepareCross leaves no K/V behind
	require.Error(t, sess.PrepareCross(in.vl, in.vlRows, make([]bool, in.vlRows), nil))
	assert.ErrorIs(t, sess.Forward(out, in.x, in.temb), ErrShape)
	require.NoError(t, sess.PrepareCross(in.vl, in.vlRows, in.image, valid))
	if testing.Short() || raceEnabled {
		t.Log("allocation check not run: counts are meaningless under -race, and -short skips it")
		return
	}
	allocs := testing.AllocsPerRun(3, func() {
		if err := sess.PrepareCross(in.vl, in.vlRows, in.image, valid); err != nil {
			t.Fatal(err)
		}
		if err := sess.Forward(out, in.x, in.temb); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "warm session PrepareCross+Forward allocations")
	// Close stops the helpers; the session keeps working serially.
	require.NoError(t, sess.Close())
	require.NoError(t, sess.Forward(out, in.x, in.temb))
	require.Equal(t, want, out)
}

func BenchmarkSessionForwardTiny(b *testing.B) {
	d := schedule.N17Tiny()
	dit, _, err := Load(context.Background(), arena.Synthetic{Dims: d}, d, arena.MixedDiT(), 2)
	require.NoError(b, err)
	sess := dit.NewSession()
	defer sess.Close()
	in := randomInputs(d, 1)
	require.NoError(b, sess.PrepareCross(in.vl, in.vlRows, in.image, nil))
	out := make([]float32, d.Rows*d.OutDim)
	require.NoError(b, sess.Forward(out, in.x, in.temb)) // warm: modulation buffers
	b.ReportAllocs()
	for b.Loop() {
		if err := sess.Forward(out, in.x, in.temb); err != nil {
			b.Fatal(err)
		}
	}
}

// The schedule cache stays bounded however many key-count shapes arrive.
func TestScheduleCacheBounded(t *testing.T) {
	d := schedule.N17Tiny()
	dit, _, err := Load(context.Background(), arena.Synthetic{Dims: d, Seed: 3}, d, arena.MixedDiT(), 1)
	require.NoError(t, err)
	for text := 1; text <= maxSchedules+8; text++ {
		_, err := dit.schedule(text, 7)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, len(dit.scheds), maxSchedules)
	_, ok := dit.scheds[[2]int{d.TextKeys, d.ImageKeys}]
	assert.True(t, ok, "the planned shape stays cached")
}
