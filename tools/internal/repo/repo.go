// Package repo finds the gr00tgw checkout the tools work on: the
// directory holding the server module's go.mod (module
// github.com/gr00tgw/gr00tgw), which holds the tools module (tools/, its
// own go.mod) below it. The tools resolve the chart, the schemas, testdata/
// and build/plugins against it, so they run from anywhere in the checkout,
// tools/ included.
package repo

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Module is the server module's path: the go.mod that marks the checkout.
const Module = "github.com/gr00tgw/gr00tgw"

// Root returns the checkout above the working directory (see Find).
func Root() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo: %w", err)
	}
	return Find(wd)
}

// Find returns the nearest directory at or above dir whose go.mod declares
// Module; go.mod files of other modules (tools/go.mod) are passed over.
func Find(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if isServerModule(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("repo: no go.mod of module %s at or above %s (run inside the checkout)", Module, dir)
		}
	}
}

// isServerModule reports whether the go.mod at path declares Module; a
// missing or unreadable file is not the server's.
func isServerModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`) == Module
		}
	}
	return false
}
