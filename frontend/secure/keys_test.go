package secure

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var (
	hashA = Hash("key-a")
	hashB = Hash("key-b")
)

func sum(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

func TestParseKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []Key
		wantErr string // substring; "" means success
	}{
		{name: "one", in: hashA + "\n", want: []Key{{Hash: sum("key-a")}}},
		{name: "no final newline", in: hashA, want: []Key{{Hash: sum("key-a")}}},
		{name: "label", in: hashA + "  robot 17 \n", want: []Key{{Hash: sum("key-a"), Label: "robot 17"}}},
		{name: "tab label", in: hashA + "\tfleet-b\n", want: []Key{{Hash: sum("key-a"), Label: "fleet-b"}}},
		{name: "comments and blanks", in: "# keys\n\n   \n" + hashA + " # trailing comment\n  # indented\n" + hashB + " b\n",
			want: []Key{{Hash: sum("key-a")}, {Hash: sum("key-b"), Label: "b"}}},
		{name: "crlf", in: hashA + "\r\n" + hashB + "\r\n", want: []Key{{Hash: sum("key-a")}, {Hash: sum("key-b")}}},
		{name: "upper-case hex", in: "sha256:" + strings.ToUpper(hashA[len(HashPrefix):]), want: []Key{{Hash: sum("key-a")}}},
		{name: "duplicate kept once", in: hashA + " first\n" + hashA + " second\n", want: []Key{{Hash: sum("key-a"), Label: "first"}}},
		{name: "empty", in: "", wantErr: ErrNoKeys.Error()},
		{name: "comments only", in: "# nothing\n\n", wantErr: ErrNoKeys.Error()},
		{name: "plain key", in: "# a\nhunter2\n", wantErr: "line[2]: not a sha256:<hex> key hash"},
		{name: "other algorithm", in: "md5:0123\n", wantErr: `line[1]: hash algorithm "md5": only sha256`},
		{name: "short hash", in: "sha256:abcd\n", wantErr: "line[1]: sha256 hash has 4 hex digits, want 64"},
		{name: "long hash", in: hashA + "0\n", wantErr: "has 65 hex digits"},
		{name: "not hex", in: "sha256:" + strings.Repeat("zz", 32) + "\n", wantErr: "line[1]: sha256 hash is not hexadecimal"},
		{name: "second line bad", in: hashA + "\nsha256:\n", wantErr: "line[2]:"},
		{name: "too large", in: strings.Repeat("#\n", MaxKeyFileBytes), wantErr: "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseKeys(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseKeys error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeys: %v", err)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestParseKeysNeverEchoesAKey: a plain key pasted into the file is not
// repeated in the error (errors reach logs).
func TestParseKeysNeverEchoesAKey(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{"s3cr3t-plain-key", "Bearer:s3cr3t-plain-key", "s3cr3t:with/slash+and=pad"} {
		_, err := ParseKeys(strings.NewReader(secret + "\n"))
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ParseKeys(%q) error = %v: want an error without the key", secret, err)
		}
	}
}

func TestKeyringCheck(t *testing.T) {
	t.Parallel()
	k := NewKeyring([]Key{{Hash: sum("key-a"), Label: "a"}, {Hash: sum("key-b")}})
	tests := []struct {
		key, label string
		ok         bool
	}{
		{"key-a", "a", true},
		{"  key-a\n", "a", true},
		{"key-b", "", true},
		{"key-c", "", false},
		{"", "", false},
		{"key-a ", "a", true},
		{"KEY-A", "", false},
		{hashA, "", false}, // the stored hash is not a key
	}
	for _, tc := range tests {
		label, ok := k.Check(tc.key)
		if label != tc.label || ok != tc.ok {
			t.Errorf("Check(%q) = %q, %v; want %q, %v", tc.key, label, ok, tc.label, tc.ok)
		}
	}
	var none *Keyring
	if _, ok := none.Check("key-a"); ok || none.Enabled() || none.Len() != 0 {
		t.Error("a nil keyring must match nothing and be disabled")
	}
}

func TestKeyringReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(hashA + "\n")
	k, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := k.Check("key-a"); !ok {
		t.Fatal("key-a refused after load")
	}
	write(hashB + "\n")
	if n, err := k.Reload(); err != nil || n != 1 {
		t.Fatalf("Reload = %d, %v", n, err)
	}
	if _, ok := k.Check("key-a"); ok {
		t.Error("key-a still accepted after it was rotated out")
	}
	if _, ok := k.Check("key-b"); !ok {
		t.Error("key-b refused after reload")
	}
	write("garbage\n")
	if _, err := k.Reload(); err == nil || !strings.Contains(err.Error(), path+" line[1]") {
		t.Errorf("Reload of a bad file: %v, want the path and line named", err)
	}
	if _, ok := k.Check("key-b"); !ok {
		t.Error("a failed reload must keep the keys served before")
	}
	if _, err := LoadKeyring(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadKeyring(missing) = %v, want ErrNotExist", err)
	}
}

func TestHashAndNewKey(t *testing.T) {
	t.Parallel()
	if got, want := Hash("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("Hash(abc) = %s, want %s", got, want)
	}
	a, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewKey()
	if a == b || !strings.HasPrefix(a, "gr00tgw_") || len(a) != len("gr00tgw_")+43 {
		t.Errorf("NewKey = %q, %q", a, b)
	}
	keys, err := ParseKeys(strings.NewReader(Hash(a)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := NewKeyring(keys).Check(a); !ok {
		t.Error("a new key does not match its own hash line")
	}
}

func TestFromHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    map[string]string
		want string
	}{
		{"bearer", map[string]string{"Authorization": "Bearer k1"}, "k1"},
		{"bearer any case", map[string]string{"Authorization": "bearer  k1 "}, "k1"},
		{"x-api-key", map[string]string{"X-API-Key": "k2"}, "k2"},
		{"bearer wins", map[string]string{"Authorization": "Bearer k1", "X-API-Key": "k2"}, "k1"},
		{"openpi api-key", map[string]string{"Authorization": "Api-Key k3"}, "k3"},
		{"x-api-key over api-key", map[string]string{"Authorization": "Api-Key k3", "X-API-Key": "k2"}, "k2"},
		{"basic ignored", map[string]string{"Authorization": "Basic Zm9v"}, ""},
		{"bearer without key", map[string]string{"Authorization": "Bearer"}, ""},
		{"scheme glued", map[string]string{"Authorization": "Bearerk1"}, ""},
		{"none", map[string]string{}, ""},
	}
	for _, tc := range tests {
		if got := FromHeaders(func(n string) string { return tc.h[n] }); got != tc.want {
			t.Errorf("%s: FromHeaders = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzParseKeys: any input parses or fails without panicking; what parses
// has at least one key, each a 32-byte hash with a printable one-line
// label, and serialising the keys back parses to the same keys.
// Seed corpus: testdata/fuzz/FuzzParseKeys plus the adds below.
func FuzzParseKeys(f *testing.F) {
	f.Add(hashA + " a\n# c\n\n" + hashB + "\n")
	f.Add("sha256:\n")
	f.Add(hashA + " #x\t# y")
	f.Add("\xff" + hashA)
	f.Add(hashA + " x\u00a0#y")
	f.Fuzz(func(t *testing.T, in string) {
		keys, err := ParseKeys(strings.NewReader(in))
		if err != nil {
			if len(keys) != 0 {
				t.Fatal("keys returned with an error")
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("no keys and no error")
		}
		var b strings.Builder
		for _, k := range keys {
			if strings.ContainsAny(k.Label, "\n\r\t") || strings.Contains(k.Label, " #") {
				t.Fatalf("label %q holds a comment", k.Label)
			}
			b.WriteString(HashPrefix)
			for _, x := range k.Hash {
				b.WriteString(string("0123456789abcdef"[x>>4]) + string("0123456789abcdef"[x&15]))
			}
			if k.Label != "" {
				b.WriteString(" " + k.Label)
			}
			b.WriteString("\n")
		}
		again, err := ParseKeys(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b.String(), err)
		}
		if !assert.Equal(t, keys, again, "round trip") {
			t.FailNow()
		}
	})
}
