package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Path names a field of a message as a list of keys and index groups,
// written the way errors name fields: "images.cam[0]" is AtKey("images"),
// AtKey("cam"), AtIndex(0); "video.cam[1, 0]" ends in AtIndex(1, 0). Protocols
// rename fields by editing the path (WithHead, PrependIndex), never the
// text.
type Path []Elem

// Elem is one step of a Path: a key, or an index group when Index is not
// nil.
type Elem struct {
	Key   string
	Index []int
}

// AtKey is the step into the map key k.
func AtKey(k string) Elem { return Elem{Key: k} }

// AtIndex is an index group, written "[i, j]".
func AtIndex(i ...int) Elem { return Elem{Index: append([]int{}, i...)} }

// KeyPath is the path of the keys ks.
func KeyPath(ks ...string) Path {
	p := make(Path, len(ks))
	for i, k := range ks {
		p[i] = AtKey(k)
	}
	return p
}

// String writes p: keys joined by ".", index groups appended as
// "[i, j]".
func (p Path) String() string {
	var b strings.Builder
	for i, e := range p {
		if e.Index != nil {
			b.WriteByte('[')
			for j, x := range e.Index {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(strconv.Itoa(x))
			}
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.Key)
	}
	return b.String()
}

// ParsePath reads a field name as String writes it. Text that String
// would not write (an index group that is not ", "-separated decimal
// integers, or text after "]" other than "." or "[") is kept whole as one
// key, so ParsePath(s).String() == s for every s.
func ParsePath(s string) Path {
	if s == "" {
		return nil
	}
	var p Path
	i := 0
	for {
		// A key, up to ".", "[" or the end.
		j := strings.IndexAny(s[i:], ".[")
		if j < 0 {
			return append(p, AtKey(s[i:]))
		}
		j += i
		p = append(p, AtKey(s[i:j]))
		// Index groups, each followed by the end, "[" or ".".
		for j < len(s) && s[j] == '[' {
			end := strings.IndexByte(s[j:], ']')
			if end < 0 {
				return Path{AtKey(s)}
			}
			idx, ok := parseIndex(s[j+1 : j+end])
			if !ok {
				return Path{AtKey(s)}
			}
			p = append(p, Elem{Index: idx})
			if j += end + 1; j == len(s) {
				return p
			}
			if s[j] != '[' && s[j] != '.' {
				return Path{AtKey(s)}
			}
		}
		i = j + 1 // past the "."
	}
}

// parseIndex reads "1, 0" as String writes it (no sign, no leading zero).
func parseIndex(s string) ([]int, bool) {
	parts := strings.Split(s, ", ")
	idx := make([]int, len(parts))
	for k, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 || strconv.Itoa(n) != part {
			return nil, false
		}
		idx[k] = n
	}
	return idx, true
}

// HasPrefix reports whether p starts with the keys ks.
func (p Path) HasPrefix(ks ...string) bool {
	if len(p) < len(ks) {
		return false
	}
	for i, k := range ks {
		if p[i].Index != nil || p[i].Key != k {
			return false
		}
	}
	return true
}

// Below reports whether p names something inside the key k: k, then a
// key ("images.cam[0]" is below "images"; "images" and "images[0]" are
// not).
func (p Path) Below(k string) bool {
	return len(p) >= 2 && p.HasPrefix(k) && p[1].Index == nil
}

// WithHead returns head followed by p's steps after the first n.
func (p Path) WithHead(n int, head ...Elem) Path {
	return append(append(Path{}, head...), p[n:]...)
}

// PrependIndex returns p with i put before the indices of its first index
// group ("cam[3]" → "cam[b, 3]"); ok is false when p has no index group.
func (p Path) PrependIndex(i ...int) (q Path, ok bool) {
	for k, e := range p {
		if e.Index != nil {
			q = append(Path{}, p...)
			q[k] = Elem{Index: append(append([]int{}, i...), e.Index...)}
			return q, true
		}
	}
	return p, false
}

// FieldError is an error about one field of a message: Path names the
// field, Detail says what is wrong, and the message is the path followed
// by the detail ("video.cam[0, 2]: not a JPEG", or a detail continuing the
// path's words: "options.seed and noise are exclusive: send one"). Err,
// when set, is the cause (Unwrap). Renaming the field for a protocol is
// replacing Path.
type FieldError struct {
	Path   Path
	Detail string
	Err    error
}

// FieldErrorf returns the error "<path>: <format, args>".
func FieldErrorf(p Path, format string, args ...any) *FieldError {
	return &FieldError{Path: p, Detail: ": " + fmt.Sprintf(format, args...)}
}

// FieldErrorOf reads err, an error about field whose message names the
// field as text (the service's errors do: "images.cam[0]: bad PNG"), as a
// FieldError: the path parsed from field, the detail the message after
// field (": " and the message when it does not start with field). An err
// that already is a FieldError of that field is returned as it is.
func FieldErrorOf(field string, err error) *FieldError {
	var fe *FieldError
	if errors.As(err, &fe) && fe.Path.String() == field {
		return fe
	}
	msg := err.Error()
	detail, ok := strings.CutPrefix(msg, field)
	if !ok {
		detail = ": " + msg
	}
	return &FieldError{Path: ParsePath(field), Detail: detail, Err: err}
}

func (e *FieldError) Error() string { return e.Path.String() + e.Detail }

// Unwrap returns the cause, nil when none.
func (e *FieldError) Unwrap() error { return e.Err }

// Field is the path as text (the service's FieldError interface).
func (e *FieldError) Field() string { return e.Path.String() }
