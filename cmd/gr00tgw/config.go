package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/gr00tgw/gr00tgw/config"
)

func init() {
	register(&command{name: "config", summary: "config print: the effective configuration with the source of every value", run: runConfig})
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

func runConfig(_ context.Context, args []string) error {
	if len(args) == 0 || args[0] != "print" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(os.Stderr, "usage: gr00tgw config print [--config FILE] [--<key> value ...]")
			return nil
		}
		return fmt.Errorf("%w: want `gr00tgw config print [flags]`", errUsage)
	}
	fs := pflag.NewFlagSet("config print", pflag.ContinueOnError)
	file := configFlags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %v", errUsage, fs.Args())
	}
	l, err := loadConfig(fs, *file)
	if err != nil {
		return err
	}
	return l.Print(os.Stdout)
}
