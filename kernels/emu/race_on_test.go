//go:build race

package emu

// raceEnabled: allocation counts are skipped under -race (the
// instrumentation allocates).
const raceEnabled = true
