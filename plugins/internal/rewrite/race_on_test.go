//go:build race

package rewrite

// raceEnabled shortens the single-goroutine differential test under the
// race detector, which has nothing to find there and slows it tenfold.
const raceEnabled = true
