//go:build !race

package actionhead

const raceEnabled = false
