package frontend

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

func TestRenameField(t *testing.T) {
	toVideo := func(p wire.Path) (wire.Path, bool) {
		if !p.Below("images") {
			return p, false
		}
		return p.WithHead(1, wire.AtKey("video")), true
	}
	cause := errors.New("images.cam[1]: bad PNG")
	he := &service.HandlerError{Status: 400, Code: service.CodeInvalid, Field: "images.cam[1]", Err: cause, RetryAfter: 3}
	got := RenameField(he, toVideo)
	var out *service.HandlerError
	require.ErrorAs(t, got, &out)
	assert.Equal(t, "video.cam[1]", out.Field)
	assert.Equal(t, "video.cam[1]: bad PNG", out.Err.Error())
	assert.Equal(t, []any{400, service.CodeInvalid, 3}, []any{out.Status, out.Code, out.RetryAfter}, "the rest is kept")
	assert.ErrorIs(t, got, cause, "the cause is kept")
	var fe *wire.FieldError
	require.ErrorAs(t, got, &fe)
	assert.Equal(t, "video.cam[1]", fe.Path.String())
	assert.Equal(t, "images.cam[1]", he.Field, "the original is not changed")

	for _, err := range []error{
		errors.New("plain"),
		&service.HandlerError{Status: 500, Code: service.CodeInternal, Err: errors.New("no field")},
		service.Invalid("seed", "seed: negative"),
	} {
		assert.Same(t, err, RenameField(err, toVideo), "%v is kept as it is", err)
	}
}
