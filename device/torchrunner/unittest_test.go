//go:build linux

package torchrunner

import (
	"os/exec"
	"testing"
)

// TestPythonUnittests runs the runner's own unittests (tests/: its
// protocol client over a socketpair, fp32 against case A's goldens, bf16's
// PCC, errors by kind, cancellation, the in-process read loop) with
// Debian's interpreter, so that `make test` runs them.
func TestPythonUnittests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several runner processes (~20 s)")
	}
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: %s cannot import torch and numpy (%v: %s): apt-get install python3-torch python3-numpy (make torch-deps)", python, err, out)
	}
	cmd := exec.Command(python, "-B", "-m", "unittest", "discover", "-s", "tests", "-v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest discover -s tests: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
