package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

func init() {
	register(&command{name: "plugin", summary: "plugin tools", verbs: []*command{
		{name: "verify", summary: "load a gwabi v1 plugin under production limits and run its fixture cases",
			run: func(ctx context.Context, args []string) error { return pluginVerify(ctx, os.Stdout, args) }},
		{name: "new", summary: "scaffold embodiments/NAME, a plugin for a tag, from the checkpoint's contract",
			run: func(_ context.Context, args []string) error { return pluginNew(os.Stdout, args) }},
	}})
}

func pluginVerify(ctx context.Context, w io.Writer, args []string) error {
	fs := newFlags("plugin verify", "FILE.wasm [--cases DIR] [--weights-dir DIR] [--plugin-cache-dir DIR] [-v]",
		"Loads a plugin as serve would (manifest beside it, production memory and deadline\nlimits), checks its description, and runs the fixture cases of --cases.")
	cases := fs.String("cases", "", "directory of fixture cases (*.json, see plugins/plugintest.Case); statistics.json there is used as the checkpoint")
	ckpt := fs.String("weights-dir", "", "checkpoint directory with statistics.json (and processor_config.json) for gw_init (default: the cases' statistics.json, else the embedded default checkpoint)")
	cacheDir := fs.String("plugin-cache-dir", "-", "wazero compilation cache directory (as serve's: -: in memory only, empty: ~/.cache/gr00tgw/wazero)")
	verbose := fs.BoolP("verbose", "v", false, "log plugin output and host events")
	deprecatedAlias(fs, "checkpoint", "weights-dir")
	deprecatedAlias(fs, "cache-dir", "plugin-cache-dir")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 1 || !strings.HasSuffix(pos[0], ".wasm") {
		return fmt.Errorf("%w: want exactly one FILE.wasm, got %q", errUsage, pos)
	}
	level := slog.LevelWarn + 100
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts := []plugins.Option{plugins.WithLogger(logger)}
	switch *cacheDir {
	case "-":
		opts = append(opts, plugins.WithCacheDir(""))
	case "": // the host's default on-disk cache
	default:
		opts = append(opts, plugins.WithCacheDir(*cacheDir))
	}
	if *ckpt == "" && (*cases == "" || !fileExists(filepath.Join(*cases, "statistics.json"))) {
		// The embedded default checkpoint carries the statistics of every
		// shipped embodiment.
		d, err := assets.Path(assets.CheckpointDir)
		if err != nil {
			return fmt.Errorf("plugin verify: no --weights-dir and %w", err)
		}
		*ckpt = d
	}
	rep, err := plugintest.Verify(ctx, pos[0], plugintest.VerifyOptions{CasesDir: *cases, CheckpointDir: *ckpt, HostOptions: opts})
	if err != nil {
		fmt.Fprintf(w, "FAIL %s: %v\n", pos[0], err)
		return fmt.Errorf("plugin %s refused: %w", pos[0], err)
	}
	d := rep.Description
	fmt.Fprintf(w, "ok   load %s %s (sha256 %s…): embodiment %s, slot %d, %d cameras, %d state groups, %d action groups, horizon %d\n",
		rep.Plugin, rep.Version, rep.SHA256[:12], d.Embodiment, d.ProjectorSlot, len(d.Cameras), len(d.State), len(d.Actions), d.ActionHorizon)
	for _, c := range rep.Cases {
		if c.Err != nil {
			fmt.Fprintf(w, "FAIL %s (%s): %v\n", c.Name, c.File, c.Err)
			continue
		}
		fmt.Fprintf(w, "ok   %s (%s) max|diff| %.3g\n", c.Name, c.File, c.MaxDiff)
	}
	if f := rep.Failed(); len(f) > 0 {
		return errors.New(fmt.Sprint(len(f), " of ", len(rep.Cases), " cases failed"))
	}
	return nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
