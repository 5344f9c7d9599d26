package plugins_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// TestReencodeFeature: the reencode capability is the description's
// feature, checked against the module's exports at load. (The shipped
// plugins' gw_reencode is tested in embodiments/droid and
// embodiments/libero.)
func TestReencodeFeature(t *testing.T) {
	_, err := plugintest.Open(t, rawWith("reencodefeature"))
	require.ErrorContains(t, err, "wasm: plugin[raw] describe lists feature reencode but the module does not export gw_reencode, want (i32,i32) -> i64")

	// A module without the feature: never called, whatever it exports
	// (PDK guests all export gw_reencode; misbehave does not implement it).
	for _, g := range []plugintest.Guest{raw, misbehave} {
		p := plugintest.MustOpen(t, g)
		assert.False(t, p.CanReencode(), p.Name())
		_, err = p.Reencode(context.Background(), &plugins.ReencodeInput{ActionPred: make([]float32, 4*8), Rows: 4, Dim: 8})
		assert.True(t, errors.Is(err, plugins.ErrNoReencode), "%s: %v", p.Name(), err)
	}
}
