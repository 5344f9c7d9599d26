//go:build race

package cpu

// raceEnabled: allocation assertions are skipped under -race (the
// instrumentation allocates).
const raceEnabled = true
