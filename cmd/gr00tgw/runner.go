package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/runner"
)

func init() {
	register(&command{name: "runner", summary: "host one backend behind the runner protocol (started by serve; device/RUNNER.md)", run: runRunner})
}

// runRunner is `gr00tgw runner`: open one backend, then serve the runner
// protocol on an inherited socket (--fd, default $GR00TGW_RUNNER_FD) or on
// a path it listens on for one client (--socket). It exits 0 after the
// client's CLOSE, 1 when the client goes away or the backend fails to open.
func runRunner(ctx context.Context, args []string) error {
	fs := newFlags("runner", "(--fd N | --socket PATH) [--backend cpu] --weights-dir DIR [--policy P] [--threads N]",
		"Hosts one device backend and serves the runner protocol (device/RUNNER.md) on a\nUnix SOCK_SEQPACKET socket: an inherited descriptor (serve starts it so) or a\npath. The weights live only in this process.")
	fd := fs.Int("fd", envInt("GR00TGW_RUNNER_FD", -1), "inherited socket descriptor (env GR00TGW_RUNNER_FD)")
	path := fs.String("socket", "", "listen on this Unix socket path and serve its first client")
	backend := fs.String("backend", "cpu", "device backend kind")
	weights := fs.String("weights-dir", "", "checkpoint directory")
	policy := fs.String("policy", "", "dtype policy (empty: the backend's default)")
	threads := fs.Int("threads", 0, "cores the backend uses (0: all)")
	index := fs.Int("index", 0, "this runner's index (logs)")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	var h slog.Handler = slog.NewJSONHandler(os.Stderr, nil)
	if *logFormat == "text" {
		h = slog.NewTextHandler(os.Stderr, nil)
	}
	log := slog.New(h).With("runner", *index, "pid", os.Getpid())
	var conn *net.UnixConn
	switch {
	case *path != "":
		ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: *path, Net: "unixpacket"})
		if err != nil {
			return fmt.Errorf("runner: listen %s: %w", *path, err)
		}
		log.Info("runner listening", "socket", *path)
		conn, err = ln.AcceptUnix()
		_ = ln.Close()
		if err != nil {
			return fmt.Errorf("runner: accept: %w", err)
		}
	case *fd >= 0:
		f := os.NewFile(uintptr(*fd), "runner-socket")
		c, err := net.FileConn(f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("runner: fd %d: %w", *fd, err)
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			return fmt.Errorf("runner: fd %d is not a Unix socket", *fd)
		}
		conn = uc
	default:
		return fmt.Errorf("%w: need --fd or --socket", errUsage)
	}
	defer conn.Close()
	if *weights == "" {
		return errors.New("runner: --weights-dir is not set")
	}
	be, err := device.Open(ctx, *backend, device.Options{WeightsDir: *weights, Policy: *policy, Threads: *threads})
	if err != nil {
		return fmt.Errorf("runner: backend %s: %w", *backend, err)
	}
	defer be.Close()
	layout, err := runnerLayout(be, *weights)
	if err != nil {
		return err
	}
	log.Info("runner ready", "backend", *backend, "layout", layout)
	err = runner.Serve(ctx, conn, be, runner.ServeOptions{Layout: layout, Runner: "gr00tgw " + versionString()})
	if err != nil {
		log.Info("runner: client went away", "err", err)
		return fmt.Errorf("runner: %w", err)
	}
	log.Info("runner closed")
	return nil
}

// runnerLayout is the protocol layout of be: its limits (Facts) and the
// checkpoint's tensor widths.
func runnerLayout(be device.Backend, weights string) (runner.Layout, error) {
	var cfg model.Config
	if c, ok := be.(interface{ Config() model.Config }); ok {
		cfg = c.Config()
	} else {
		ck, err := model.Open(weights)
		if err != nil {
			return runner.Layout{}, fmt.Errorf("runner: %w", err)
		}
		cfg = ck.Config
		_ = ck.Close()
	}
	f := be.Facts()
	return runner.Layout{MaxPatches: f.MaxPatches, MaxImages: f.MaxImages, MaxSeq: f.MaxSeqLen,
		PixelCols: cfg.Backbone.Vision.PatchDim(), StateDim: cfg.MaxStateDim,
		ActionHorizon: cfg.ActionHorizon, ActionDim: cfg.MaxActionDim}, nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
