package session

import (
	"errors"
	"fmt"
)

// Field is the name every protocol gives a session id (the `/predict`
// body's `session`; the X-Session-ID header, ZeroMQ's and OIP's
// `session_id` are reported under the same name). IDError carries it so
// that the edge renders one field name without string surgery.
const Field = "session"

// MaxIDLen is the longest session id accepted, in bytes.
const MaxIDLen = 128

// ErrInvalidID is wrapped by every error of ValidateID.
var ErrInvalidID = errors.New("invalid session id")

// IDError is a session id refused by ValidateID: Field is always "session",
// Reason says why (e.g. `130 bytes, at most 128`). It wraps ErrInvalidID.
type IDError struct {
	Field  string
	Reason string
}

func (e *IDError) Error() string { return Field + ": " + e.Reason }

// Unwrap returns ErrInvalidID.
func (e *IDError) Unwrap() error { return ErrInvalidID }

// ValidateID checks a session id: 1..MaxIDLen bytes of the URL-unreserved
// characters A–Z a–z 0–9 `-` `.` `_` `~` and `:` (so an id can stand in a
// path such as DELETE /v1/sessions/{id} unescaped, and a UUID, a ULID or
// `robot-7:left` is accepted). The error is an *IDError naming the field
// `session` and, for a bad character, its byte offset; the id itself is
// quoted only up to 32 bytes so a hostile id does not flood a log.
func ValidateID(id string) error {
	switch {
	case id == "":
		return &IDError{Field: Field, Reason: "empty (want 1.." + itoa(MaxIDLen) + " bytes of [A-Za-z0-9._~:-])"}
	case len(id) > MaxIDLen:
		return &IDError{Field: Field, Reason: fmt.Sprintf("%d bytes, at most %d", len(id), MaxIDLen)}
	}
	for i := 0; i < len(id); i++ {
		if !idByte[id[i]] {
			return &IDError{Field: Field, Reason: fmt.Sprintf("%s: byte %d (%q) is not one of [A-Za-z0-9._~:-]", quoteShort(id), i, id[i])}
		}
	}
	return nil
}

// idByte marks the bytes ValidateID allows.
var idByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~:" {
		t[c] = true
	}
	return t
}()

func quoteShort(s string) string {
	if len(s) > 32 {
		return fmt.Sprintf("%q…", s[:32])
	}
	return fmt.Sprintf("%q", s)
}

func itoa(n int) string { return fmt.Sprint(n) }
