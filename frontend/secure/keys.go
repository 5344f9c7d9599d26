// Package secure holds the gateway's optional transport and client
// security: a keyring of hashed API keys (auth.api_keys_file) and a TLS
// certificate (tls.cert_file, tls.key_file), each re-read in place on
// SIGHUP. Both are off unless configured. The front ends (HTTP, OIP,
// ZeroMQ, openpi) ask one Keyring; none of them sees a stored key, only
// its SHA-256.
//
// # Key file
//
// One key per line, as `sha256:<64 hex digits>`, optionally followed by
// whitespace and a label (a name for logs, never the key). Blank lines
// and lines starting with '#' are comments; so is anything after " #".
// `gr00tgw keys hash` prints the line for a key read from stdin, and
// `gr00tgw keys new` makes a random key and its line.
package secure

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// HashPrefix starts every line of a key file.
const HashPrefix = "sha256:"

// MaxKeyFileBytes bounds a key file (1 MiB: about 13,000 keys).
const MaxKeyFileBytes = 1 << 20

// ErrNoKeys is returned by ParseKeys for a file that holds no key: served,
// it would refuse every client.
var ErrNoKeys = errors.New("no keys (a key file must hold at least one sha256:<hex> line)")

// Key is one entry of a key file: the SHA-256 of the key and its label
// ("" when the line has none).
type Key struct {
	Hash  [sha256.Size]byte
	Label string
}

// Hash returns the key-file line for key: "sha256:" and the lower-case hex
// SHA-256 of its bytes (surrounding whitespace removed first, as Check
// does).
func Hash(key string) string {
	h := sha256.Sum256([]byte(strings.TrimSpace(key)))
	return HashPrefix + hex.EncodeToString(h[:])
}

// NewKey returns a random key: 32 bytes from crypto/rand, base64url
// without padding (43 characters), prefixed "gr00tgw_" so it is
// recognisable in a secret store.
func NewKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("keys: random key: %w", err)
	}
	return "gr00tgw_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// ParseKeys reads a key file (see the package comment). It returns the
// keys in file order, duplicates removed, or the first problem as
// "line[N]: …"; a file with no key is ErrNoKeys. A line that is not a
// hash (a plain key pasted by mistake) is refused without echoing it.
func ParseKeys(r io.Reader) ([]Key, error) {
	var keys []Key
	seen := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(io.LimitReader(r, MaxKeyFileBytes+1))
	sc.Buffer(make([]byte, 4096), MaxKeyFileBytes+1)
	n, total := 0, 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		total += len(line) + 1
		if total > MaxKeyFileBytes+1 {
			return nil, fmt.Errorf("larger than %d bytes", MaxKeyFileBytes)
		}
		if i := bytes.Index(line, []byte(" #")); i >= 0 {
			line = line[:i]
		}
		if i := bytes.Index(line, []byte("\t#")); i >= 0 {
			line = line[:i]
		}
		s := strings.TrimSpace(string(line))
		if s == "" || s[0] == '#' {
			continue
		}
		k, err := parseLine(s)
		if err != nil {
			return nil, fmt.Errorf("line[%d]: %w", n, err)
		}
		if !seen[k.Hash] {
			seen[k.Hash] = true
			keys = append(keys, k)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line[%d]: longer than %d bytes", n+1, MaxKeyFileBytes)
		}
		return nil, err
	}
	if total > MaxKeyFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxKeyFileBytes)
	}
	if len(keys) == 0 {
		return nil, ErrNoKeys
	}
	return keys, nil
}

func parseLine(s string) (Key, error) {
	var k Key
	field, label, _ := strings.Cut(s, " ")
	if i := strings.IndexByte(field, '\t'); i >= 0 {
		field, label = field[:i], field[i+1:]+" "+label
	}
	hexPart, ok := strings.CutPrefix(field, HashPrefix)
	if !ok {
		switch alg, _, _ := strings.Cut(field, ":"); strings.ToLower(alg) {
		case "md5", "sha1", "sha224", "sha384", "sha512", "sha3", "bcrypt", "argon2", "argon2id", "scrypt", "pbkdf2":
			return k, fmt.Errorf("hash algorithm %q: only sha256 is supported", strings.ToLower(alg))
		}
		return k, errors.New("not a sha256:<hex> key hash (store hashes, not keys: gr00tgw keys hash)")
	}
	if len(hexPart) != 2*sha256.Size {
		return k, fmt.Errorf("sha256 hash has %d hex digits, want %d", len(hexPart), 2*sha256.Size)
	}
	if _, err := hex.Decode(k.Hash[:], []byte(hexPart)); err != nil {
		return k, errors.New("sha256 hash is not hexadecimal")
	}
	label = strings.Join(strings.Fields(label), " ")
	if i := strings.Index(label, " #"); i >= 0 { // a comment after Unicode spaces
		label = label[:i]
	}
	if !utf8.ValidString(label) {
		return k, errors.New("label is not UTF-8")
	}
	k.Label = label
	return k, nil
}

// Keyring is the set of accepted API keys, loaded from a key file and
// replaced whole by Reload. Check is safe for concurrent use with Reload.
// A nil *Keyring accepts nothing and reports Enabled false.
type Keyring struct {
	path string
	keys atomic.Pointer[[]Key]
	mu   sync.Mutex // one Reload at a time
}

// LoadKeyring reads the key file at path. Errors name the path and the
// line ("keys: /etc/gr00tgw/keys line[3]: …").
func LoadKeyring(path string) (*Keyring, error) {
	k := &Keyring{path: path}
	if _, err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// NewKeyring returns a keyring holding keys (tests, embedding); Reload on
// it fails.
func NewKeyring(keys []Key) *Keyring {
	k := &Keyring{}
	cp := append([]Key(nil), keys...)
	k.keys.Store(&cp)
	return k
}

// Path is the key file the keyring reads.
func (k *Keyring) Path() string { return k.path }

// Reload re-reads the key file and, when it parses, replaces the keys at
// once (requests already checked are not affected). On an error the keys
// served before stay and the error is returned. It returns the number of
// keys now served.
func (k *Keyring) Reload() (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.path == "" {
		return k.Len(), errors.New("keys: keyring has no file to reload")
	}
	f, err := os.Open(k.path)
	if err != nil {
		return k.Len(), fmt.Errorf("keys: %w", err)
	}
	defer f.Close()
	keys, err := ParseKeys(f)
	if err != nil {
		return k.Len(), fmt.Errorf("keys: %s %w", k.path, err)
	}
	k.keys.Store(&keys)
	return len(keys), nil
}

// Enabled reports whether keys are required (k is not nil).
func (k *Keyring) Enabled() bool { return k != nil }

// Len is the number of keys served (0 for nil).
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	if p := k.keys.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// Check reports whether key (surrounding whitespace removed) is one of
// the keyring's, and that key's label. It hashes key once and compares the
// hash with every stored hash by crypto/subtle, without stopping at a
// match, so its time does not depend on which key matched or how much of
// a hash agreed. An empty key, or a nil keyring, never matches.
func (k *Keyring) Check(key string) (label string, ok bool) {
	key = strings.TrimSpace(key)
	if k == nil || key == "" {
		return "", false
	}
	p := k.keys.Load()
	if p == nil {
		return "", false
	}
	h := sha256.Sum256([]byte(key))
	match := -1
	for i := range *p {
		eq := subtle.ConstantTimeCompare(h[:], (*p)[i].Hash[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return "", false
	}
	return (*p)[match].Label, true
}

// FromHeaders returns the API key a request carries: "Authorization:
// Bearer <key>", else the X-API-Key header, else (openpi's own form)
// "Authorization: Api-Key <key>"; "" when none. get reads one header by
// name.
func FromHeaders(get func(name string) string) string {
	auth := strings.TrimSpace(get("Authorization"))
	if v, ok := cutScheme(auth, "Bearer"); ok {
		return v
	}
	if x := strings.TrimSpace(get("X-API-Key")); x != "" {
		return x
	}
	if v, ok := cutScheme(auth, "Api-Key"); ok {
		return v
	}
	return ""
}

// cutScheme returns the credentials of an Authorization value of scheme
// (case-insensitive, as RFC 9110 has it).
func cutScheme(auth, scheme string) (string, bool) {
	if len(auth) <= len(scheme) || !strings.EqualFold(auth[:len(scheme)], scheme) || auth[len(scheme)] != ' ' {
		return "", false
	}
	return strings.TrimSpace(auth[len(scheme)+1:]), true
}
