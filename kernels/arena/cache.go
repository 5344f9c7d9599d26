package arena

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ErrStaleCache is wrapped when an arena cache file does not match the plan
// (size) or its recorded digest.
var ErrStaleCache = errors.New("arena: stale cache")

// ReadCache loads a packed arena written by `gr00tgw arena --out FILE`: it
// checks the size against pl and, when FILE.json exists, the SHA-256 against
// the digest recorded there. It returns the bytes and their digest.
func ReadCache(path string, pl *Plan) ([]byte, Digest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("arena: cache: %w", err)
	}
	if int64(len(b)) != pl.Size {
		return nil, "", fmt.Errorf("%w: %s is %d bytes, plan needs %d", ErrStaleCache, path, len(b), pl.Size)
	}
	d := DigestOf(b)
	if raw, err := os.ReadFile(path + ".json"); err == nil {
		var meta struct {
			Arena struct {
				Digest string `json:"digest_sha256"`
				Policy string `json:"policy"`
			} `json:"arena"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, "", fmt.Errorf("%w: %s.json: %v", ErrStaleCache, path, err)
		}
		if meta.Arena.Digest != string(d) || meta.Arena.Policy != pl.Policy.Name {
			return nil, "", fmt.Errorf("%w: %s: digest %s policy %s, recorded %s policy %s", ErrStaleCache, path, d, pl.Policy.Name, meta.Arena.Digest, meta.Arena.Policy)
		}
	}
	return b, d, nil
}
