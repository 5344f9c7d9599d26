// Command gwplugin-pack builds embodiment plugins from source into loadable
// plugin directories:
//
//	go run ./plugins/cmd/gwplugin-pack -o build/plugins ./embodiments/droid ./embodiments/libero
//
// For each package directory it runs
// `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath`, reads the
// manifest template <dir>/plugin.yaml, fills in the version from the
// module's describe() (the one source of truth: a template whose version,
// name or embodiment differs from the module's fails here) and sha256, and writes
// <out>/<name>/{<name>.wasm, plugin.yaml}, a plugins_dir that
// `gr00tgw serve --plugins-dir <out>` serves; a package's testdata/demo/
// (its demo observation, request.json) is copied to <out>/<name>/demo/.
// With no package arguments it packs every directory under
// ./embodiments that has a plugin.yaml (names starting with "_" or "."
// are skipped, as the go tool skips them); there, a plugin that fails to
// build is reported and skipped so that one half-written plugin does not
// stop the others, and the exit status is 1 only when none was packed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

func main() {
	out := flag.String("o", "build/plugins", "output directory (one sub-directory per plugin)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: gwplugin-pack [-o DIR] [PKGDIR ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dirs := flag.Args()
	discovered := len(dirs) == 0
	if discovered {
		m, _ := filepath.Glob("embodiments/*/plugin.yaml")
		for _, f := range m {
			if b := filepath.Base(filepath.Dir(f)); strings.HasPrefix(b, "_") || strings.HasPrefix(b, ".") {
				continue
			}
			dirs = append(dirs, filepath.Dir(f))
		}
		if len(dirs) == 0 {
			fmt.Fprintln(os.Stderr, "gwplugin-pack: no embodiments/*/plugin.yaml here; pass package directories")
			os.Exit(2)
		}
	}
	packed := 0
	for _, d := range dirs {
		if err := pack(ctx, d, *out); err != nil {
			if !discovered || ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "gwplugin-pack:", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "gwplugin-pack: WARNING: skipped %s: %v\n", d, err)
			continue
		}
		packed++
	}
	if packed == 0 {
		os.Exit(1)
	}
}

func pack(ctx context.Context, dir, out string) error {
	tmpl, err := os.ReadFile(filepath.Join(dir, plugins.ManifestFile))
	if err != nil {
		return err
	}
	m, err := plugins.ParseManifestTemplate(tmpl)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp("", "gwplugin-pack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	wasmPath := filepath.Join(tmp, m.WasmFile())
	if err := plugintest.Build(ctx, dir, wasmPath); err != nil {
		return err
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return err
	}
	if err := plugins.Complete(ctx, m, wasm); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	dst := filepath.Join(out, m.Name)
	if err := plugins.WritePluginDir(dst, m, wasm); err != nil {
		return err
	}
	demo := filepath.Join(dst, "demo")
	if err := os.RemoveAll(demo); err != nil {
		return err
	}
	if src := filepath.Join(dir, "testdata", "demo"); fileExists(filepath.Join(src, "request.json")) {
		if err := copyFiles(demo, src); err != nil {
			return fmt.Errorf("%s: demo: %w", dir, err)
		}
	}
	fmt.Printf("%s -> %s (%d bytes)\n", dir, filepath.Join(dst, m.WasmFile()), len(wasm))
	return nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// copyFiles copies the regular files of src (symbolic links followed) into
// a new directory dst.
func copyFiles(dst, src string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			if e.IsDir() {
				continue
			}
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
