//go:build gwbench

package envelope

// DecodeCheckedForBench decodes buf with the checked path only (build tag
// gwbench: breakdown benchmarks compare it with Decode's fast path).
func DecodeCheckedForBench(e *Envelope, buf []byte) error { return e.decodeChecked(buf) }

// DecodeNoReuseForBench is Decode without the layout reuse (build tag
// gwbench): a full decode, as for a buffer seen for the first time.
func DecodeNoReuseForBench(e *Envelope, buf []byte) error {
	e.lastBuf = nil
	return e.Decode(buf)
}
