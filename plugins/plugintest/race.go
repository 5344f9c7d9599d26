//go:build race

package plugintest

// raceEnabled: the race detector slows wazero and the guests several times.
const raceEnabled = true
