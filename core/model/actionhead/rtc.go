package actionhead

import (
	"fmt"
	"math"
)

// RTC is real-time chunking by inpainting, N1.7's own (upstream
// Gr00tN1d7ActionHead.get_action_with_features; ../shared/spec/rtc.md §1):
// the new chunk starts from the previous one's tail and freezes the rows the
// robot executes while the model runs.
//
//   - Prev [PrevRows, MaxActionDim] is the previous chunk as the model
//     produced it (normalised action_pred, padded columns included).
//   - Horizon (H) is the unpadded horizon of Prev: rows 0..Overlap−1 of the
//     initial x become Prev rows H−Overlap..H−1, all columns.
//   - Rows below Frozen (F) never move: they end equal to those Prev rows
//     exactly. Rows F..Overlap−1 (O) move by a ramp of strengths strictly
//     between 0 and 1 (RampRate r); rows from O on are sampled fully.
//
// Overlap = Frozen = 0 is the plain sampler, bit for bit.
type RTC struct {
	Prev                     []float32
	PrevRows                 int
	Horizon, Overlap, Frozen int
	RampRate                 float64
}

// Validate refuses what upstream would assert on, index out of range with,
// or silently get wrong (spec §2): it wants integers 0 ≤ F ≤ O ≤ H ≤ PrevRows
// ≤ horizon, a finite RampRate > 0, Prev of PrevRows·actionDim finite values.
// Errors name the option (upstream's names) and wrap ErrInput.
func (r *RTC) Validate(horizon, actionDim int) error {
	switch {
	case r.PrevRows < 1 || r.PrevRows > horizon:
		return fmt.Errorf("%w: rtc_prev_action has %d rows, want 1..%d", ErrInput, r.PrevRows, horizon)
	case len(r.Prev) != r.PrevRows*actionDim:
		return fmt.Errorf("%w: rtc_prev_action has %d values, want %d rows × %d", ErrInput, len(r.Prev), r.PrevRows, actionDim)
	case r.Horizon < 1 || r.Horizon > r.PrevRows:
		return fmt.Errorf("%w: action_horizon %d is outside 1..%d (the previous chunk's rows)", ErrInput, r.Horizon, r.PrevRows)
	case r.Overlap < 0 || r.Overlap > r.Horizon:
		return fmt.Errorf("%w: rtc_overlap_steps %d is outside 0..action_horizon %d", ErrInput, r.Overlap, r.Horizon)
	case r.Frozen < 0 || r.Frozen > r.Overlap:
		return fmt.Errorf("%w: rtc_frozen_steps %d is outside 0..rtc_overlap_steps %d", ErrInput, r.Frozen, r.Overlap)
	case math.IsNaN(r.RampRate) || math.IsInf(r.RampRate, 0) || r.RampRate <= 0:
		return fmt.Errorf("%w: rtc_ramp_rate %v: want a finite number > 0", ErrInput, r.RampRate)
	}
	for i, v := range r.Prev {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: rtc_prev_action[%d][%d] is %v", ErrInput, i/actionDim, i%actionDim, v)
		}
	}
	return nil
}

// Strengths writes each row's update strength into s (len = the model's
// horizon): 0 below Frozen, the ramp g_1..g_{n−2} on rows Frozen..Overlap−1
// with n = Overlap − Frozen + 2, 1 from Overlap on. g_j = (1 − e^(−r·t_j)) /
// max(1 − e^(−r·t_{n−1}), 1e-8) on t = linspace(0, 1, n) in float32 (torch's
// element formula), each operation rounded to float32.
func (r *RTC) Strengths(s []float32) {
	for i := range s {
		switch {
		case i < r.Frozen:
			s[i] = 0
		case i >= r.Overlap:
			s[i] = 1
		}
	}
	n := r.Overlap - r.Frozen + 2
	if n <= 2 {
		return
	}
	rate := float32(r.RampRate)
	g := func(t float32) float32 { return 1 - float32(math.Exp(float64(-rate*t))) }
	den := max(g(linspace01(n-1, n)), 1e-8)
	for j := 1; j <= n-2; j++ {
		s[r.Frozen+j-1] = g(linspace01(j, n)) / den
	}
}

// linspace01 is element j of torch.linspace(0, 1, n) in float32: step·j in
// the first half, 1 − step·(n−1−j) in the second.
func linspace01(j, n int) float32 {
	step := float32(1) / float32(n-1)
	if j < n/2 {
		return step * float32(j)
	}
	return 1 - float32(step*float32(n-1-j)) // rounded product, no FMA (torch's CPU kernel)
}
