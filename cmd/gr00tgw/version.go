package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
)

// version is the release version, set at link time:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/gr00tgw
//
// Without it the module version from the build info is used ("(devel)" in a
// checkout).
var version = ""

func init() {
	register(&command{name: "version", summary: "print the version, commit and Go toolchain", run: runVersion})
}

// buildInfo is what `gr00tgw version` prints.
type buildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Time     string `json:"commit_time,omitempty"`
	Go       string `json:"go"`
	Module   string `json:"module"`
}

func readBuildInfo() buildInfo {
	bi := buildInfo{Version: version, Commit: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if bi.Version == "" {
			bi.Version = "unknown"
		}
		return bi
	}
	bi.Go = info.GoVersion
	bi.Module = info.Main.Path
	if bi.Version == "" {
		bi.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.Commit = s.Value
		case "vcs.modified":
			bi.Modified = s.Value == "true"
		case "vcs.time":
			bi.Time = s.Value
		}
	}
	return bi
}

// versionString is the one-line version used by serve's logs and /info.
func versionString() string {
	bi := readBuildInfo()
	s := bi.Version
	if bi.Commit != "unknown" {
		c := bi.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += "+" + c
		if bi.Modified {
			s += "-dirty"
		}
	}
	return s
}

func runVersion(_ context.Context, args []string) error {
	fs := newFlags("version", "[--json]", "Prints the release version, the commit it was built from and the Go toolchain.")
	asJSON := fs.Bool("json", false, "print as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	bi := readBuildInfo()
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(bi)
	}
	mod := ""
	if bi.Modified {
		mod = " (modified)"
	}
	fmt.Printf("gr00tgw %s\ncommit  %s%s\ngo      %s\n", bi.Version, bi.Commit, mod, bi.Go)
	return nil
}
