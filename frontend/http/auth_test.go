package httpfront

import (
	"encoding/json"
	"errors"
	"github.com/gr00tgw/gr00tgw/service"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
)

func withKeys(keys ...string) fixtureOpt {
	return func(_ *config.Config, o *fixtureOptions, _ *fixture) {
		var ks []secure.Key
		for i, k := range keys {
			parsed, err := secure.ParseKeys(strings.NewReader(secure.Hash(k) + " label-" + string(rune('a'+i))))
			if err != nil {
				panic(err)
			}
			ks = append(ks, parsed...)
		}
		o.Keys = secure.NewKeyring(ks)
	}
}

// TestAPIKeys: with keys configured every route but the probes, /metrics
// and /admin/reload answers 401 {"error"} with WWW-Authenticate: Bearer
// before its handler runs, for a missing or wrong key; Bearer and
// X-API-Key both work; a route mounted after New (as frontend/oip mounts
// /v2/models/{name}/infer) is covered too. Without keys nothing changes.
func TestAPIKeys(t *testing.T) {
	f := newFixture(t, true, withKeys("key-1", "key-2"))
	mounted := false
	f.srv.App().Post("/v2/models/:model/infer", func(c *fiber.Ctx) error { mounted = true; return c.SendString("ok") })
	body := mustJSON(t, demoRequest(t))

	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		body               []byte
		want               int
	}{
		{"predict no key", "POST", "/predict", nil, body, 401},
		{"predict wrong key", "POST", "/predict", map[string]string{"Authorization": "Bearer key-3"}, body, 401},
		{"predict key as basic", "POST", "/predict", map[string]string{"Authorization": "Basic key-1"}, body, 401},
		{"predict bearer", "POST", "/predict", map[string]string{"Authorization": "Bearer key-1"}, body, 200},
		{"predict x-api-key", "POST", "/predict", map[string]string{"X-API-Key": "key-2"}, body, 200},
		{"v1 predict no key", "POST", "/v1/predict", nil, body, 401},
		{"oip infer no key", "POST", "/v2/models/oxe_droid/infer", nil, []byte("{}"), 401},
		{"oip infer wrong key", "POST", "/v2/models/oxe_droid/infer", map[string]string{"X-API-Key": "nope"}, []byte("{}"), 401},
		{"demo no key", "GET", "/demo", nil, nil, 401},
		{"demo key", "GET", "/demo", map[string]string{"X-API-Key": "key-1"}, nil, 200},
		{"info no key", "GET", "/info", nil, nil, 401},
		{"model metadata no key", "GET", "/v2/models/oxe_droid_relative_eef_relative_joint", nil, nil, 401},
		{"unknown route no key", "GET", "/nope", nil, nil, 401},
		{"health", "GET", "/health", nil, nil, 200},
		{"live", "GET", "/v2/health/live", nil, nil, 200},
		{"ready", "GET", "/v2/health/ready", nil, nil, 200},
		{"admin reload keeps its own token", "POST", "/admin/reload", map[string]string{"Authorization": "Bearer s3cret"}, nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := f.do(t, tc.method, tc.path, tc.body, tc.hdr)
			require.Equal(t, tc.want, resp.StatusCode, string(b))
			if tc.want != http.StatusUnauthorized {
				return
			}
			assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
			var e errorBody
			require.NoError(t, json.Unmarshal(b, &e))
			assert.Equal(t, service.CodeUnauthorized, e.Code)
			assert.Contains(t, e.Error, "missing or invalid API key")
			assert.NotContains(t, string(b), "key-1")
			assert.Contains(t, string(b), `Bearer <key>`, "the message reads as written, not \\u003ckey\\u003e")
		})
	}
	assert.False(t, mounted, "the mounted route's handler never ran without a key")
	resp, b := f.do(t, "POST", "/v2/models/oxe_droid/infer", []byte("{}"), map[string]string{"Authorization": "Bearer key-2"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.True(t, mounted)

	assert.True(t, errors.Is(service.Unauthorized("api_token", ""), service.ErrUnauthorized))

	// Off by default: no key needed anywhere.
	open := newFixture(t, true)
	resp, b = open.do(t, "POST", "/predict", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
}

func TestOpenPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/health": true, "/v2/health/live": true, "/v2/health/ready": true, "/metrics": true, "/admin/reload": true,
		"/predict": false, "/v1/predict": false, "/v2/models/x/infer": false, "/v2": false, "/demo": false,
		"/info": false, "/v2/health": false, "/healthz": false, "/health/": false, "/v2/healthx/live": false,
	} {
		assert.Equal(t, want, OpenPath(path), path)
	}
}
