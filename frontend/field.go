package frontend

import (
	"errors"

	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

// RenameField restates a service error in a protocol's names: when err
// is a *service.HandlerError naming a field, rename maps the field's path
// to the protocol's, and the result is a copy of the HandlerError whose
// Field is the new path and whose Err is a *wire.FieldError of it (the
// same detail, the cause kept for errors.Is). rename returns false to
// keep err as it is; so are errors that name no field.
func RenameField(err error, rename func(wire.Path) (wire.Path, bool)) error {
	var he *service.HandlerError
	if !errors.As(err, &he) || he.Field == "" {
		return err
	}
	fe := wire.FieldErrorOf(he.Field, he.Err)
	p, ok := rename(fe.Path)
	if !ok {
		return err
	}
	out := *he
	out.Field = p.String()
	out.Err = &wire.FieldError{Path: p, Detail: fe.Detail, Err: fe.Err}
	return &out
}
