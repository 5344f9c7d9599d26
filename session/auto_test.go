package session

import (
	"math"
	"testing"
	"time"
)

func TestAutoFrozen(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		latency time.Duration
		hz      float64
		overlap int
		want    int
	}{
		{"spec example DROID 150 ms at 15 Hz", 150 * ms, 15, 25, 3},
		{"exact product is not rounded up", 200 * ms, 15, 25, 3},
		{"just over a row", 200*ms + 1, 15, 25, 4},
		{"LIBERO 120 ms at 20 Hz", 120 * ms, 20, 10, 3},
		{"tiny latency is one row", time.Microsecond, 15, 25, 1},
		{"clamped to overlap", 2 * time.Second, 15, 5, 5},
		{"overlap zero", 150 * ms, 15, 0, 0},
		{"negative overlap", 150 * ms, 15, -3, 0},
		{"no estimate", 0, 15, 25, 0},
		{"negative latency", -ms, 15, 25, 0},
		{"zero rate", 150 * ms, 0, 25, 0},
		{"negative rate", 150 * ms, -15, 25, 0},
		{"NaN rate", 150 * ms, math.NaN(), 25, 0},
		{"Inf rate", 150 * ms, math.Inf(1), 25, 0},
		{"huge latency", time.Duration(math.MaxInt64), 1e6, 40, 40},
		{"fractional rate", 100 * ms, 12.5, 40, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := AutoFrozen(tc.latency, tc.hz, tc.overlap); got != tc.want {
				t.Errorf("AutoFrozen(%v, %v, %d) = %d, want %d", tc.latency, tc.hz, tc.overlap, got, tc.want)
			}
		})
	}
}

func TestAutoOverlap(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		elapsed time.Duration
		hz      float64
		horizon int
		want    int
	}{
		{"spec example: 15 rows executed at 15 Hz, H 40", time.Second, 15, 40, 25},
		{"partial row is not executed", time.Second - 1, 15, 40, 26},
		{"exact product is a whole row", 200 * ms, 15, 40, 37},
		{"LIBERO 8 of 16 at 20 Hz", 400 * ms, 20, 16, 8},
		{"just produced", 0, 15, 40, 40},
		{"clock stepped back", -time.Second, 15, 40, 40},
		{"fully executed", 40*time.Second/15 + 1, 15, 40, 0},
		{"one ns short of the last row", 40 * time.Second / 15, 15, 40, 1},
		{"long stale", time.Hour, 15, 40, 0},
		{"huge elapsed", time.Duration(math.MaxInt64), 1e6, 40, 0},
		{"zero horizon", time.Second, 15, 0, 0},
		{"negative horizon", time.Second, 15, -1, 0},
		{"zero rate", time.Second, 0, 40, 0},
		{"NaN rate", time.Second, math.NaN(), 40, 0},
		{"Inf rate", time.Second, math.Inf(1), 40, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := AutoOverlap(tc.elapsed, tc.hz, tc.horizon); got != tc.want {
				t.Errorf("AutoOverlap(%v, %v, %d) = %d, want %d", tc.elapsed, tc.hz, tc.horizon, got, tc.want)
			}
		})
	}
}

// TestAutoInvariants checks 0 ≤ F ≤ O ≤ H, what validateRTC requires of
// the options the defaults fill in, over a grid of inputs.
func TestAutoInvariants(t *testing.T) {
	t.Parallel()
	for _, hz := range []float64{0, 1, 7.5, 15, 20, 30, 1000} {
		for _, h := range []int{0, 1, 16, 40} {
			for el := -100 * time.Millisecond; el < 4*time.Second; el += 37 * time.Millisecond {
				o := AutoOverlap(el, hz, h)
				if o < 0 || o > max(h, 0) {
					t.Fatalf("AutoOverlap(%v, %v, %d) = %d, outside [0, %d]", el, hz, h, o, h)
				}
				for lat := time.Duration(0); lat < time.Second; lat += 43 * time.Millisecond {
					if f := AutoFrozen(lat, hz, o); f < 0 || f > o {
						t.Fatalf("AutoFrozen(%v, %v, %d) = %d, outside [0, %d]", lat, hz, o, f, o)
					}
				}
			}
		}
	}
}
