package deploycheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecurityValues renders the default and KServe sets with
// security.tlsSecret and security.apiKeysSecret set: every object still
// validates strictly, the Secrets are mounted read-only where the
// GR00TGW_TLS_* and GR00TGW_AUTH_API_KEYS_FILE variables point, and the
// probes (and the Deployment's scrape annotation) switch to HTTPS.
func TestSecurityValues(t *testing.T) {
	root := checkout(t)
	ch, err := LoadChart(root)
	require.NoError(t, err)
	v := validator(t)
	for _, base := range []ValueSet{ValueSets[0], ValueSets[3]} {
		t.Run(base.Name, func(t *testing.T) {
			vals, err := ReadValues(root, base)
			require.NoError(t, err)
			vals["security"] = map[string]any{"tlsSecret": "gr00tgw-tls", "apiKeysSecret": "gr00tgw-api-keys", "apiKeysSecretKey": "keys.txt"}
			r, err := Render(ch, ValueSet{Name: base.Name + "-secure"}, vals)
			require.NoError(t, err)
			require.NoError(t, v.ValidateAll([]*Rendered{r}))

			var pod, ctr map[string]any
			if d := byKind(r, "Deployment"); len(d) > 0 {
				pod = path(t, d[0], "spec", "template", "spec").(map[string]any)
				ctr = path(t, pod, "containers", 0).(map[string]any)
				assert.Equal(t, "https", path(t, d[0], "spec", "template", "metadata", "annotations", "prometheus.io/scheme"))
			} else {
				sr := byKind(r, "ServingRuntime")[0]
				pod = path(t, sr, "spec").(map[string]any)
				ctr = path(t, pod, "containers", 0).(map[string]any)
			}
			env := map[string]string{}
			for _, e := range ctr["env"].([]any) {
				m := e.(map[string]any)
				if s, ok := m["value"].(string); ok {
					env[m["name"].(string)] = s
				}
			}
			assert.Equal(t, "/var/run/secrets/gr00tgw/tls/tls.crt", env["GR00TGW_TLS_CERT_FILE"])
			assert.Equal(t, "/var/run/secrets/gr00tgw/tls/tls.key", env["GR00TGW_TLS_KEY_FILE"])
			assert.Equal(t, "/var/run/secrets/gr00tgw/keys/keys.txt", env["GR00TGW_AUTH_API_KEYS_FILE"])
			for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
				assert.Equal(t, "HTTPS", path(t, ctr, probe, "httpGet", "scheme"), probe)
			}
			mounts := map[string]map[string]any{}
			for _, m := range ctr["volumeMounts"].([]any) {
				mm := m.(map[string]any)
				mounts[mm["mountPath"].(string)] = mm
			}
			secrets := map[string]string{}
			for _, vol := range pod["volumes"].([]any) {
				vm := vol.(map[string]any)
				if s, ok := vm["secret"].(map[string]any); ok {
					secrets[vm["name"].(string)] = s["secretName"].(string)
				}
			}
			for dir, secret := range map[string]string{"/var/run/secrets/gr00tgw/tls": "gr00tgw-tls", "/var/run/secrets/gr00tgw/keys": "gr00tgw-api-keys"} {
				m := mounts[dir]
				require.NotNil(t, m, "mount %s", dir)
				assert.Equal(t, true, m["readOnly"], dir)
				assert.Equal(t, secret, secrets[m["name"].(string)], dir)
			}
		})
	}
	// Off by default: no Secret volume, plain-HTTP probes.
	ctr := path(t, byKind(set(t, "default"), "Deployment")[0], "spec", "template", "spec", "containers", 0)
	_, hasScheme := path(t, ctr, "readinessProbe", "httpGet").(map[string]any)["scheme"]
	assert.False(t, hasScheme)
}
