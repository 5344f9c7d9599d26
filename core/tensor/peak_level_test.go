package tensor

import "testing"

// TestFMAPeakLevel: FMAPeak measures a positive rate exactly where a SIMD
// level is in use (the first variant is not the portable code), and 0
// otherwise or for no threads.
func TestFMAPeakLevel(t *testing.T) {
	simd := Variants()[0].Name != "portable"
	g := FMAPeak(1)
	t.Logf("level %s: FMA peak, 1 thread: %.1f GFLOP/s", Variants()[0].Name, g)
	if simd && !(g > 0) {
		t.Fatalf("FMAPeak(1) = %v on level %s, want > 0", g, Variants()[0].Name)
	}
	if !simd && g != 0 {
		t.Fatalf("FMAPeak(1) = %v with the portable code, want 0", g)
	}
	if g := FMAPeak(0); g != 0 {
		t.Fatalf("FMAPeak(0) = %v, want 0", g)
	}
}
