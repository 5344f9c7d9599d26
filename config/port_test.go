package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// PORT (Knative/KServe, most container platforms) is a port-only alias of
// addr: PORT=8080 listens on every interface, GR00TGW_ADDR and --addr win
// over it, and a value that is not a port is refused naming env PORT.
func TestPortEnvAlias(t *testing.T) {
	k, ok := Lookup("addr")
	require.True(t, ok)
	assert.Equal(t, []string{"PORT", "GR00TGW_ADDR"}, k.Env, "PORT first (lowest), the canonical name last")

	l, err := Load(Sources{Environ: []string{"PORT=8080"}})
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:8080", l.Config.Addr)
	assert.Equal(t, Origin{LayerEnv, "PORT"}, l.Provenance["addr"])

	l, err = Load(Sources{Environ: []string{" PORT=1"}}) // not the name PORT: ignored
	require.NoError(t, err)
	assert.Equal(t, Default().Addr, l.Config.Addr)

	l, err = Load(Sources{Environ: []string{"PORT= 9000 "}})
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:9000", l.Config.Addr, "surrounding blanks are trimmed")

	l, err = Load(Sources{Environ: []string{"PORT=8080", "GR00TGW_ADDR=127.0.0.1:9001"}})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9001", l.Config.Addr, "GR00TGW_ADDR wins over PORT")
	assert.Equal(t, Origin{LayerEnv, "GR00TGW_ADDR"}, l.Provenance["addr"])

	l, err = Load(Sources{Environ: []string{"PORT=8080"}, Flags: parsedFlags(t, "--addr", "127.0.0.1:7000")})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7000", l.Config.Addr, "a flag wins over PORT")

	// PORT beats the file (environment over file, as for every key).
	file := writeFile(t, "addr: 127.0.0.1:6000\n")
	l, err = Load(Sources{File: file, Environ: []string{"PORT=8081"}})
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:8081", l.Config.Addr)

	for _, bad := range []string{"", "0", "65536", "-1", "http", "8080x", "+8080", "08080", ":8080", "127.0.0.1:8080", "80 80"} {
		_, err := Load(Sources{Environ: []string{"PORT=" + bad}})
		require.Error(t, err, "PORT=%q", bad)
		var ke *KeyError
		require.True(t, errors.As(err, &ke), "PORT=%q: %v", bad, err)
		assert.Equal(t, "addr", ke.Key)
		assert.Equal(t, "env PORT", ke.Source)
		assert.Contains(t, err.Error(), "port number", "PORT=%q", bad)
	}
	for _, good := range []string{"1", "80", "8080", "65535"} {
		l, err := Load(Sources{Environ: []string{"PORT=" + good}})
		require.NoError(t, err, "PORT=%q", good)
		assert.Equal(t, "0.0.0.0:"+good, l.Config.Addr)
	}
}
