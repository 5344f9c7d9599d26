package openpi

import (
	"github.com/gr00tgw/gr00tgw/service"
)

// connSession makes each websocket connection a robot session (issue 27
// point 2): observations that name no session_id use the connection's own
// id, generated on its first observation ("openpi-<32 hex>", never sent
// to the client) and reset when the connection ends, so a reconnect
// starts afresh. An observation may name a session (session_id) instead:
// the first time a connection names an id it is reset (a reconnecting
// robot does not inherit the chunk of its previous connection), later
// observations of that connection continue it. Used by the connection's
// goroutine only.
type connSession struct {
	own   string
	named map[string]bool
}

// bind sets r's session: the connection's own, or the named one (reset
// on its first use by this connection).
func (cs *connSession) bind(g service.Service, r *service.Request) error {
	if r.Session == "" {
		if cs.own == "" {
			cs.own = "openpi-" + service.NewRequestID()
		}
		r.Session, r.SessionField = cs.own, "session"
		return nil
	}
	if cs.named[r.Session] {
		return nil
	}
	if _, err := g.ResetSession(r.Session, KeySession); err != nil {
		return err
	}
	if cs.named == nil {
		cs.named = make(map[string]bool)
	}
	cs.named[r.Session] = true
	return nil
}

// close drops the connection's own session (its state is unreachable
// once the connection is gone); named sessions stay for their TTL.
func (cs *connSession) close(g service.Service) {
	if cs.own != "" {
		_, _ = g.ResetSession(cs.own, KeySession)
	}
}
