package actionhead

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRTCStrengths: the spec's worked example (O = 6, F = 2, r = 6.0, as
// torch 1.13 computes it) bit for bit, and the shape of the ramp.
func TestRTCStrengths(t *testing.T) {
	r := RTC{Horizon: 40, Overlap: 6, Frozen: 2, RampRate: 6}
	s := make([]float32, 40)
	r.Strengths(s)
	assert.Equal(t, []float32{0, 0}, s[:2])
	want := []uint32{0x3f3356bd, 0x3f695aca, 0x3f799fb7, 0x3f7e862b}
	for i, w := range want {
		assert.Equal(t, w, math.Float32bits(s[2+i]), "s[%d] = %v", 2+i, s[2+i])
	}
	for i := 6; i < 40; i++ {
		require.Equal(t, float32(1), s[i])
	}
	for _, c := range []struct{ o, f int }{{0, 0}, {5, 5}, {40, 0}, {20, 19}} {
		r := RTC{Horizon: 40, Overlap: c.o, Frozen: c.f, RampRate: 2.5}
		r.Strengths(s)
		for i, v := range s {
			switch {
			case i < c.f:
				require.Zero(t, v, "O=%d F=%d row %d frozen", c.o, c.f, i)
			case i >= c.o:
				require.Equal(t, float32(1), v)
			default:
				require.True(t, v > 0 && v < 1, "O=%d F=%d row %d ramp %v", c.o, c.f, i, v)
			}
		}
	}
}

func TestRTCValidate(t *testing.T) {
	prev := make([]float32, 40*132)
	ok := RTC{Prev: prev, PrevRows: 40, Horizon: 40, Overlap: 10, Frozen: 3, RampRate: 6}
	require.NoError(t, ok.Validate(40, 132))
	nan := append([]float32(nil), prev...)
	nan[133] = float32(math.NaN())
	for name, c := range map[string]struct {
		mut  func(r *RTC)
		want string
	}{
		"O > H":      {func(r *RTC) { r.Overlap = 41 }, "rtc_overlap_steps 41"},
		"F > O":      {func(r *RTC) { r.Frozen = 11 }, "rtc_frozen_steps 11"},
		"F < 0":      {func(r *RTC) { r.Frozen = -1 }, "rtc_frozen_steps -1"},
		"H > rows":   {func(r *RTC) { r.Horizon = 41 }, "action_horizon 41"},
		"H = 0":      {func(r *RTC) { r.Horizon = 0 }, "action_horizon 0"},
		"r = 0":      {func(r *RTC) { r.RampRate = 0 }, "rtc_ramp_rate 0"},
		"r NaN":      {func(r *RTC) { r.RampRate = math.NaN() }, "rtc_ramp_rate NaN"},
		"r Inf":      {func(r *RTC) { r.RampRate = math.Inf(1) }, "rtc_ramp_rate +Inf"},
		"prev shape": {func(r *RTC) { r.Prev = prev[:100] }, "rtc_prev_action has 100 values"},
		"prev rows":  {func(r *RTC) { r.PrevRows = 41 }, "rtc_prev_action has 41 rows"},
		"prev NaN":   {func(r *RTC) { r.Prev = nan }, "rtc_prev_action[1][1] is NaN"},
	} {
		t.Run(name, func(t *testing.T) {
			r := ok
			c.mut(&r)
			err := r.Validate(40, 132)
			require.ErrorIs(t, err, ErrInput)
			assert.ErrorContains(t, err, c.want)
		})
	}
}
