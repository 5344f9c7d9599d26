package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecureKeys: tls.* and auth.* are off by default, load from every
// layer, and a missing, unpaired or directory path fails at start naming
// the key and its source.
func TestSecureKeys(t *testing.T) {
	d := Default()
	assert.Empty(t, d.TLS.CertFile, "TLS off by default")
	assert.Empty(t, d.Auth.APIKeysFile, "API keys off by default")
	dir := t.TempDir()
	cert, key, keys := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "keys")
	for _, p := range []string{cert, key, keys} {
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name    string
		file    string
		env     []string
		args    []string
		check   func(t *testing.T, l *Loaded)
		wantErr string
	}{
		{name: "flags", args: []string{"--tls-cert-file=" + cert, "--tls-key-file=" + key, "--api-keys-file=" + keys},
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, TLS{CertFile: cert, KeyFile: key}, l.Config.TLS)
				assert.Equal(t, keys, l.Config.Auth.APIKeysFile)
				assert.Equal(t, Origin{LayerFlag, "--api-keys-file"}, l.Provenance["auth.api_keys_file"])
			}},
		{name: "env", env: []string{"GR00TGW_TLS_CERT_FILE=" + cert, "GR00TGW_TLS_KEY_FILE=" + key, "GR00TGW_AUTH_API_KEYS_FILE=" + keys},
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, cert, l.Config.TLS.CertFile)
				assert.Equal(t, keys, l.Config.Auth.APIKeysFile)
			}},
		{name: "file", file: "tls:\n  cert_file: " + cert + "\n  key_file: " + key + "\nauth:\n  api_keys_file: " + keys + "\n",
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, key, l.Config.TLS.KeyFile)
				assert.Equal(t, keys, l.Config.Auth.APIKeysFile)
			}},
		{name: "cert without key", args: []string{"--tls-cert-file=" + cert}, wantErr: "config: key[tls.key_file] (from default): must be set with tls.cert_file"},
		{name: "key without cert", env: []string{"GR00TGW_TLS_KEY_FILE=" + key}, wantErr: "key[tls.cert_file] (from default): must be set with tls.key_file"},
		{name: "missing cert", args: []string{"--tls-cert-file=" + missing, "--tls-key-file=" + key}, wantErr: "key[tls.cert_file] (from flag --tls-cert-file): open " + missing},
		{name: "missing keys file", args: []string{"--api-keys-file=" + missing}, wantErr: "key[auth.api_keys_file] (from flag --api-keys-file): open " + missing},
		{name: "keys file is a directory", env: []string{"GR00TGW_AUTH_API_KEYS_FILE=" + dir}, wantErr: "key[auth.api_keys_file] (from env GR00TGW_AUTH_API_KEYS_FILE): " + dir + " is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{Environ: tc.env}
			if src.Environ == nil {
				src.Environ = []string{}
			}
			if tc.file != "" {
				src.File = writeFile(t, tc.file)
			}
			src.Flags = parsedFlags(t, tc.args...)
			l, err := Load(src)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, l)
		})
	}
}
