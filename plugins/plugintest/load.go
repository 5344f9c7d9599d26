package plugintest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/gr00tgw/gr00tgw/plugins"
)

var (
	cacheOnce sync.Once
	cache     wazero.CompilationCache
)

// Cache returns a compilation cache shared by every plugin the process
// loads through this package, kept on disk under CacheDir()/wazero (keyed
// by wazero version and module hash), so repeated test runs skip the
// compile; in memory if that directory is unusable.
func Cache() wazero.CompilationCache {
	cacheOnce.Do(func() {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(filepath.Join(CacheDir(), "wazero")); err != nil {
			cache = wazero.NewCompilationCache()
		}
	})
	return cache
}

// TimeoutScale is the factor Pack applies to a manifest's timeout_ms
// (capped at the host maximum): tests check behaviour, not production
// latency, and run on shared machines and under the race detector. It is
// 4, or 10 with -race; GR00TGW_TEST_TIMEOUT_SCALE overrides it (1 keeps
// the manifest's deadlines).
func TimeoutScale() int {
	if s := os.Getenv("GR00TGW_TEST_TIMEOUT_SCALE"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 1 {
			return n
		}
	}
	if raceEnabled {
		return 10
	}
	return 4
}

// Guest is a guest package to build and load.
type Guest struct {
	Dir      string            // package directory
	Tags     []string          // extra build tags
	Manifest *plugins.Manifest // nil: read Dir/plugin.yaml as a template
}

// Pack builds g and writes a loadable plugin directory under dir
// (plugin.yaml with the computed sha256 plus the .wasm); it returns the
// plugin directory. The manifest's timeout is multiplied by TimeoutScale.
func Pack(ctx context.Context, g Guest, dir string) (string, error) {
	wasmPath, err := BuildCached(ctx, g.Dir, g.Tags...)
	if err != nil {
		return "", err
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return "", err
	}
	m := g.Manifest
	if m == nil {
		b, err := os.ReadFile(filepath.Join(g.Dir, plugins.ManifestFile))
		if err != nil {
			return "", fmt.Errorf("plugintest: %w", err)
		}
		if m, err = plugins.ParseManifestTemplate(b); err != nil {
			return "", err
		}
		if m.Version == "" { // the version lives in the module (gwplugin-pack fills it too)
			if err := plugins.Complete(context.Background(), m, wasm); err != nil {
				return "", err
			}
		}
	}
	out := filepath.Join(dir, m.Name)
	if scale := TimeoutScale(); scale > 1 {
		mm := *m
		ms := mm.Limits.TimeoutMS
		if ms == 0 {
			ms = int(plugins.DefaultTimeout.Milliseconds())
		}
		mm.Limits.TimeoutMS = min(ms*scale, int(plugins.DefaultMaxTimeout.Milliseconds()))
		m = &mm
	}
	if err := plugins.WritePluginDir(out, m, wasm); err != nil {
		return "", err
	}
	return out, nil
}

// Open builds and packs g into a temporary directory and opens it with the
// production host and opts (after the test defaults: shared compilation
// cache, no disk cache, logger discarding below warnings). The plugin is
// closed when the test ends. Load errors are returned (hostile-plugin
// tests expect them).
func Open(tb testing.TB, g Guest, opts ...plugins.Option) (*plugins.Plugin, error) {
	tb.Helper()
	dir, err := Pack(context.Background(), g, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	p, err := plugins.Open(context.Background(), dir, append(DefaultOptions(tb), opts...)...)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, nil
}

// MustOpen is Open that fails the test on a load error.
func MustOpen(tb testing.TB, g Guest, opts ...plugins.Option) *plugins.Plugin {
	tb.Helper()
	p, err := Open(tb, g, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// DefaultOptions are the host options tests start from.
func DefaultOptions(tb testing.TB) []plugins.Option {
	return []plugins.Option{
		plugins.WithCompilationCache(Cache()),
		plugins.WithLogger(slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	defer func() { _ = recover() }() // logging after the test ended
	w.tb.Log(string(b))
	return len(b), nil
}

var _ io.Writer = testWriter{}
