package record

import (
	"errors"

	"github.com/gr00tgw/gr00tgw/safety"
)

// SafetyOf converts what safety.Gate.Check returned into the record's
// verdict: Rejected when err is a *safety.Error (Reject refused the chunk),
// First the first violation found (nil when none). Other errors leave
// Rejected false; the record's Error carries them.
func SafetyOf(v safety.Verdict, err error) *Safety {
	s := &Safety{Policy: v.Policy.String(), Clamped: v.Clamped}
	var e *safety.Error
	s.Rejected = errors.As(err, &e)
	first := v.First
	if s.Rejected {
		first = &e.Violation
	}
	if first != nil {
		s.First = &Violation{Group: first.Group, Step: first.Step, Dim: first.Dim, Kind: first.Kind.String(), Limit: first.Limit, Value: first.Value}
	}
	return s
}
