//go:build race

package image

// raceEnabled: the race detector makes sync.Pool drop items and slows
// scans ~10x; tests adapt.
const raceEnabled = true
