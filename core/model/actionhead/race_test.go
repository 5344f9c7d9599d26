//go:build race

package actionhead

// The race detector makes sync primitives and pools allocate.
const raceEnabled = true
