package main

import (
	"context"
	"errors"
	"flag"
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
	register(&command{
		name:    "plugin",
		summary: "plugin tools: verify FILE.wasm [--cases DIR] [--checkpoint DIR] loads a gwabi v1 plugin under production limits and runs fixtures; new NAME [--tag TAG] scaffolds embodiments/NAME from the checkpoint's contract",
		run:     pluginCmd,
	})
}

func pluginCmd(ctx context.Context, args []string) error {
	switch {
	case len(args) > 0 && args[0] == "verify":
		return pluginVerify(ctx, os.Stdout, args[1:])
	case len(args) > 0 && args[0] == "new":
		return pluginNew(os.Stdout, args[1:])
	}
	return fmt.Errorf("%w: gr00tgw plugin verify FILE.wasm [--cases DIR] [--checkpoint DIR] [--cache-dir DIR] [-v] | gr00tgw plugin new NAME [--tag TAG] [--weights-dir DIR] [--dir DIR]", errUsage)
}

// parseInterspersed parses flags that may follow positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func pluginVerify(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("plugin verify", flag.ContinueOnError)
	cases := fs.String("cases", "", "directory of fixture cases (*.json, see plugins/plugintest.Case); statistics.json there is used as the checkpoint")
	ckpt := fs.String("checkpoint", "", "checkpoint directory with statistics.json (and processor_config.json) for gw_init (default: the cases' statistics.json, else the embedded default checkpoint)")
	cacheDir := fs.String("cache-dir", "", "wazero compilation cache directory (default: in memory)")
	verbose := fs.Bool("v", false, "log plugin output and host events")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || !strings.HasSuffix(pos[0], ".wasm") {
		return fmt.Errorf("%w: want exactly one FILE.wasm, got %q", errUsage, pos)
	}
	level := slog.LevelWarn + 100
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts := []plugins.Option{plugins.WithCacheDir(*cacheDir), plugins.WithLogger(logger)}
	if *ckpt == "" && (*cases == "" || !fileExists(filepath.Join(*cases, "statistics.json"))) {
		// The embedded default checkpoint carries the statistics of every
		// shipped embodiment.
		d, err := assets.Path(assets.CheckpointDir)
		if err != nil {
			return fmt.Errorf("plugin verify: no --checkpoint and %w", err)
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
