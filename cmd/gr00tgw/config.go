package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/binding"
	"github.com/gr00tgw/gr00tgw/config"
)

func init() {
	register(&command{name: "config", summary: "configuration tools", verbs: []*command{
		{name: "print", summary: "print the effective configuration with the source of every value", run: runConfigPrint},
	}})
}

// configFlags defines --config plus one flag per configuration key on fs
// (shared by serve and config print, so both resolve identically).
func configFlags(fs *pflag.FlagSet) *string {
	file := fs.String("config", "", "YAML configuration file (env "+config.ConfigFileEnv+")")
	config.RegisterFlags(fs)
	return file
}

// loadConfig resolves defaults → file → environment → flags.
func loadConfig(fs *pflag.FlagSet, file string) (*config.Loaded, error) {
	if file == "" {
		file = os.Getenv(config.ConfigFileEnv)
	}
	return config.Load(config.Sources{File: file, Flags: fs})
}

// parseConfig is how a command that takes the configuration flags
// (configFlags) and no positional arguments starts: parseFlags, noArgs,
// then loadConfig with the --config value *file (read after parsing).
func parseConfig(fs *pflag.FlagSet, args []string, file *string) (*config.Loaded, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if err := noArgs(fs); err != nil {
		return nil, err
	}
	return loadConfig(fs, *file)
}

// runConfig is `gr00tgw config VERB ...`.
func runConfig(ctx context.Context, args []string) error { return commands["config"].run(ctx, args) }

func runConfigPrint(_ context.Context, args []string) error {
	fs := newFlags("config print", "[--config FILE] [--<key> value ...]",
		"Prints every configuration key's effective value and where it came from\n(defaults → --config FILE → environment → flags), as serve would resolve it.")
	file := configFlags(fs)
	l, err := parseConfig(fs, args, file)
	if err != nil {
		return err
	}
	return l.PrintResolved(os.Stdout, resolvedDefaults(l.Config))
}

// resolvedDefaults says what serve makes of the keys whose value is a
// placeholder: the embedded default's directories, the user cache, every
// core.
func resolvedDefaults(cfg config.Config) map[string]string {
	r := map[string]string{}
	if root, err := assets.Root(); err == nil {
		p := binding.Resolve(cfg, root)
		if cfg.WeightsDir == "" {
			r["weights_dir"] = p.Weights + " (the embedded tiny checkpoint)"
		}
		if cfg.TokenizerDir == "" {
			r["tokenizer_dir"] = p.Tokenizer + " (the vendored Qwen3 tokenizer)"
		}
		if cfg.PluginsDir == "" {
			r["plugins_dir"] = p.Plugins
		}
	}
	if cfg.PluginCacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			r["plugin_cache_dir"] = filepath.Join(d, "gr00tgw", "wazero")
		}
	}
	if cfg.DemoDir == "" {
		r["demo_dir"] = "<weights_dir>/demo/<tag>, then the plugin's demo/"
	}
	if cfg.GoldenDir == "" {
		r["golden_dir"] = binding.GoldenDir(cfg)
	}
	if cfg.Threads == 0 {
		r["threads"] = fmt.Sprintf("every core (%d)", runtime.NumCPU())
	}
	if len(cfg.Embodiments) == 0 {
		r["embodiments"] = "every plugin of plugins_dir"
	}
	return r
}
