package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
)

// TestManifestControlHz: the shipped manifest template states the
// embodiment's control rate (source in plugin.yaml's comment), which the
// server's real-time chunking defaults are derived from.
func TestManifestControlHz(t *testing.T) {
	b, err := os.ReadFile(plugins.ManifestFile)
	require.NoError(t, err)
	m, err := plugins.ParseManifestTemplate(b)
	require.NoError(t, err)
	hz, ok := m.ControlRate()
	require.True(t, ok, "plugin.yaml has no control_hz")
	assert.Equal(t, 20.0, hz)
}
