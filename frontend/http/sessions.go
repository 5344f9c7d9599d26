package httpfront

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/gr00tgw/gr00tgw/service"
)

// SessionHeader names the robot session of a /predict request, as the
// body's session field does (issue 27 point 2).
const SessionHeader = "X-Session-ID"

// sessionHeader merges the X-Session-ID header into r: the header alone
// names the session; with the body's session both must be equal (a
// mismatch is the client's bug, refused with 400 naming session rather
// than silently preferring one).
func sessionHeader(c *fiber.Ctx, r *service.Request) error {
	h := c.Get(SessionHeader)
	switch {
	case h == "":
		return nil
	case r.SessionField == "":
		r.Session, r.SessionField = h, "session"
		return nil
	case h != r.Session:
		return service.Invalid("session", "session: header %s and the body's session disagree: send one, or the same id in both", SessionHeader)
	}
	return nil
}

// deleteSession is DELETE /v1/sessions/{id}: the session's state (its
// last chunk, latency estimate) is dropped and its next predict starts
// afresh. 204 when it existed, 404 when it did not (unknown, expired or
// evicted), 400 for an invalid id. It takes the same authentication as
// /predict (an API key when auth.api_keys_file is set): a robot resets its
// own session, so no admin token is involved.
func (s *Server) deleteSession(c *fiber.Ctx) error {
	ok, err := s.core.ResetSession(c.Params("id"), "session")
	if err != nil {
		return err
	}
	if !ok {
		return &service.HandlerError{Status: http.StatusNotFound, Code: service.CodeNotFound, Field: "session",
			Err: errors.New("session: no such session (unknown, expired or evicted)")}
	}
	return c.SendStatus(http.StatusNoContent)
}
