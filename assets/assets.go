// Package assets locates the embedded default: the files a built checkout
// serves with no configuration at all — the tiny random GR00T N1.7
// checkpoint (testdata/n17-tiny), the vendored Qwen3 tokenizer
// (testdata/tokenizer/qwen3) and the packed embodiment plugins
// (build/plugins).
//
// The root is found, in order, from the GR00TGW_HOME environment variable,
// from the directories above the running executable, and from the
// directories above the working directory; the first that holds
// testdata/n17-tiny/config.json wins. So `bin/gr00tgw serve` works from any
// working directory, and `go run`/`go test` work inside the checkout.
package assets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Relative paths of the default assets below the root.
const (
	CheckpointDir = "testdata/n17-tiny"
	TokenizerDir  = "testdata/tokenizer/qwen3"
	PluginsDir    = "build/plugins"
	DemoDir       = "testdata/n17-tiny/caseA"
	marker        = "testdata/n17-tiny/config.json"
)

// ErrNoRoot is returned when no directory holding the default assets is found.
var ErrNoRoot = errors.New("assets: embedded default not found (set GR00TGW_HOME to a gr00tgw checkout or image root)")

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// Root returns the directory holding the default assets. The search runs
// once per process; the result is cached.
func Root() (string, error) {
	rootOnce.Do(func() { root, rootErr = find() })
	return root, rootErr
}

// Path joins rel below Root.
func Path(rel string) (string, error) {
	r, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(r, rel), nil
}

func find() (string, error) {
	if h := os.Getenv("GR00TGW_HOME"); h != "" {
		if ok(h) {
			return filepath.Abs(h)
		}
		return "", fmt.Errorf("assets: GR00TGW_HOME=%s does not hold %s", h, marker)
	}
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		starts = append(starts, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			if ok(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", ErrNoRoot
}

func ok(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, marker))
	return err == nil && !st.IsDir()
}
