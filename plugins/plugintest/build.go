// Package plugintest builds gwabi v1 guests from Go source and runs them
// under the production host (package plugins) for tests, fixtures and the
// `gr00tgw plugin verify` command.
//
// Tests never use committed .wasm files: BuildGuest compiles the guest
// with the stock toolchain (GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared) into a cache keyed by the Go version, build tags and
// the content of every module-local source file the guest depends on, and
// builds each key at most once per test process. A cold build takes about
// 5–20 s per guest on a small machine (linking dominates); a warm one is a
// cache hit.
package plugintest

import (
	"github.com/gr00tgw/gr00tgw/plugins/internal/rewrite"

	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Build compiles the Go guest package at pkgDir (a directory inside the
// module, absolute or relative to the current directory) to out as a WASI
// reactor. tags are extra build tags.
func Build(ctx context.Context, pkgDir, out string, tags ...string) error {
	args := []string{"build", "-buildmode=c-shared", "-trimpath", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("plugintest: go build %s (wasip1): %w\n%s", pkgDir, err, stderr.String())
	}
	return nil
}

func goTool() string {
	// The toolchain that built this test, not whatever go is on PATH.
	//lint:ignore SA1019 the running toolchain's root is what is wanted here
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

type buildResult struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*buildResult{}
)

// CacheDir is where BuildGuest keeps built guests:
// $GR00TGW_GUEST_CACHE, else os.UserCacheDir()/gr00tgw/guests, else a
// directory under os.TempDir().
func CacheDir() string {
	if d := os.Getenv("GR00TGW_GUEST_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "gr00tgw", "guests")
	}
	return filepath.Join(os.TempDir(), "gr00tgw-guests")
}

// BuildGuest returns the path of the .wasm built from the guest package in
// pkgDir (relative paths are resolved from the test's working directory)
// with the given build tags. Concurrent and repeated calls for the same
// package and tags share one build. It fails the test on a build error.
func BuildGuest(tb testing.TB, pkgDir string, tags ...string) string {
	tb.Helper()
	p, err := BuildCached(context.Background(), pkgDir, tags...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BuildCached is BuildGuest without testing.TB.
func BuildCached(ctx context.Context, pkgDir string, tags ...string) (string, error) {
	abs, err := filepath.Abs(pkgDir)
	if err != nil {
		return "", err
	}
	key := abs + "|" + strings.Join(tags, ",")
	buildsMu.Lock()
	r, ok := builds[key]
	if !ok {
		r = &buildResult{}
		builds[key] = r
	}
	buildsMu.Unlock()
	r.once.Do(func() { r.path, r.err = buildCached(ctx, abs, tags) })
	return r.path, r.err
}

func buildCached(ctx context.Context, dir string, tags []string) (string, error) {
	h, err := sourceHash(ctx, dir, tags)
	if err != nil {
		return "", err
	}
	cache := CacheDir()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("plugintest: cache dir: %w", err)
	}
	out := filepath.Join(cache, filepath.Base(dir)+"-"+h[:16]+".wasm")
	if fileExists(out) {
		return out, nil
	}
	tmp, err := os.CreateTemp(cache, ".build-*.wasm")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := Build(ctx, dir, tmp.Name(), tags...); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

// sourceHash hashes the Go version, the tags and every source file of the
// module-local packages the guest depends on (for GOOS=wasip1).
func sourceHash(ctx context.Context, dir string, tags []string) (string, error) {
	args := []string{"list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}|{{join .GoFiles \",\"}}|{{join .EmbedFiles \",\"}}{{end}}"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("plugintest: go list %s: %w\n%s", dir, err, stderr.String())
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s\n", runtime.Version(), strings.Join(tags, ","))
	lines := strings.Split(strings.TrimSpace(string(outb)), "\n")
	sort.Strings(lines)
	for _, l := range lines {
		parts := strings.Split(l, "|")
		if len(parts) != 3 {
			continue
		}
		for _, f := range append(strings.Split(parts[1], ","), strings.Split(parts[2], ",")...) {
			if f == "" {
				continue
			}
			fh, err := os.Open(filepath.Join(parts[0], f))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s/%s\n", parts[0], f)
			_, err = io.Copy(h, fh)
			fh.Close()
			if err != nil {
				return "", err
			}
		}
	}
	// go.mod/go.sum pin dependency versions.
	if root, err := moduleRoot(dir); err == nil {
		for _, f := range []string{"go.mod", "go.sum"} {
			if b, err := os.ReadFile(filepath.Join(root, f)); err == nil {
				h.Write(b)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("plugintest: no go.mod above " + dir)
		}
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// InstrumentStopChecks returns wasm rewritten exactly as the host rewrites
// it for plugins.DeadlineStopFlag (plugins/internal/rewrite), for
// benchmarks that drive wazero directly.
func InstrumentStopChecks(wasm []byte) ([]byte, error) { return rewrite.Instrument(wasm) }

// StopCheckBudget is the name of the budget global InstrumentStopChecks
// exports: benchmarks set it high and read it back to count the checks a
// call passes.
const StopCheckBudget = rewrite.Budget

// InstrumentStopChecksEveryLoop is InstrumentStopChecks as it was before
// the dispatch-loop analysis (a check at every loop header), for
// benchmarks that compare them.
func InstrumentStopChecksEveryLoop(wasm []byte) ([]byte, error) {
	return rewrite.InstrumentEveryLoop(wasm)
}
