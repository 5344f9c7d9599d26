// Package pytest finds a Python 3 interpreter with the modules a test's
// reference client needs (Debian: python3-zmq, python3-msgpack,
// python3-numpy, python3-websockets), so the robot-protocol tests can run
// real Python clients when they are installed and skip, saying what to
// install, when they are not.
package pytest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Debian names the apt package of each module the tests use.
var Debian = map[string]string{
	"zmq": "python3-zmq", "msgpack": "python3-msgpack", "numpy": "python3-numpy", "websockets": "python3-websockets",
}

// Find returns the first of $GR00TGW_TEST_PYTHON, /usr/bin/python3 and
// python3 on PATH that imports every module, or skips tb naming the
// packages to install.
func Find(tb testing.TB, modules ...string) string {
	tb.Helper()
	cands := []string{"/usr/bin/python3", "python3"}
	if p := os.Getenv("GR00TGW_TEST_PYTHON"); p != "" {
		cands = append([]string{p}, cands...)
	}
	check := "import " + strings.Join(modules, ", ")
	for _, c := range cands {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = exec.CommandContext(ctx, p, "-c", check).Run()
		cancel()
		if err == nil {
			return p
		}
	}
	var pkgs []string
	for _, m := range modules {
		if d, ok := Debian[m]; ok {
			pkgs = append(pkgs, d)
		} else {
			pkgs = append(pkgs, m)
		}
	}
	tb.Skipf("no python3 with %s (apt-get install -y %s)", strings.Join(modules, ", "), strings.Join(pkgs, " "))
	return ""
}

// Run runs python with args, stdin in, and returns stdout; a non-zero exit
// fails tb with stderr.
func Run(tb testing.TB, python string, stdin []byte, args ...string) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s %s: %v\nstderr:\n%s\nstdout:\n%s", python, strings.Join(args, " "), err, errb.String(), out.String())
	}
	return out.Bytes()
}

// Output runs python with args and stdin and returns stdout, stderr and
// the exit error (for clients that are expected to fail).
func Output(tb testing.TB, python string, stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.Bytes(), errb.Bytes(), err
}
