//go:build linux

package runnertest

import (
	"math"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	want := []float32{0, 1, -2.5, 3}
	negZero := float32(math.Copysign(0, -1))
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		got  []float32
		tol  float64
		err  string // "" = equal
	}{
		{"exact", []float32{0, 1, -2.5, 3}, 0, ""},
		{"exact -0 differs", []float32{negZero, 1, -2.5, 3}, 0, "action_pred[0] = -0, want 0 (bit-exact)"},
		{"exact one ulp", []float32{0, math.Nextafter32(1, 2), -2.5, 3}, 0, "action_pred[1] = 1.0000001, want 1 (bit-exact)"},
		{"length", []float32{0, 1}, 0, "action_pred has 2 values, want 4"},
		{"within", []float32{0.001, 0.999, -2.5005, 3}, 1e-2, ""},
		{"-0 within", []float32{negZero, 1, -2.5, 3}, 1e-6, ""},
		{"at the bound", []float32{0, 1, -2.5, 3.25}, 0.25, ""},
		{"over", []float32{0.001, 0.9, -2.5, 3}, 1e-2, "action_pred[1] = 0.9, want 1: max|d| 0.1000000238"},
		{"nan", []float32{0, nan, -2.5, 3}, 1, "action_pred[1] = NaN, want 1 (tolerance 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := compare(tc.got, want, tc.tol)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("compare: %v, want equal", err)
			case tc.err != "" && err == nil:
				t.Fatalf("compare: equal, want %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("compare: %q, want it to contain %q", err, tc.err)
			}
		})
	}
}
