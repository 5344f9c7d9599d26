//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gpuCheckTimeout bounds the quick CPU run of scripts/gpu-check.sh (about
// 20 s on an idle 2-core box: selfcheck, the tiny checkpoint served by the
// PyTorch runner on the CPU, smoke, 20 bench requests, one runner kill and
// its recovery, smoke again).
const gpuCheckTimeout = 5 * time.Minute

// torchPython is the interpreter the CPU check serves with:
// $GR00TGW_TORCH_PYTHON, else Debian's /usr/bin/python3 (python3-torch);
// the test skips, saying so, when it cannot import torch.
func torchPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("GR00TGW_TORCH_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("gpu-check: %s cannot import torch and numpy (apt-get install python3-torch python3-numpy, or set GR00TGW_TORCH_PYTHON): %v: %s",
			py, err, bytes.TrimSpace(out))
	}
	return py
}

// TestGPUCheckQuickCPU runs the GPU check's quick mode on the CPU —
// `scripts/gpu-check.sh --quick --torch-device cpu` with a freshly built
// binary, the tiny checkpoint and the PyTorch runner — so that the script
// make gpu-check runs on a CUDA host cannot rot: every step must pass and
// the summary must carry every figure (per-stage and total p50/p90/p99,
// peak memory "n/a (cpu)", the PCC line, the runner's kill and recovery).
func TestGPUCheckQuickCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("gpu-check: about 20 s; skipped with -short")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("gpu-check: no bash")
	}
	py := torchPython(t)
	bin, plugins := buildGateway(t)
	root := moduleRoot(t)
	out := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), gpuCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, filepath.Join(root, "scripts", "gpu-check.sh"),
		"--quick", "--torch-device", "cpu", "--bin", bin, "--plugins-dir", plugins,
		"--python", py, "--out", out, "--budget", "240")
	cmd.Dir = root
	// On the deadline, SIGTERM to the script's process group: its children
	// end and its trap stops the server it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 40 * time.Second
	start := time.Now()
	outb, err := cmd.CombinedOutput()
	log := string(outb)
	t.Logf("gpu-check --quick --torch-device cpu: %v\n%s", time.Since(start).Round(time.Millisecond), log)
	require.NoError(t, err, "gpu-check failed (output above; logs in %s)", out)

	summary, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	require.NoError(t, err)
	s := string(summary)
	assert.Contains(t, s, "== gpu-check summary (quick, --torch-device cpu): PASS")
	assert.Regexp(t, `(?m)^smoke: +PASS `, s)
	for _, field := range []string{"wall", "total", "device", "device_stages.vision", "device_stages.llm",
		"device_stages.adapter", "device_stages.denoise"} {
		assert.Regexp(t, `(?m)^  `+regexp.QuoteMeta(field)+` +[0-9.]+ +[0-9.]+ +[0-9.]+$`, s, "bench p50/p90/p99 of %s", field)
	}
	assert.Regexp(t, `(?m)^  20 requests, 0 errors, `, s)
	assert.Regexp(t, `(?m)^peak GPU memory: +n/a \(cpu\)$`, s)
	assert.Regexp(t, `(?m)^card: +n/a \(cpu\)$`, s)
	assert.Regexp(t, `(?m)^recovery: +runner [0-9]+ killed \(SIGKILL\); health .*starting.* -> ok .*; restart [0-9.]+ s$`, s)
	assert.Regexp(t, `(?m)^ +next predict [0-9.]+ ms, bit-identical PCC=1\.0+ vs before; smoke again: PASS `, s)
	// The selfcheck's PCC of bf16 against fp32, and both against caseA's golden.
	assert.Regexp(t, `(?m)^action_pred PCC: +bf16 vs fp32 \(torch, cpu\) on caseA's inputs: (0\.99\d*|1\.0+) \(gate 0\.99\), max\|d\| `, s)
	assert.Regexp(t, `(?m)^ +vs a golden: fp32 (0\.99\d*|1\.0+), bf16 (0\.99\d*|1\.0+) vs the reference's torch fp32 \(caseA golden\)$`, s)
}
