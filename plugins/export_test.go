package plugins

// SetInstrumentForTest replaces the load-time rewrite until restore is
// called.
func SetInstrumentForTest(f func([]byte) ([]byte, error)) (restore func()) {
	old := instrument
	instrument = f
	return func() { instrument = old }
}
