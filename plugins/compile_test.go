package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A malformed module on which wazero's validator panics (found by
// FuzzInstrument: a call through an out-of-range type index) is refused
// with an error; the host does not crash.
func TestMalformedModuleRefused(t *testing.T) {
	raw, err := os.ReadFile("internal/rewrite/testdata/fuzz/FuzzInstrument/53c8d6c4355ea5fd")
	require.NoError(t, err)
	lines := strings.SplitN(string(raw), "\n", 2)
	require.Len(t, lines, 2)
	lit := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(lines[1]), "[]byte("), ")")
	s, err := strconv.Unquote(lit)
	require.NoError(t, err)
	wasm := []byte(s)
	sum := sha256.Sum256(wasm)
	m := &Manifest{Name: "bad", Version: "0.1.0", ABI: 1, SHA256: hex.EncodeToString(sum[:]), Embodiments: []string{"test_bad"}}
	for _, mode := range []DeadlineMode{DeadlineStopFlag, DeadlineCloseOnContextDone} {
		require.NotPanics(t, func() {
			_, err = New(context.Background(), m, wasm, WithCacheDir(""), WithDeadlineMode(mode))
		})
		require.Error(t, err, "mode %v", mode)
		t.Log(err)
	}
}
