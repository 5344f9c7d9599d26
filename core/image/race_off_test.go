//go:build !race

package image

const raceEnabled = false
