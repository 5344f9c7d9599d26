//go:build race

package backbone

// raceEnabled: allocation assertions are skipped under -race (the
// instrumentation allocates).
const raceEnabled = true
