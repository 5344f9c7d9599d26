package wire

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Path
	}{
		{"", nil},
		{"seed", KeyPath("seed")},
		{"images.cam[0]", Path{AtKey("images"), AtKey("cam"), AtIndex(0)}},
		{"video.cam[1, 0].data", Path{AtKey("video"), AtKey("cam"), AtIndex(1, 0), AtKey("data")}},
		{"state.g[0][3]", Path{AtKey("state"), AtKey("g"), AtIndex(0), AtIndex(3)}},
		{"observation/cam[2]", Path{AtKey("observation/cam"), AtIndex(2)}},
		{"a.", Path{AtKey("a"), AtKey("")}},
		{"[4]", Path{AtKey(""), AtIndex(4)}},
		// Text String would not write stays one key.
		{"cam[x]", KeyPath("cam[x]")},
		{"cam[1,2]", KeyPath("cam[1,2]")},
		{"cam[01]", KeyPath("cam[01]")},
		{"cam[-1]", KeyPath("cam[-1]")},
		{"cam[1", KeyPath("cam[1")},
		{"cam[1]x", KeyPath("cam[1]x")},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := ParsePath(tc.in)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, got.String())
		})
	}
}

func TestPathEdits(t *testing.T) {
	p := ParsePath("images.cam[3].data")
	assert.True(t, p.HasPrefix("images"))
	assert.True(t, p.HasPrefix("images", "cam"))
	assert.False(t, p.HasPrefix("images", "cam", "x"))
	assert.False(t, ParsePath("images").HasPrefix("images", "cam"))
	assert.True(t, p.Below("images"))
	assert.False(t, ParsePath("images").Below("images"))
	assert.False(t, ParsePath("images[0]").Below("images"))
	assert.False(t, p.Below("cam"))
	assert.Equal(t, "video.cam[3].data", p.WithHead(1, AtKey("video")).String())
	assert.Equal(t, "observation/cam[3].data", p.WithHead(2, AtKey("observation/cam")).String())
	assert.Equal(t, "options.seed", KeyPath("seed").WithHead(0, AtKey("options")).String())
	q, ok := p.PrependIndex(1, 0)
	require.True(t, ok)
	assert.Equal(t, "images.cam[1, 0, 3].data", q.String())
	assert.Equal(t, "images.cam[3].data", p.String(), "the edits copy")
	_, ok = KeyPath("state", "g").PrependIndex(0)
	assert.False(t, ok)
}

func TestFieldErrorOf(t *testing.T) {
	cause := errors.New("images.cam[0]: bad PNG")
	for _, tc := range []struct {
		name, field string
		err         error
		detail      string
	}{
		{"message starts with the field", "images.cam[0]", cause, ": bad PNG"},
		{"message continues the field", "seed", errors.New("seed and noise are exclusive: send one"), " and noise are exclusive: send one"},
		{"message names a deeper field", "state.g", errors.New("state.g[0][3]: NaN is not a finite float32"), "[0][3]: NaN is not a finite float32"},
		{"message without the field", "embodiment", errors.New("not served"), ": not served"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := FieldErrorOf(tc.field, tc.err)
			assert.Equal(t, tc.detail, fe.Detail)
			assert.Equal(t, tc.field+tc.detail, fe.Error(), "the message is the field's, the field first")
			assert.Equal(t, tc.field, fe.Field())
			assert.ErrorIs(t, fe, tc.err)
			fe.Path = fe.Path.WithHead(0, AtKey("options"))
			assert.Equal(t, "options."+tc.field+tc.detail, fe.Error(), "renaming is replacing the path")
		})
	}
	fe := FieldErrorf(KeyPath("x"), "want %d", 3)
	assert.Equal(t, "x: want 3", fe.Error())
	assert.Same(t, fe, FieldErrorOf("x", fe), "a FieldError of the field is kept")
}

// FuzzParsePath: every string reads back as itself.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"images.cam[0]", "state.g[1, 0, 3]", "a..b[0][1].c", "cam[x]", "[", "]", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := ParsePath(s).String(); got != s {
			t.Fatalf("ParsePath(%q).String() = %q", s, got)
		}
	})
}
