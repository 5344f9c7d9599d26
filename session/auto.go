package session

import (
	"math"
	"time"
)

// rowsEps absorbs floating-point noise in duration × rate products: a
// product within 1e-9 rows of an integer counts as that integer, so 200 ms
// at 15 Hz is 3 rows, not ceil(3.0000000000000004) = 4.
const rowsEps = 1e-9

// rows returns d × hz in rows (control steps), computed from integer
// nanoseconds so exact products stay exact.
func rows(d time.Duration, hz float64) float64 {
	return float64(d.Nanoseconds()) * hz / 1e9
}

func validHz(hz float64) bool { return hz > 0 && !math.IsInf(hz, 0) } // NaN fails hz > 0

// AutoFrozen is the server-measured default of rtc_frozen_steps (issue 27
// point 4; ../shared/spec/rtc.md §8): F = ceil(latency × controlHz), the
// rows the robot executes from the previous chunk while the new one is
// computed and delivered, clamped to [0, overlap].
//
// Edge cases: latency ≤ 0 (no estimate yet), a controlHz that is not a
// finite number > 0, or overlap ≤ 0 give 0; a product too large for an int
// gives overlap. A product within 1e-9 of an integer counts as that
// integer (float noise does not add a row).
func AutoFrozen(latency time.Duration, controlHz float64, overlap int) int {
	if latency <= 0 || !validHz(controlHz) || overlap <= 0 {
		return 0
	}
	f := math.Ceil(rows(latency, controlHz) - rowsEps)
	if f >= float64(overlap) {
		return overlap
	}
	return max(int(f), 0)
}

// AutoOverlap is the server-measured default of rtc_overlap_steps (issue
// 27 point 4; ../shared/spec/rtc.md §8): O = horizon − e, where e =
// floor(elapsed × controlHz) are the rows of the previous chunk executed
// since it was produced (elapsed = now − State.ProducedAt), clamped to
// [0, horizon]: the unexecuted tail of the previous chunk, which the new
// chunk's first rows repeat.
//
// Edge cases: horizon ≤ 0 gives 0; elapsed ≤ 0 (a clock step backwards, or
// a request at the instant the chunk was produced) counts no executed rows
// and gives horizon; a controlHz that is not a finite number > 0 gives 0
// (without a rate nothing can be matched, so no overlap: RTC off); a chunk
// older than horizon / controlHz is fully executed and gives 0, as does a
// product too large for an int. The estimate is an upper bound on the rows
// really executed: the robot starts the chunk only once the response
// reaches it, a latency later (which AutoFrozen accounts for). A product
// within 1e-9 of an integer counts as that integer.
func AutoOverlap(elapsed time.Duration, controlHz float64, horizon int) int {
	if horizon <= 0 || !validHz(controlHz) {
		return 0
	}
	if elapsed <= 0 {
		return horizon
	}
	e := math.Floor(rows(elapsed, controlHz) + rowsEps)
	if e >= float64(horizon) {
		return 0
	}
	return horizon - int(e)
}
