//go:build purego

package backbone

import "testing"

// TestPuregoIsScalar: -tags purego runs the pure-Go loops.
func TestPuregoIsScalar(t *testing.T) {
	if useAVX2 {
		t.Fatal("useAVX2 is set in a purego build")
	}
}
