package session

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidateID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, id string
		wantErr  string // substring; "" = valid
	}{
		{"uuid", "3f2b8c1e-9a4d-4c2e-8f1a-0b6d7e9c2a11", ""},
		{"robot name", "robot-7:left_arm.v2~a", ""},
		{"one byte", "a", ""},
		{"max length", strings.Repeat("x", MaxIDLen), ""},
		{"empty", "", "session: empty"},
		{"too long", strings.Repeat("x", MaxIDLen+1), "session: 129 bytes, at most 128"},
		{"slash", "a/b", `session: "a/b": byte 1 ('/')`},
		{"space", "a b", "byte 1 (' ')"},
		{"percent", "a%2F", "byte 1 ('%')"},
		{"nul", "a\x00", `byte 1 ('\x00')`},
		{"non-ascii", "robotä", "byte 5"},
		{"long bad id is quoted short", strings.Repeat("y", 100) + "/", `"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"…: byte 100`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateID(tc.id)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateID(%q) = %v, want nil", tc.id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ValidateID(%q) = %v, want an error containing %q", tc.id, err, tc.wantErr)
			}
			var ie *IDError
			if !errors.As(err, &ie) || ie.Field != "session" || !errors.Is(err, ErrInvalidID) {
				t.Fatalf("ValidateID(%q) = %#v, want an *IDError for field session wrapping ErrInvalidID", tc.id, err)
			}
		})
	}
}

// FuzzValidateID checks ValidateID against a restatement of its rule and
// that its errors stay short whatever the input.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"", "a", "robot-7:left", "a/b", strings.Repeat("z", 129), "\xff\xfe", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		want := len(id) >= 1 && len(id) <= MaxIDLen && strings.IndexFunc(id, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~:", r))
		}) < 0
		err := ValidateID(id)
		if (err == nil) != want {
			t.Fatalf("ValidateID(%q) = %v, want valid=%v", id, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidID) || !strings.HasPrefix(err.Error(), "session: ") {
				t.Fatalf("ValidateID(%q) = %v: want a session: error wrapping ErrInvalidID", id, err)
			}
			if n := len(err.Error()); n > 200 {
				t.Fatalf("ValidateID(%q): error of %d bytes", id, n)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("ValidateID(%q): error %q is not UTF-8", id, err)
			}
		}
	})
}
