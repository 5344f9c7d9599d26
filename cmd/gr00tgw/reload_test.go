//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeProc writes a /proc-like tree: one directory per pid with its
// NUL-separated cmdline.
func fakeProc(t *testing.T, procs map[int][]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, argv := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		cmdline := strings.Join(argv, "\x00")
		if len(argv) > 0 {
			cmdline += "\x00"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "self"), 0o755)) // not a pid: skipped
	return root
}

func TestReloadTarget(t *testing.T) {
	host := map[int][]string{
		1:   {"/sbin/init", "splash"},
		7:   {}, // a kernel thread: empty cmdline
		42:  {"/usr/local/bin/gr00tgw", "serve", "--addr", "127.0.0.1:20000"},
		43:  {"gr00tgw", "predict", "--url", "http://127.0.0.1:20000"},
		44:  {"/opt/other/serve", "serve"},
		99:  {"bin/gr00tgw", "reload"},
		100: {"/usr/bin/python3", "gr00tgw", "serve"},
	}
	container := map[int][]string{1: {"/gr00tgw", "serve"}, 12: {"/gr00tgw", "reload"}}
	twoServes := map[int][]string{1: {"/sbin/init"}, 42: {"gr00tgw", "serve"}, 77: {"./bin/gr00tgw", "serve", "--config", "x.yaml"}}
	noServe := map[int][]string{1: {"/sbin/init"}, 99: {"gr00tgw", "reload"}}
	for _, tc := range []struct {
		name   string
		procs  map[int][]string
		pid    int
		self   int
		want   int
		errHas []string
	}{
		{name: "host: the one serve", procs: host, self: 99, want: 42},
		{name: "container: PID 1", procs: container, self: 12, want: 1},
		{name: "host: --pid 1 is init", procs: host, pid: 1, self: 99, errHas: []string{"--pid 1 is not gr00tgw serve", "/sbin/init splash", "nothing was signalled"}},
		{name: "--pid of another gr00tgw command", procs: host, pid: 43, self: 99, errHas: []string{"--pid 43 is not gr00tgw serve", "gr00tgw predict"}},
		{name: "--pid of a process named serve", procs: host, pid: 44, self: 99, errHas: []string{"--pid 44 is not gr00tgw serve"}},
		{name: "--pid of a script argument", procs: host, pid: 100, self: 99, errHas: []string{"--pid 100 is not gr00tgw serve"}},
		{name: "--pid of a kernel thread", procs: host, pid: 7, self: 99, errHas: []string{"--pid 7 is not gr00tgw serve", "(no command line)"}},
		{name: "--pid of nothing", procs: host, pid: 5000, self: 99, errHas: []string{"--pid 5000", "no process 5000"}},
		{name: "--pid of the serve", procs: host, pid: 42, self: 99, want: 42},
		{name: "no serve", procs: noServe, self: 99, errHas: []string{"no gr00tgw serve is running", "nothing was signalled", "--pid"}},
		{name: "two serves", procs: twoServes, self: 99, errHas: []string{"2 gr00tgw serve processes", "pids 42, 77", "pass --pid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reloadTarget(hostProcs{root: fakeProc(t, tc.procs)}, tc.pid, tc.self)
			if len(tc.errHas) > 0 {
				require.Error(t, err)
				for _, s := range tc.errHas {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.pid)
		})
	}
}

// TestReloadRefusesOtherProcess runs the command against a live process
// that is not gr00tgw serve and checks that it was left alone: a SIGHUP
// would end `sleep`.
func TestReloadRefusesOtherProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	sleep := exec.Command("sleep", "30")
	require.NoError(t, sleep.Start())
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	require.Eventually(t, func() bool { // the command line appears just after the exec
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", sleep.Process.Pid))
		return len(b) > 0
	}, 10*time.Second, 5*time.Millisecond)
	var stdout, stderr strings.Builder
	code := dispatch(t.Context(), []string{"reload", "--pid", fmt.Sprint(sleep.Process.Pid)}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), fmt.Sprintf("--pid %d is not gr00tgw serve (its command line: sleep 30)", sleep.Process.Pid))
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, sleep.Process.Signal(syscall.Signal(0)), "sleep was signalled")
}
