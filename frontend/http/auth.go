package httpfront

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/service"
)

// OpenPath reports whether an HTTP path is served without an API key
// when keys are configured: the probes (/health, /v2/health/live,
// /v2/health/ready), /metrics (scraped by Prometheus, which carries no
// key; it holds counts, not data) and /admin/reload (its own bearer
// admin_token). Every other path — /predict, /v1/predict,
// /v2/models/{name}/infer and any route mounted later, /demo, /info and
// the metadata routes included — needs a key: default-deny, so a new
// route is covered without its author doing anything.
func OpenPath(path string) bool {
	switch path {
	case "/health", "/metrics", "/admin/reload":
		return true
	}
	return strings.HasPrefix(path, "/v2/health/")
}

// requireKey is the HTTP middleware of auth.api_keys_file, installed
// before every route (Options.Keys nil: it passes everything). It reads
// the key from "Authorization: Bearer <key>" or "X-API-Key: <key>" and
// never logs it; a request on a path that is not OpenPath without a
// matching key is answered 401 before its handler runs (its body is
// discarded, never parsed). The matching key's label is logged with the request.
func (s *Server) requireKey(c *fiber.Ctx) error {
	if !s.opts.Keys.Enabled() || OpenPath(c.Path()) {
		return c.Next()
	}
	label, ok := s.opts.Keys.Check(secure.FromHeaders(func(name string) string { return c.Get(name) }))
	if !ok {
		s.drainBody(c) // answer on a healthy connection, as other refusals do (body.go)
		return service.Unauthorized("", `send "Authorization: Bearer <key>" or "X-API-Key: <key>"`)
	}
	if label != "" {
		c.Locals("keylabel", label)
	}
	return c.Next()
}
