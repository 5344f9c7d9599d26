package main

import (
	"context"
	"os"

	"github.com/spf13/pflag"

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

// runConfig is `gr00tgw config VERB ...`.
func runConfig(ctx context.Context, args []string) error { return commands["config"].run(ctx, args) }

func runConfigPrint(_ context.Context, args []string) error {
	fs := newFlags("config print", "[--config FILE] [--<key> value ...]",
		"Prints every configuration key's effective value and where it came from\n(defaults → --config FILE → environment → flags), as serve would resolve it.")
	file := configFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	l, err := loadConfig(fs, *file)
	if err != nil {
		return err
	}
	return l.Print(os.Stdout)
}
