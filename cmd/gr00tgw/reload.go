//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

func init() {
	register(&command{name: "reload", summary: "send SIGHUP to a running serve (re-read plugins, TLS certificate, API keys)", run: runReload})
}

// runReload is `gr00tgw reload [--pid N]`: SIGHUP to a running `gr00tgw
// serve`, and to nothing else. With --pid, that process must be a gr00tgw
// serve (its command line is checked) or the reload is refused. Without it,
// the one gr00tgw serve on this host (in a container: PID 1, `kubectl exec
// POD -- gr00tgw reload`) is found by its command line; none or several is
// an error that lists what was found.
func runReload(_ context.Context, args []string) error {
	fs := newFlags("reload", "[--pid N]",
		"Sends SIGHUP to a running `gr00tgw serve`: it re-reads plugins_dir, the TLS\ncertificate (tls.*) and the API key file (auth.api_keys_file); what fails to\nload is logged and the previous version keeps serving. Only a process whose\ncommand line is `gr00tgw serve ...` is signalled; without --pid the one such\nprocess on this host (PID 1 in a container) is found by its command line.")
	pid := fs.Int("pid", 0, "process id of gr00tgw serve (default: the only gr00tgw serve running here)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if fs.Changed("pid") && *pid < 1 {
		return fmt.Errorf("%w: --pid %d", errUsage, *pid)
	}
	target, err := reloadTarget(hostProcs{}, *pid, os.Getpid())
	if err != nil {
		return err
	}
	if err := syscall.Kill(target.pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("SIGHUP to process %d: %w", target.pid, err)
	}
	fmt.Fprintf(os.Stderr, "sent SIGHUP to gr00tgw serve, process %d (%s); its log says what was reloaded\n", target.pid, target.commandLine())
	return nil
}

// proc is one process as reload sees it: its id and argv.
type proc struct {
	pid  int
	argv []string
}

// commandLine is argv joined by spaces and cut to 120 bytes, for messages.
func (p proc) commandLine() string {
	s := strings.Join(p.argv, " ")
	if s == "" {
		s = "(no command line)"
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// isServe reports whether p is `gr00tgw serve`: argv[0]'s base name is
// gr00tgw (as installed, in the image and as built by make) and the
// subcommand, argv[1], is serve.
func (p proc) isServe() bool {
	return len(p.argv) >= 2 && filepath.Base(p.argv[0]) == "gr00tgw" && p.argv[1] == "serve"
}

// procTable lists and looks up processes; hostProcs reads the host's, tests
// pass a fixed table.
type procTable interface {
	// get returns process pid, or an error wrapping os.ErrNotExist when
	// there is none.
	get(pid int) (proc, error)
	// all returns every process that can be seen.
	all() ([]proc, error)
}

// reloadTarget picks the process to signal: pid when it is a gr00tgw
// serve (pid 0: the one gr00tgw serve in table other than self).
func reloadTarget(table procTable, pid, self int) (proc, error) {
	if pid > 0 {
		p, err := table.get(pid)
		if err != nil {
			return proc{}, fmt.Errorf("--pid %d: %w", pid, err)
		}
		if !p.isServe() {
			return proc{}, fmt.Errorf("--pid %d is not gr00tgw serve (its command line: %s); nothing was signalled", pid, p.commandLine())
		}
		return p, nil
	}
	procs, err := table.all()
	if err != nil {
		return proc{}, fmt.Errorf("listing processes to find gr00tgw serve: %w (pass --pid)", err)
	}
	var serves []proc
	for _, p := range procs {
		if p.pid != self && p.isServe() {
			serves = append(serves, p)
		}
	}
	switch len(serves) {
	case 1:
		return serves[0], nil
	case 0:
		return proc{}, errors.New("no gr00tgw serve is running on this host (none of its processes has the command line `gr00tgw serve ...`); nothing was signalled (pass --pid, or use POST /admin/reload)")
	}
	ids := make([]string, len(serves))
	for i, p := range serves {
		ids[i] = strconv.Itoa(p.pid)
	}
	return proc{}, fmt.Errorf("%d gr00tgw serve processes are running (pids %s); nothing was signalled: pass --pid", len(serves), strings.Join(ids, ", "))
}

// hostProcs reads this host's processes: /proc on Linux, ps(1) elsewhere.
type hostProcs struct {
	// root is the proc file system (default /proc).
	root string
}

func (h hostProcs) procRoot() string {
	if h.root != "" {
		return h.root
	}
	return "/proc"
}

func (h hostProcs) get(pid int) (proc, error) {
	if runtime.GOOS != "linux" && h.root == "" {
		return psProc(pid)
	}
	raw, err := os.ReadFile(filepath.Join(h.procRoot(), strconv.Itoa(pid), "cmdline"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return proc{}, fmt.Errorf("no process %d: %w", pid, os.ErrNotExist)
		}
		return proc{}, fmt.Errorf("reading the command line of process %d: %w", pid, err)
	}
	raw = bytes.TrimRight(raw, "\x00")
	var argv []string
	if len(raw) > 0 {
		argv = strings.Split(string(raw), "\x00")
	}
	return proc{pid: pid, argv: argv}, nil
}

func (h hostProcs) all() ([]proc, error) {
	if runtime.GOOS != "linux" && h.root == "" {
		return psAll()
	}
	entries, err := os.ReadDir(h.procRoot())
	if err != nil {
		return nil, err
	}
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid < 1 {
			continue
		}
		p, err := h.get(pid)
		if err != nil { // gone meanwhile, or not readable: not ours to signal
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out, nil
}

// psProc and psAll read processes through ps(1) where there is no /proc
// (macOS, the BSDs). The command line is split at spaces, which is enough to
// recognise `gr00tgw serve`.
func psProc(pid int) (proc, error) {
	out, err := exec.Command("ps", "-o", "args=", "-p", strconv.Itoa(pid)).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return proc{}, fmt.Errorf("no process %d (ps -p): %w", pid, os.ErrNotExist)
	}
	return proc{pid: pid, argv: strings.Fields(string(out))}, nil
}

func psAll() ([]proc, error) {
	out, err := exec.Command("ps", "-ax", "-o", "pid=,args=").Output()
	if err != nil {
		return nil, fmt.Errorf("ps -ax: %w", err)
	}
	var procs []proc
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		procs = append(procs, proc{pid: pid, argv: f[1:]})
	}
	return procs, nil
}
