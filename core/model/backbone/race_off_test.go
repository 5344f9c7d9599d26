//go:build !race

package backbone

const raceEnabled = false
