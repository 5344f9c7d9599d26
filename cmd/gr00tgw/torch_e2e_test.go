//go:build linux

package main

// Tests of serve --backend torch on the built binary: a configuration the
// host cannot serve fails before anything listens (exit 1, one line naming
// the key); a fake interpreter — a shell script that answers the probe and
// then runs `gr00tgw runner` in place of the PyTorch runner — shows the
// wiring (argv, PYTHONPATH, the extracted package, the probe's log); and,
// where Debian's torch is installed (apt-get install python3-torch), the
// real PyTorch runner serves the demo within the golden. `gr00tgw version
// --backend torch` is tested in process with fake interpreters.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device/torchrunner"
)

// debianTorch is Debian's interpreter (python3-torch installs there; the
// python3 on PATH may be another one without torch).
const debianTorch = "/usr/bin/python3"

// requireDebianTorch skips unless /usr/bin/python3 imports torch and
// numpy and the embedded runner has module.
func requireDebianTorch(t *testing.T, module string) {
	t.Helper()
	if out, err := exec.Command(debianTorch, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: %s cannot import torch and numpy (%v: %s): apt-get install python3-torch python3-numpy (make torch-deps)",
			debianTorch, err, bytes.TrimSpace(out))
	}
	if !torchrunner.HasModule(module) {
		t.Skipf("SKIPPED: the embedded PyTorch runner has no %s/%s.py yet", torchrunner.Package, module)
	}
}

// fakeTorchPython writes a shell script standing in for python: it
// answers the probe with probe (a JSON line); run as the runner, it
// appends its arguments and PYTHONPATH to <dir>/calls and, when bin is
// set, execs `bin runner` with the runner protocol's flags it was given.
func fakeTorchPython(t *testing.T, probe, bin string) (python, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	script := `#!/bin/sh
if [ "$3" = "gr00t_torchrunner.probe" ]; then
cat <<'EOF'
` + probe + `
EOF
exit 0
fi
echo "argv $*" >> ` + calls + `
echo "pythonpath $PYTHONPATH" >> ` + calls + `
echo "unbuffered $PYTHONUNBUFFERED" >> ` + calls + `
[ -n "` + bin + `" ] || exit 3
while [ $# -gt 0 ]; do
	case "$1" in
	--fd) fd=$2; shift;;
	--weights-dir) w=$2; shift;;
	--threads) th=$2; shift;;
	--index) ix=$2; shift;;
	esac
	shift
done
exec "` + bin + `" runner --fd "$fd" --backend cpu --weights-dir "$w" --threads "$th" --index "$ix"
`
	python = filepath.Join(dir, "python3")
	require.NoError(t, os.WriteFile(python, []byte(script), 0o755))
	return python, calls
}

const (
	fakeProbeGPU     = `{"python":"3.12.3","torch":"2.11.0+cu130","torch_error":null,"numpy":"2.1.0","cuda_available":true,"cuda_version":"13.0","device_count":1,"devices":[{"index":0,"name":"Fake GPU 80GB","total_mib":81559,"capability":[9,0],"bf16":true}],"mkldnn":true,"cpu_bf16":false,"sdpa":true,"compile":true}`
	fakeProbeNoTorch = `{"python":"3.11.2","torch":null,"torch_error":"ModuleNotFoundError: No module named 'torch'","numpy":null,"cuda_available":false,"cuda_version":null,"device_count":0,"devices":[],"mkldnn":false,"cpu_bf16":false,"sdpa":false,"compile":false}`
)

// TestServeTorchRefusedBeforeListening: a torch configuration the host
// cannot serve exits 1 within seconds with one line naming the key, and
// serve never listened.
func TestServeTorchRefusedBeforeListening(t *testing.T) {
	bin, plugins := buildGateway(t)
	root := moduleRoot(t)
	noTorch, _ := fakeTorchPython(t, fakeProbeNoTorch, "")
	type tc struct {
		name  string
		args  []string
		want  string
		torch bool // needs Debian's torch (and the real probe)
	}
	cases := []tc{
		{"python_missing", []string{"--torch-python", "/nonexistent/python3"},
			"config: key[device.torch.python] (from flag --torch-python): /nonexistent/python3 not found", false},
		{"dtype_fp16", []string{"--torch-dtype", "fp16"},
			`config: key[device.torch.dtype] (from flag --torch-dtype): "fp16" is not one of auto, bf16, fp32`, false},
		{"policy", []string{"--policy", "bf16"}, `config: key[policy] (from flag --policy): "bf16": backend torch takes its dtype from device.torch.dtype`, false},
		// Not torch: the cpu backend's policies are checked as early (the
		// later --backend wins).
		{"cpu_policy_fp16", []string{"--backend", "cpu", "--policy", "fp16"},
			`config: key[policy] (from flag --policy): "fp16" is not a dtype policy of backend cpu (have fp32, mixed_dit)`, false},
		{"no_torch", []string{"--torch-python", noTorch},
			"config: key[device.torch.python] (from flag --torch-python): " + noTorch + " has no torch (ModuleNotFoundError: No module named 'torch'): install python3-torch (Debian) or torch ≥ 1.13", false},
		{"cuda_absent", []string{"--torch-python", debianTorch, "--torch-device", "cuda"},
			"config: key[device.torch.device] (from flag --torch-device): cuda asked, but torch ", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.torch {
				requireDebianTorch(t, "probe")
				if out, _ := exec.Command(debianTorch, "-c", "import torch; print(torch.cuda.is_available())").Output(); strings.TrimSpace(string(out)) == "True" {
					t.Skip("this host has CUDA: cuda would be served")
				}
			}
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			args := append([]string{"serve", "--backend", "torch", "--addr", pickPort(t), "--plugins-dir", plugins, "--log-format", "json"}, c.args...)
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Dir = t.TempDir()
			cmd.Env = childEnv(root)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			t0 := time.Now()
			err := cmd.Run()
			took := time.Since(t0)
			out := stderr.String()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "serve must fail: %s", out)
			assert.Equal(t, 1, ee.ExitCode(), out)
			last := lastLine(out)
			assert.True(t, strings.HasPrefix(last, "gr00tgw serve: "+c.want), "last line %q, want it to start with %q", last, "gr00tgw serve: "+c.want)
			assert.NotContains(t, out, "listening", "nothing listened")
			assert.NotContains(t, out, "Loading weights", "no weights loaded")
			assert.Less(t, took, 60*time.Second)
			t.Logf("%s (%v): %s", c.name, took.Round(time.Millisecond), last)
		})
	}
}

// TestE2ETorchWiring: serve --backend torch starts device.runners runners
// as `<python> -B -m gr00t_torchrunner --device … --dtype … --cuda-graphs
// on --fd 3 --backend torch …` with the package extracted from the binary
// on PYTHONPATH, after logging the probe; here the "python" runs the Go
// runner, so the demo is served within its golden.
func TestE2ETorchWiring(t *testing.T) {
	bin, plugins := buildGateway(t)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // childEnv passes it on
	py, calls := fakeTorchPython(t, fakeProbeGPU, bin)
	g := startGateway(t, bin, plugins, "--backend", "torch", "--torch-python", py, "--device-runners", "2", "--torch-dtype", "bf16")
	demo := getDemo(t, g)
	st, _, body, err := demoPredict(t, &http.Client{Timeout: 20 * time.Second}, g, demo)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, "%s", body)
	checkGolden(t, body, demo)
	require.NoError(t, g.stop(t))

	b, err := os.ReadFile(calls)
	require.NoError(t, err)
	var argvs, paths []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		switch k, v, _ := strings.Cut(l, " "); k {
		case "argv":
			argvs = append(argvs, v)
		case "pythonpath":
			paths = append(paths, v)
		case "unbuffered":
			assert.Equal(t, "1", v, "PYTHONUNBUFFERED")
		}
	}
	require.Len(t, argvs, 2, "one start per runner: %s", b)
	for _, a := range argvs {
		assert.Regexp(t, `^-B -m gr00t_torchrunner --device cuda --dtype bf16 --cuda-graphs on --fd 3 --backend torch --weights-dir \S+ --policy fp32 --threads \d+ --index [01]$`, a)
	}
	assert.NotEqual(t, argvs[0][len(argvs[0])-1], argvs[1][len(argvs[1])-1], "indexes 0 and 1")
	sum, err := torchrunner.Sum()
	require.NoError(t, err)
	want := filepath.Join(cache, "gr00tgw", "torchrunner-"+sum[:12])
	for _, p := range paths {
		assert.Equal(t, want, strings.Split(p, ":")[0])
	}
	assert.FileExists(t, filepath.Join(want, "gr00t_torchrunner", "__init__.py"))
	logs := fileTail(g.stderr, 1<<20)
	assert.Contains(t, logs, "torch runner: probed")
	assert.Contains(t, logs, "cuda:0 Fake GPU 80GB")
}

// TestE2ETorchRunner is the PyTorch runner's acceptance on Debian's torch
// (CPU, auto = fp32), with device.torch.python left at its default while
// the python3 on PATH has no torch (Debian's is found): the demo of each
// embodiment within 1e-4 of its golden, `gr00tgw smoke` PASS, /info
// showing the runner's facts; kill -9 of the runner during a request is a
// 503, a new runner passes the golden warm-up and the next request matches
// the golden again.
func TestE2ETorchRunner(t *testing.T) {
	requireDebianTorch(t, "__main__")
	bin, plugins := buildGateway(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	// A python3 first on PATH without torch: -S drops dist-packages.
	shadow := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(shadow, "python3"), []byte("#!/bin/sh\nexec "+debianTorch+" -S \"$@\"\n"), 0o755))
	t.Setenv("PATH", shadow+string(os.PathListSeparator)+os.Getenv("PATH"))
	g := startGateway(t, bin, plugins, "--backend", "torch", "--torch-device", "cpu")
	assert.Contains(t, fileTail(g.stderr, 1<<20), "on PATH cannot serve; using "+debianTorch)
	client := &http.Client{Timeout: 60 * time.Second}
	demo := getDemo(t, g)
	golden := func(body []byte, want map[string][][]float64) {
		t.Helper()
		var r struct {
			Actions map[string][][]float64 `json:"actions"`
		}
		require.NoError(t, json.Unmarshal(body, &r))
		md, err := maxActionDiff(r.Actions, want)
		require.NoError(t, err)
		assert.LessOrEqual(t, md, 1e-4, "max |actions - golden|")
		t.Logf("max |actions - golden| = %.3g", md)
	}
	st, _, body, err := demoPredict(t, client, g, demo)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, "%s", body)
	golden(body, demo.Expected.Actions)

	waitServed(t, g, "libero_sim")
	lreq, lgold := demoFor(t, g, "libero_sim")
	require.NotNil(t, lgold, "LIBERO's demo has a golden")
	resp, err := client.Post(g.base+"/predict", "application/json", bytes.NewReader(lreq))
	require.NoError(t, err)
	lbody, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", lbody)
	golden(lbody, lgold)

	var sout, serr bytes.Buffer
	line := captureStdout(t, func() {
		assert.Equal(t, 0, dispatch(context.Background(), []string{"smoke", "--url", g.base}, &sout, &serr), serr.String())
	})
	assert.True(t, strings.HasPrefix(string(line), "PASS"), "%s", line)

	resp, err = http.Get(g.base + "/info")
	require.NoError(t, err)
	var info struct {
		Hardware    map[string]any `json:"hardware"`
		Policy      map[string]any `json:"policy"`
		DeviceFacts map[string]any `json:"device_facts"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&info))
	_ = resp.Body.Close()
	t.Logf("/info device_facts: %v", info.DeviceFacts)
	assert.Equal(t, "torch", info.Hardware["backend"])
	assert.Equal(t, "fp32", info.Policy["dtype_policy"])
	assert.Equal(t, "process", info.DeviceFacts["isolation"])
	assert.NotEmpty(t, info.DeviceFacts["torch"], "the runner's HELLO extra: torch version")
	assert.Equal(t, "cpu", info.DeviceFacts["device"])

	// kill -9 mid-request: 503, a restart through the golden gate, the golden again.
	st, h, body, d := signalDuringPredict(t, g, demo, syscall.SIGKILL)
	require.Equal(t, http.StatusServiceUnavailable, st, "%s", body)
	assert.Contains(t, string(body), `"code":"device_restarting"`)
	assert.NotEmpty(t, h.Get("Retry-After"))
	t.Logf("kill -9 of the torch runner during a request: %d after %v", st, d)
	waitReady(t, g, 120*time.Second)
	st, _, body, err = demoPredict(t, client, g, demo)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, "%s", body)
	golden(body, demo.Expected.Actions)
	ri := getRunnerInfo(t, g)
	assert.GreaterOrEqual(t, ri.Restarts, 1)
	assert.Contains(t, ri.LastCause, "killed")
	require.NoError(t, g.stop(t))
}

// TestE2ETorchGateRefusesWrongWeights: a copy of the tiny checkpoint with
// one weight corrupted (same headers, so the same checkpoint digest and
// goldens) fails serve's start at the golden warm-up gate, naming the
// fidelity check, in fp32 and in bf16 (whose gate is PCC ≥ 0.999 against
// the fp32 golden); the intact checkpoint passes it in bf16.
func TestE2ETorchGateRefusesWrongWeights(t *testing.T) {
	requireDebianTorch(t, "__main__")
	bin, plugins := buildGateway(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	tiny := filepath.Join(moduleRoot(t), "testdata", "n17-tiny")
	bad := t.TempDir()
	require.NoError(t, os.CopyFS(bad, os.DirFS(tiny)))
	corruptTensor(t, filepath.Join(bad, "model.safetensors"), "action_head.action_decoder.layer2.W")

	for _, dtype := range []string{"fp32", "bf16"} {
		t.Run(dtype, func(t *testing.T) {
			addr := pickPort(t)
			cmd := exec.Command(bin, "serve", "--addr", addr, "--plugins-dir", plugins, "--weights-dir", bad,
				"--backend", "torch", "--torch-python", debianTorch, "--torch-device", "cpu", "--torch-dtype", dtype, "--golden-dir", "-")
			cmd.Env = childEnv(moduleRoot(t))
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "serve started on corrupted weights:\n%s", out)
			last := lastLine(string(out))
			assert.Contains(t, last, "fidelity vs golden", last)
			t.Logf("%s: %s", dtype, last)
		})
	}
	g := startGateway(t, bin, plugins, "--backend", "torch", "--torch-python", debianTorch, "--torch-device", "cpu", "--torch-dtype", "bf16")
	logs := fileTail(g.stderr, 1<<20)
	assert.Contains(t, logs, "Warm-up fidelity vs golden")
	assert.Contains(t, logs, "runner ready on cpu (bf16)")
	t.Logf("bf16: %s", lastLineWith(logs, "Warm-up fidelity vs golden"))
	require.NoError(t, g.stop(t))
}

// corruptTensor overwrites the data of tensor name in a safetensors file
// with large values (bf16 0x4700 = 32768), leaving the header as it is.
func corruptTensor(t *testing.T, path, name string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b[:8])
	var hdr map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &hdr))
	var e struct {
		DType   string   `json:"dtype"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	require.NoError(t, json.Unmarshal(hdr[name], &e), name)
	require.Equal(t, "BF16", e.DType)
	for i := 8 + int64(n) + e.Offsets[0]; i < 8+int64(n)+e.Offsets[1]; i += 2 {
		b[i], b[i+1] = 0x00, 0x47
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// `gr00tgw version --backend torch` prints what the probe found and
// whether device.torch.* can be served (exit 1 when not).
func TestVersionTorch(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	gpu, _ := fakeTorchPython(t, fakeProbeGPU, "")
	out := captureStdout(t, func() {
		require.NoError(t, runVersion(context.Background(), []string{"--backend", "torch", "--torch-python", gpu}))
	})
	s := string(out)
	assert.Contains(t, s, "gr00tgw ")
	assert.Contains(t, s, "python  "+gpu+" (3.12.3)\n")
	assert.Contains(t, s, "torch   2.11.0+cu130; numpy 2.1.0; CUDA 13.0;")
	assert.Contains(t, s, "cuda:0  Fake GPU 80GB, 81559 MiB, compute capability 9.0, bf16 true\n")
	assert.Contains(t, s, "runner  device cuda, dtype auto: ok\n")

	out = captureStdout(t, func() {
		require.NoError(t, runVersion(context.Background(), []string{"--backend", "torch", "--torch-python", gpu, "--json"}))
	})
	var v struct {
		Version string `json:"version"`
		Torch   struct {
			Torch   string `json:"torch"`
			Check   string `json:"check"`
			Devices []struct {
				Name string `json:"name"`
			} `json:"devices"`
		} `json:"torch_runner"`
	}
	require.NoError(t, json.Unmarshal(out, &v), "%s", out)
	assert.NotEmpty(t, v.Version)
	assert.Equal(t, "2.11.0+cu130", v.Torch.Torch)
	assert.Equal(t, "ok", v.Torch.Check)
	require.Len(t, v.Torch.Devices, 1)

	noTorch, _ := fakeTorchPython(t, fakeProbeNoTorch, "")
	var err error
	out = captureStdout(t, func() {
		err = runVersion(context.Background(), []string{"--backend", "torch", "--torch-python", noTorch})
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "device.torch.python: "+noTorch+" has no torch")
	assert.Contains(t, string(out), "torch   none (ModuleNotFoundError: No module named 'torch')")

	// Without torch in the configuration: the version only.
	out = captureStdout(t, func() { require.NoError(t, runVersion(context.Background(), nil)) })
	assert.NotContains(t, string(out), "python")
}

// lastLineWith is the last line of s that contains sub.
func lastLineWith(s, sub string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return lines[i]
		}
	}
	return ""
}
