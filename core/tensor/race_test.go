//go:build race

package tensor

// raceEnabled trims the exhaustive correctness loops under -race, where the
// float64 reference is ~20× slower; TestMatMulConcurrent still runs fully.
const raceEnabled = true
