// Command gwplugin-pack builds embodiment plugins from source into loadable
// plugin directories:
//
//	go run ./plugins/cmd/gwplugin-pack -o build/plugins ./embodiments/droid ./embodiments/libero
//
// For each package directory it runs
// `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath`, reads the
// manifest template <dir>/plugin.yaml, fills in sha256 and writes
// <out>/<name>/{<name>.wasm, plugin.yaml}, a plugins_dir that
// `gr00tgw serve --plugins-dir <out>` serves. With no package arguments it packs every directory under
// ./embodiments that has a plugin.yaml.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

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
	if len(dirs) == 0 {
		m, _ := filepath.Glob("embodiments/*/plugin.yaml")
		for _, f := range m {
			dirs = append(dirs, filepath.Dir(f))
		}
		if len(dirs) == 0 {
			fmt.Fprintln(os.Stderr, "gwplugin-pack: no embodiments/*/plugin.yaml here; pass package directories")
			os.Exit(2)
		}
	}
	for _, d := range dirs {
		if err := pack(ctx, d, *out); err != nil {
			fmt.Fprintln(os.Stderr, "gwplugin-pack:", err)
			os.Exit(1)
		}
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
	dst := filepath.Join(out, m.Name)
	if err := plugins.WritePluginDir(dst, m, wasm); err != nil {
		return err
	}
	fmt.Printf("%s -> %s (%d bytes)\n", dir, filepath.Join(dst, m.WasmFile()), len(wasm))
	return nil
}
