package torchrunner

// Tests of the extraction, the probe's parsing and Check's messages. The
// interpreters are fake: shell scripts in t.TempDir() that print what
// gr00t_torchrunner.probe would (hand-written JSON in its documented
// shape). TestProbeRealTorch runs the real probe on Debian's
// /usr/bin/python3 when it has torch (apt-get install python3-torch).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain keeps the extractions of Probe out of the user's cache.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "torchrunner-test-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// fakePython writes an executable script that prints out (and, for the
// probe, ignores its arguments).
func fakePython(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python3")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return p
}

// printing is a fake interpreter whose probe prints json.
func printing(t *testing.T, json string) string {
	return fakePython(t, "cat <<'EOF'\n"+json+"\nEOF")
}

const (
	probeNoTorch = `{"python":"3.11.2","torch":null,"torch_error":"ModuleNotFoundError: No module named 'torch'","numpy":"1.24.2","cuda_available":false,"cuda_version":null,"device_count":0,"devices":[],"mkldnn":false,"cpu_bf16":false,"sdpa":false,"compile":false}`
	probeOld     = `{"python":"3.9.2","torch":"1.12.1","torch_error":null,"numpy":"1.24.2","cuda_available":false,"cuda_version":null,"device_count":0,"devices":[],"mkldnn":true,"cpu_bf16":false,"sdpa":false,"compile":false}`
	probeCPU     = `{"python":"3.11.2","torch":"1.13.1","torch_error":null,"numpy":"1.24.2","cuda_available":false,"cuda_version":null,"device_count":0,"devices":[],"mkldnn":true,"cpu_bf16":true,"sdpa":false,"compile":false}`
	probeH100    = `{"python":"3.12.3","torch":"2.11.0+cu130","torch_error":null,"numpy":"2.1.0","cuda_available":true,"cuda_version":"13.0","device_count":1,"devices":[{"index":0,"name":"NVIDIA H100 80GB HBM3","total_mib":81559,"capability":[9,0],"bf16":true}],"mkldnn":true,"cpu_bf16":true,"sdpa":true,"compile":true}`
	probeV100    = `{"python":"3.10.12","torch":"2.1.0+cu118","torch_error":null,"numpy":"1.26.0","cuda_available":true,"cuda_version":"11.8","device_count":2,"devices":[{"index":0,"name":"Tesla V100-SXM2-16GB","total_mib":16160,"capability":[7,0],"bf16":false},{"index":1,"name":"NVIDIA A100-SXM4-40GB","total_mib":40536,"capability":[8,0],"bf16":true}],"mkldnn":true,"cpu_bf16":false,"sdpa":true,"compile":true}`
)

func TestProbeParsesFacts(t *testing.T) {
	py := fakePython(t, "echo 'a warning torch printed on stdout'\ncat <<'EOF'\n"+probeH100+"\nEOF")
	f, err := Probe(context.Background(), py)
	require.NoError(t, err)
	assert.Equal(t, Facts{Python: py, Executable: py, PythonVersion: "3.12.3", Torch: "2.11.0+cu130", NumPy: "2.1.0",
		CUDAAvailable: true, CUDAVersion: "13.0", DeviceCount: 1,
		Devices: []GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, Capability: [2]int{9, 0}, BF16: true}},
		MKLDNN:  true, CPUBF16: true, SDPA: true, Compile: true}, f)
	assert.Equal(t, []string{"cuda:0 NVIDIA H100 80GB HBM3"}, f.DeviceNames())
	require.NoError(t, Check(f, "cuda", "auto"))
	require.NoError(t, Check(f, "cuda:0", "bf16"))
	require.NoError(t, Options{Device: "cuda", Compile: true}.Check(f))
}

// Check's one line per problem, naming the key and what was found.
func TestCheckMessages(t *testing.T) {
	abs := func(t *testing.T, json string) string { return printing(t, json) }
	for _, tc := range []struct {
		name          string
		python        func(t *testing.T) string
		device, dtype string
		compile       bool
		want          string // "" = no error; "@" stands for the interpreter's path
		key           string
	}{
		{name: "not_on_path", python: func(*testing.T) string { return "no-such-python-gr00tgw" }, device: "cpu", dtype: "auto",
			want: `device.torch.python: "no-such-python-gr00tgw" not found on PATH`, key: KeyPython},
		{name: "missing_path", python: func(*testing.T) string { return "/nonexistent/python3" }, device: "cpu", dtype: "auto",
			want: `device.torch.python: /nonexistent/python3 not found (`, key: KeyPython},
		{name: "no_torch", python: func(t *testing.T) string { return abs(t, probeNoTorch) }, device: "cpu", dtype: "auto",
			want: "device.torch.python: @ has no torch (ModuleNotFoundError: No module named 'torch'): install python3-torch (Debian) or torch ≥ 1.13", key: KeyPython},
		{name: "old_python", python: func(t *testing.T) string { return abs(t, strings.Replace(probeCPU, `"3.11.2"`, `"3.8.10"`, 1)) }, device: "cpu", dtype: "auto",
			want: "device.torch.python: @ is Python 3.8.10, older than 3.9", key: KeyPython},
		{name: "old_torch", python: func(t *testing.T) string { return abs(t, probeOld) }, device: "cpu", dtype: "auto",
			want: "device.torch.python: @ has torch 1.12.1, older than 1.13: install python3-torch (Debian) or torch ≥ 1.13", key: KeyPython},
		{name: "no_cuda", python: func(t *testing.T) string { return abs(t, probeCPU) }, device: "cuda", dtype: "auto",
			want: "device.torch.device: cuda asked, but torch 1.13.1 on @ sees no CUDA device (a CPU-only torch build)", key: KeyDevice},
		{name: "no_cuda_index", python: func(t *testing.T) string { return abs(t, probeCPU) }, device: "cuda:0", dtype: "fp32",
			want: "device.torch.device: cuda:0 asked, but torch 1.13.1 on @ sees no CUDA device", key: KeyDevice},
		{name: "cpu_ok", python: func(t *testing.T) string { return abs(t, probeCPU) }, device: "cpu", dtype: "bf16"},
		{name: "index_beyond", python: func(t *testing.T) string { return abs(t, probeH100) }, device: "cuda:1", dtype: "auto",
			want: "device.torch.device: cuda:1 asked, but torch 2.11.0+cu130 on @ sees 1 CUDA device(s): cuda:0 NVIDIA H100 80GB HBM3", key: KeyDevice},
		{name: "bad_device", python: func(t *testing.T) string { return abs(t, probeH100) }, device: "gpu", dtype: "auto",
			want: `device.torch.device: device "gpu" is not cpu, cuda or cuda:N`, key: KeyDevice},
		{name: "bad_dtype", python: func(t *testing.T) string { return abs(t, probeH100) }, device: "cuda", dtype: "fp16",
			want: `device.torch.dtype: "fp16" is not one of auto, bf16, fp32`, key: KeyDtype},
		{name: "bf16_on_v100", python: func(t *testing.T) string { return abs(t, probeV100) }, device: "cuda:0", dtype: "bf16",
			want: "device.torch.dtype: bf16 asked, but cuda:0 (Tesla V100-SXM2-16GB) has compute capability 7.0, without bf16 (needs ≥ 8.0): set device.torch.dtype fp32", key: KeyDtype},
		{name: "auto_on_v100", python: func(t *testing.T) string { return abs(t, probeV100) }, device: "cuda", dtype: "auto",
			want: "device.torch.dtype: auto means bf16 on CUDA, but cuda:0 (Tesla V100-SXM2-16GB)", key: KeyDtype},
		{name: "bf16_on_a100", python: func(t *testing.T) string { return abs(t, probeV100) }, device: "cuda:1", dtype: "bf16"},
		{name: "fp32_on_v100", python: func(t *testing.T) string { return abs(t, probeV100) }, device: "cuda", dtype: "fp32"},
		{name: "no_compile", python: func(t *testing.T) string { return abs(t, probeCPU) }, device: "cpu", dtype: "fp32", compile: true,
			want: "device.torch.compile: true, but torch 1.13.1 on @ has no torch.compile (torch ≥ 2.0)", key: KeyCompile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			py := tc.python(t)
			f, err := Probe(context.Background(), py)
			require.NoError(t, err)
			err = Options{Python: py, Device: tc.device, Dtype: tc.dtype, Compile: tc.compile}.Check(f)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), strings.ReplaceAll(tc.want, "@", f.Executable))
			assert.NotContains(t, err.Error(), "\n", "one line")
			var ke *KeyError
			require.ErrorAs(t, err, &ke)
			assert.Equal(t, tc.key, ke.Key)
		})
	}
}

// An interpreter that cannot run the probe: the error names
// device.torch.python and carries its last stderr line.
func TestProbeFailures(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"exit", "echo 'Traceback (most recent call last):' >&2\necho \"ModuleNotFoundError: No module named 'gr00t_torchrunner.probe'\" >&2\nexit 1",
			"failed (exit status 1): ModuleNotFoundError: No module named 'gr00t_torchrunner.probe'"},
		{"garbage", "echo 'hello'", `no JSON line in its output "hello\n"`},
		{"bad_json", "echo '{\"python\": 3'", "unreadable answer"},
		{"no_version", "echo '{}'", "has no python version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			py := fakePython(t, tc.body)
			_, err := Probe(context.Background(), py)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "device.torch.python: "+py+" -m gr00t_torchrunner.probe")
			assert.Contains(t, err.Error(), tc.want)
			var ke *KeyError
			require.ErrorAs(t, err, &ke)
			assert.Equal(t, KeyPython, ke.Key)
		})
	}
	t.Run("hang", func(t *testing.T) {
		py := fakePython(t, "exec sleep 30")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		_, err := Probe(ctx, py)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "did not answer within")
		assert.Less(t, time.Since(t0), 10*time.Second)
	})
}

func TestTorchVersion(t *testing.T) {
	for _, tc := range []struct {
		v      string
		ma, mi int
		ok     bool
	}{
		{"1.13.1", 1, 13, true}, {"1.13.0a0+git1234", 1, 13, true}, {"2.11.0+cu130", 2, 11, true},
		{"2.5.0.dev20240901", 2, 5, true}, {"2", 0, 0, false}, {"x.y", 0, 0, false},
	} {
		ma, mi, ok := torchVersion(tc.v)
		assert.Equal(t, []any{tc.ma, tc.mi, tc.ok}, []any{ma, mi, ok}, tc.v)
	}
	require.NoError(t, Check(Facts{Executable: "/p", Torch: "1.13.0a0"}, "cpu", "auto"), "Debian's 1.13.1 reports 1.13.0a0")
}

func TestParseDevice(t *testing.T) {
	for in, want := range map[string][2]any{"cpu": {"cpu", -1}, "cuda": {"cuda", -1}, "cuda:0": {"cuda", 0}, "cuda:12": {"cuda", 12}} {
		k, i, err := ParseDevice(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, [2]any{k, i}, in)
	}
	for _, bad := range []string{"", "gpu", "cuda:", "cuda:-1", "cuda:01", "cuda:x", "CPU", "cuda:0:1"} {
		_, _, err := ParseDevice(bad)
		assert.Error(t, err, bad)
	}
}

func TestCommandAndEnv(t *testing.T) {
	argv, env := Options{Python: "/usr/bin/python3", Device: "cuda:1", Dtype: "bf16", Compile: true, CUDAGraphs: true}.Command("/c/tr",
		[]string{"HOME=/root", "PYTHONPATH=/opt/site", "PYTHONUNBUFFERED=0"})
	assert.Equal(t, []string{"/usr/bin/python3", "-B", "-m", "gr00t_torchrunner", "--device", "cuda:1", "--dtype", "bf16", "--compile", "--cuda-graphs", "on"}, argv)
	assert.Equal(t, []string{"HOME=/root", "PYTHONPATH=/c/tr:/opt/site", "PYTHONUNBUFFERED=1", "PYTHONSAFEPATH=1"}, env)
	argv, env = Options{}.Command("/c/tr", []string{})
	assert.Equal(t, []string{"python3", "-B", "-m", "gr00t_torchrunner", "--device", "cuda", "--dtype", "auto", "--cuda-graphs", "off"}, argv)
	assert.Equal(t, []string{"PYTHONPATH=/c/tr", "PYTHONUNBUFFERED=1", "PYTHONSAFEPATH=1"}, env)
}

// forget drops this process's memory of extractions (as a new process).
func forget() {
	extractMu.Lock()
	clear(extractDone)
	extractMu.Unlock()
}

// checkTree requires dir/gr00t_torchrunner to hold exactly the embedded
// files.
func checkTree(t *testing.T, dir string) {
	t.Helper()
	n := 0
	require.NoError(t, walkFiles(func(name string, data []byte) error {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, string(data), string(got), name)
		n++
		return nil
	}))
	require.NotZero(t, n)
	assert.FileExists(t, filepath.Join(dir, Package, "__init__.py"))
}

func TestExtract(t *testing.T) {
	base := t.TempDir()
	dir, err := ExtractIn(base)
	require.NoError(t, err)
	sum, err := Sum()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(base, "torchrunner-"+sum[:12]), dir)
	checkTree(t, dir)
	again, err := ExtractIn(base)
	require.NoError(t, err)
	assert.Equal(t, dir, again)

	// A damaged copy (a later process finds it) is replaced.
	forget()
	require.NoError(t, os.WriteFile(filepath.Join(dir, Package, "__init__.py"), []byte("damaged"), 0o644))
	again, err = ExtractIn(base)
	require.NoError(t, err)
	assert.Equal(t, dir, again)
	checkTree(t, dir)

	// No temporary or stale directories are left behind.
	ents, err := os.ReadDir(base)
	require.NoError(t, err)
	require.Len(t, ents, 1, "%v", ents)

	// XDG_CACHE_HOME is the user cache; an unusable one falls back to
	// the temporary directory.
	forget()
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	dir, err = Extract()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(xdg, "gr00tgw", "torchrunner-"+sum[:12]), dir)
	forget()
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	t.Setenv("XDG_CACHE_HOME", blocker) // a file: gr00tgw/ cannot be made in it
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir, err = Extract()
	require.NoError(t, err)
	private := filepath.Join(tmp, fmt.Sprintf("gr00tgw-%d", os.Getuid()))
	assert.Equal(t, filepath.Join(private, "torchrunner-"+sum[:12]), dir)
	checkTree(t, dir)
	st, err := os.Stat(private)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "this user's own directory under the shared TMPDIR")
	forget()

	// A directory others may write to is refused, not used.
	require.NoError(t, os.Chmod(private, 0o777))
	_, err = Extract()
	assert.ErrorContains(t, err, "is not a private directory of this user")
	forget()
}

// Processes racing to extract: every one ends with the same intact copy
// (install writes a private temporary directory and renames it).
func TestExtractRace(t *testing.T) {
	base := t.TempDir()
	sum, err := Sum()
	require.NoError(t, err)
	dir := filepath.Join(base, "torchrunner-"+sum[:12])
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = install(base, dir); errs[i] == nil {
				ok, err := intact(dir)
				if err == nil && !ok {
					err = errors.New("not intact after install")
				}
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	checkTree(t, dir)
	ents, err := os.ReadDir(base)
	require.NoError(t, err)
	require.Len(t, ents, 1, "temporary directories left: %v", ents)
}

func TestEmbeddedPackage(t *testing.T) {
	var names []string
	require.NoError(t, fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	}))
	assert.Contains(t, names, "gr00t_torchrunner/__init__.py")
	for _, n := range names {
		assert.True(t, strings.HasSuffix(n, ".py"), n)
	}
}

// debianPython is Debian's interpreter, which python3-torch installs into
// (python3 on PATH may be another one, e.g. pyenv's, without torch).
const debianPython = "/usr/bin/python3"

// requireTorch skips unless /usr/bin/python3 imports torch and numpy and
// the embedded package has module.
func requireTorch(t *testing.T, module string) {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("SKIPPED: %s cannot import torch and numpy (%v): apt-get install python3-torch python3-numpy (make torch-deps)", debianPython, err)
	}
	if !HasModule(module) {
		t.Skipf("SKIPPED: the embedded package has no %s/%s.py yet", Package, module)
	}
}

// The real probe on Debian's torch (CPU): facts as documented, and Check
// refuses cuda there.
func TestProbeRealTorch(t *testing.T) {
	requireTorch(t, "probe")
	f, err := Probe(context.Background(), debianPython)
	require.NoError(t, err)
	t.Logf("probe: %+v", f)
	assert.NotEmpty(t, f.PythonVersion)
	assert.NotEmpty(t, f.Torch)
	assert.NotEmpty(t, f.NumPy)
	require.NoError(t, Check(f, "cpu", "auto"))
	if !f.CUDAAvailable {
		err := Check(f, "cuda", "auto")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "device.torch.device: cuda asked, but torch "+f.Torch+" on "+debianPython+" sees no CUDA device")
	}
}
