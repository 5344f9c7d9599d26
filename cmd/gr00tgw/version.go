package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device/torchrunner"
)

// version is the release version, set at link time:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/gr00tgw
//
// Without it the module version from the build info is used ("(devel)" in a
// checkout).
var version = ""

func init() {
	register(&command{name: "version", summary: "print the version, commit and Go toolchain (with backend torch: what its Python offers)", run: runVersion})
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

func runVersion(ctx context.Context, args []string) error {
	fs := newFlags("version", "[--json] [--backend torch] [--torch-python PYTHON] [--config FILE]",
		"Prints the release version, the commit it was built from and the Go toolchain.\n"+
			"When the backend is torch (--backend torch, or the effective configuration:\n"+
			"--config FILE, $"+config.ConfigFileEnv+", GR00TGW_BACKEND), it also probes the\n"+
			"Python interpreter of device.torch.python (--torch-python) as serve would, and\n"+
			"prints the interpreter, its torch and numpy, CUDA and its devices, and whether\n"+
			"device.torch.* can be served there (exit 1 when not). The probe loads no model.")
	asJSON := fs.Bool("json", false, "print as JSON")
	fs.String("backend", "", "probe this backend's runtime (torch); empty: the configuration's backend")
	fs.String("torch-python", "", "the Python interpreter to probe (empty: device.torch.python)")
	file := fs.String("config", "", "YAML configuration file (env "+config.ConfigFileEnv+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	bi := readBuildInfo()
	var rep *torchReport
	var checkErr error
	// Only the keys above are flags here; a configuration that does not
	// load leaves the plain version unless torch was asked for by flag.
	l, err := loadConfig(fs, *file)
	switch {
	case err != nil && (fs.Changed("backend") || fs.Changed("torch-python") || *file != ""):
		return err
	case err == nil && l.Config.Backend == config.BackendTorch:
		o, f, err := probeTorch(ctx, l, slog.New(slog.NewTextHandler(io.Discard, nil)))
		var ke *torchrunner.KeyError
		if err != nil && !errors.As(err, &ke) {
			return err
		}
		checkErr = err
		rep = &torchReport{Facts: f, Device: o.Device, Dtype: o.Dtype, Check: "ok"}
		if checkErr != nil {
			rep.Check = checkErr.Error()
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(versionJSON{bi, rep}); err != nil {
			return err
		}
		return checkErr
	}
	mod := ""
	if bi.Modified {
		mod = " (modified)"
	}
	fmt.Printf("gr00tgw %s\ncommit  %s%s\ngo      %s\n", bi.Version, bi.Commit, mod, bi.Go)
	if rep != nil {
		rep.print(os.Stdout)
	}
	return checkErr
}

// versionJSON is `gr00tgw version --json`: the build, and with backend
// torch what the probe found under "torch_runner".
type versionJSON struct {
	buildInfo
	Torch *torchReport `json:"torch_runner,omitempty"`
}

// torchReport is what version prints about the torch runner's host.
type torchReport struct {
	torchrunner.Facts
	Device string `json:"device"` // device.torch.device
	Dtype  string `json:"dtype"`  // device.torch.dtype
	Check  string `json:"check"`  // "ok", or why device.torch.* cannot be served
}

func (r *torchReport) print(w io.Writer) {
	f := r.Facts
	if f.Executable == "" {
		fmt.Fprintf(w, "python  %s\n", f.NotFound)
	} else {
		fmt.Fprintf(w, "python  %s (%s)\n", f.Executable, f.PythonVersion)
		torch := f.Torch
		if torch == "" {
			torch = "none (" + f.TorchError + ")"
		}
		fmt.Fprintf(w, "torch   %s; numpy %s; CUDA %s; mkldnn %v, cpu bf16 %v, sdpa %v, compile %v\n",
			torch, orNone(f.NumPy), orNone(f.CUDAVersion), f.MKLDNN, f.CPUBF16, f.SDPA, f.Compile)
		for _, d := range f.Devices {
			fmt.Fprintf(w, "cuda:%d  %s, %d MiB, compute capability %d.%d, bf16 %v\n", d.Index, d.Name, d.TotalMiB, d.Capability[0], d.Capability[1], d.BF16)
		}
	}
	fmt.Fprintf(w, "runner  device %s, dtype %s: %s\n", r.Device, r.Dtype, r.Check)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
