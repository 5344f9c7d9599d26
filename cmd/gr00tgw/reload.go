//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
)

func init() {
	register(&command{name: "reload", summary: "send SIGHUP to a running serve (re-read plugins, TLS certificate, API keys)", run: runReload})
}

// runReload is `gr00tgw reload [--pid N]`: SIGHUP to serve, PID 1 by
// default — the gateway in its container, where the image has no kill
// (`kubectl exec POD -- gr00tgw reload`).
func runReload(_ context.Context, args []string) error {
	fs := newFlags("reload", "[--pid N]",
		"Sends SIGHUP to a running `gr00tgw serve`: it re-reads plugins_dir, the TLS\ncertificate (tls.*) and the API key file (auth.api_keys_file); what fails to\nload is logged and the previous version keeps serving.")
	pid := fs.Int("pid", 1, "process id of gr00tgw serve (1: the container's main process)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *pid < 1 {
		return fmt.Errorf("%w: --pid %d", errUsage, *pid)
	}
	if err := syscall.Kill(*pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("SIGHUP to process %d: %w", *pid, err)
	}
	fmt.Fprintf(os.Stderr, "sent SIGHUP to process %d (its log says what was reloaded)\n", *pid)
	return nil
}
