// Package wasmstr has string comparisons for plugin guests that are cheap
// on Go's wasm backend. There, string == and strings.HasPrefix end in
// runtime.memequal, a byte-at-a-time wasm loop (and under the host's
// stop-check rewrite every iteration also pays a check); these helpers
// compare 8 or 4 bytes per load. Built for any other GOARCH they are the
// plain operators, which the compiler already vectorises.
package wasmstr
