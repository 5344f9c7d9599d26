package httpfront

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/gr00tgw/gr00tgw/service"
)

// The routes besides the predictions: each renders what the service
// reports (its errors are rendered once, at the edge).

// health is GET /health: always 200; status "ok" only after warm-up
// ("starting" before, "draining" during shutdown, "failed" after a failed
// start).
func (s *Server) health(c *fiber.Ctx) error {
	return c.JSON(s.core.Health())
}

// live is GET /v2/health/live (OIP): 200 while the process serves HTTP.
func (s *Server) live(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"live": true})
}

// ready is GET /v2/health/ready (OIP): 200 only after load and warm-up,
// 503 otherwise (with Retry-After unless the start failed).
func (s *Server) ready(c *fiber.Ctx) error {
	ready, state, m := s.core.Readiness()
	if !ready {
		c.Status(http.StatusServiceUnavailable)
		if state != service.StateFailed.String() {
			c.Set(fiber.HeaderRetryAfter, "5")
		}
	}
	return c.JSON(m)
}

// models is GET /v1/models (service.Core.Models).
func (s *Server) models(c *fiber.Ctx) error {
	return c.JSON(s.core.Models())
}

// modelMetadata is GET /v2/models/{model} (service.Core.ModelMetadata).
func (s *Server) modelMetadata(c *fiber.Ctx) error {
	m, err := s.core.ModelMetadata(c.Params("model"))
	if err != nil {
		return err
	}
	return c.JSON(m)
}

// modelReady is GET /v2/models/{model}/ready: 200 when the server is ready
// and the embodiment is served, 503 while either is starting, 404 for a
// name that is neither the model nor a served tag.
func (s *Server) modelReady(c *fiber.Ctx) error {
	if !s.core.Ready() {
		return s.ready(c)
	}
	m, err := s.core.ModelReady(c.Params("model"))
	if err != nil {
		return err
	}
	return c.JSON(m)
}

// demo is GET /demo[?embodiment=TAG] (service.Core.Demo).
func (s *Server) demo(c *fiber.Ctx) error {
	m, err := s.core.Demo(c.Query("embodiment"))
	if err != nil {
		return err
	}
	return c.JSON(m)
}

// info is GET /info (service.Core.Info).
func (s *Server) info(c *fiber.Ctx) error {
	m, err := s.core.Info()
	if err != nil {
		return err
	}
	return c.JSON(m)
}

// adminReload is POST /admin/reload, for bearers of the admin token (the
// route answers 404 when no token is configured). It runs Reload and
// answers its changes: 200 {"status": "reloaded"} when nothing was
// refused, 422 {"status": "refused", "error", "code"} when some candidate
// was (what served before keeps serving), 500 when the reload could not
// run.
func (s *Server) adminReload(c *fiber.Ctx) error {
	if s.cfg.AdminToken == "" {
		return &service.HandlerError{Status: http.StatusNotFound, Code: service.CodeNotFound, Err: errors.New("admin API disabled (no admin_token configured)")}
	}
	auth := c.Get(fiber.HeaderAuthorization)
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || !constantTimeEqual(strings.TrimSpace(tok), s.cfg.AdminToken) {
		return &service.HandlerError{Status: http.StatusUnauthorized, Code: service.CodeUnauthorized, Err: errors.New("missing or wrong bearer token")}
	}
	if err := s.core.CheckReady(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), max(s.cfg.RequestTimeout, time.Minute))
	defer cancel()
	changes, err := s.core.Reload(ctx)
	if err != nil && changes == nil {
		return &service.HandlerError{Status: http.StatusInternalServerError, Code: service.CodeReloadFailed, Err: err}
	}
	body := fiber.Map{"status": "reloaded", "changes": changes, "served": s.core.Served()}
	if err != nil {
		c.Status(http.StatusUnprocessableEntity)
		c.Locals("errcode", service.CodeReloadFailed)
		c.Locals("errmsg", err.Error())
		body["status"], body["error"], body["code"] = "refused", err.Error(), service.CodeReloadFailed
	}
	return c.JSON(body)
}
