package torchrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ProbeTimeout bounds one Probe: importing torch (and initialising CUDA to
// count the devices) can take several seconds on a cold host.
const ProbeTimeout = 60 * time.Second

// Config keys Check and Probe name in their errors.
const (
	KeyPython  = "device.torch.python"
	KeyDevice  = "device.torch.device"
	KeyDtype   = "device.torch.dtype"
	KeyCompile = "device.torch.compile"
)

// MinTorch is the oldest torch the runner supports (Debian 12's
// python3-torch); MinPython the oldest Python.
var (
	MinTorch  = [2]int{1, 13}
	MinPython = [2]int{3, 9}
)

// KeyError is a problem of one configuration key found by Probe or Check:
// "device.torch.python: "python3" not found on PATH".
type KeyError struct {
	Key string // the config key at fault, e.g. KeyPython
	Err error
}

// Error is "<key>: <cause>".
func (e *KeyError) Error() string { return e.Key + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *KeyError) Unwrap() error { return e.Err }

func keyErr(key, format string, args ...any) error {
	return &KeyError{Key: key, Err: fmt.Errorf(format, args...)}
}

// GPU is one CUDA device as the probe saw it.
type GPU struct {
	Index      int    `json:"index"`
	Name       string `json:"name"`
	TotalMiB   int    `json:"total_mib"`
	Capability [2]int `json:"capability"`
	BF16       bool   `json:"bf16"`
}

// Facts is what `python -B -m gr00t_torchrunner.probe` reported about an
// interpreter, plus which interpreter that was. A string the probe
// reported as null is "".
type Facts struct {
	// Python is the interpreter asked for (config device.torch.python);
	// Executable its resolved path, "" when it was not found (NotFound
	// says why).
	Python     string `json:"python_asked"`
	Executable string `json:"executable"`
	NotFound   string `json:"not_found,omitempty"`

	PythonVersion string `json:"python"`
	Torch         string `json:"torch"`
	TorchError    string `json:"torch_error"`
	NumPy         string `json:"numpy"`
	CUDAAvailable bool   `json:"cuda_available"`
	CUDAVersion   string `json:"cuda_version"`
	DeviceCount   int    `json:"device_count"`
	Devices       []GPU  `json:"devices"`
	MKLDNN        bool   `json:"mkldnn"`
	CPUBF16       bool   `json:"cpu_bf16"`
	SDPA          bool   `json:"sdpa"`
	Compile       bool   `json:"compile"`
}

// DeviceNames lists the CUDA devices as "cuda:0 NVIDIA H100 80GB HBM3"
// (none: nil).
func (f Facts) DeviceNames() []string {
	var out []string
	for _, d := range f.Devices {
		out = append(out, fmt.Sprintf("cuda:%d %s", d.Index, d.Name))
	}
	return out
}

// Probe runs `<python> -B -m gr00t_torchrunner.probe` with the embedded
// package on PYTHONPATH (Extract) and parses the one JSON line it prints,
// within ProbeTimeout (or ctx's deadline, if sooner). It loads no model.
//
// An interpreter that is not found is not an error here: Facts.Executable
// is "" and Check reports it. An interpreter that fails to run the probe
// (exits non-zero, prints no JSON, times out) is a *KeyError on
// device.torch.python with the last line of its stderr.
func Probe(ctx context.Context, python string) (Facts, error) {
	f := Facts{Python: python}
	if python == "" {
		f.Python = "python3"
	}
	exe, err := exec.LookPath(f.Python)
	if err != nil {
		f.NotFound = notFound(f.Python, err)
		return f, nil
	}
	f.Executable = exe
	dir, err := Extract()
	if err != nil {
		return f, err
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-B", "-m", Package+".probe")
	cmd.Env = Env(dir, nil)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	t0 := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		return f, keyErr(KeyPython, "%s -m %s.probe did not answer within %v%s", exe, Package, time.Since(t0).Round(time.Second), lastLine(stderr.Bytes()))
	}
	if err != nil {
		return f, keyErr(KeyPython, "%s -m %s.probe failed (%v)%s", exe, Package, err, lastLine(stderr.Bytes()))
	}
	if err := parseProbe(stdout.Bytes(), &f); err != nil {
		return f, keyErr(KeyPython, "%s -m %s.probe: %w%s", exe, Package, err, lastLine(stderr.Bytes()))
	}
	return f, nil
}

// notFound words exec.LookPath's failure for python.
func notFound(python string, err error) string {
	if !strings.Contains(python, "/") {
		return strconv.Quote(python) + " not found on PATH"
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = ee.Err
	}
	return fmt.Sprintf("%s not found (%v)", python, err)
}

// parseProbe reads the last line of out that is a JSON object into f
// (anything the probe or torch printed before it is ignored).
func parseProbe(out []byte, f *Facts) error {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "{") {
			continue
		}
		exe, py, nf := f.Executable, f.Python, f.NotFound
		if err := json.Unmarshal([]byte(l), f); err != nil {
			return fmt.Errorf("unreadable answer %.200q: %w", l, err)
		}
		f.Executable, f.Python, f.NotFound = exe, py, nf
		if f.PythonVersion == "" {
			return fmt.Errorf("answer %.200q has no python version", l)
		}
		return nil
	}
	return fmt.Errorf("no JSON line in its output %.200q", out)
}

// lastLine is "; last stderr line: …" for b's last non-empty line, or "".
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if l == "" {
		return ""
	}
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return ": " + l
}

// torchVersion reads major.minor of a version ("1.13.0a0+git…",
// "2.11.0+cu130", Python's "3.11.2"); ok is false when it does not start
// with two numbers.
func torchVersion(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	lead := func(s string) (int, bool) {
		n := 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		x, err := strconv.Atoi(s[:n])
		return x, err == nil
	}
	var ok1, ok2 bool
	major, ok1 = lead(parts[0])
	minor, ok2 = lead(parts[1])
	return major, minor, ok1 && ok2
}

// Check reports, as one line naming the config key at fault (a
// *KeyError), why the torch runner cannot run on the interpreter f
// describes with device (cpu, cuda, cuda:N) and dtype (auto, bf16, fp32):
//
//   - device.torch.python: the interpreter was not found, is older than
//     MinPython, has no torch (with the import error) or a torch older
//     than MinTorch;
//   - device.torch.device: cuda or cuda:N asked, but torch sees no CUDA
//     device, or fewer than N+1;
//   - device.torch.dtype: bf16 (or auto, which means bf16 on CUDA) on a
//     CUDA device without bf16 (compute capability below 8.0). For cuda,
//     every device the probe saw is checked (the runners spread over
//     them).
//
// nil means the runner can start (its own errors, from loading the
// checkpoint on, are the runner's start errors).
func Check(f Facts, device, dtype string) error {
	if f.Executable == "" {
		why := f.NotFound
		if why == "" {
			why = strconv.Quote(f.Python) + " not found"
		}
		return keyErr(KeyPython, "%s", why)
	}
	if ma, mi, ok := torchVersion(f.PythonVersion); ok && (ma < MinPython[0] || ma == MinPython[0] && mi < MinPython[1]) {
		return keyErr(KeyPython, "%s is Python %s, older than %d.%d", f.Executable, f.PythonVersion, MinPython[0], MinPython[1])
	}
	if f.Torch == "" {
		why := f.TorchError
		if why == "" {
			why = "import torch failed"
		}
		return keyErr(KeyPython, "%s has no torch (%s): install python3-torch (Debian) or torch ≥ %d.%d", f.Executable, why, MinTorch[0], MinTorch[1])
	}
	if ma, mi, ok := torchVersion(f.Torch); ok && (ma < MinTorch[0] || ma == MinTorch[0] && mi < MinTorch[1]) {
		return keyErr(KeyPython, "%s has torch %s, older than %d.%d: install python3-torch (Debian) or torch ≥ %d.%d", f.Executable, f.Torch, MinTorch[0], MinTorch[1], MinTorch[0], MinTorch[1])
	}
	kind, index, err := ParseDevice(device)
	if err != nil {
		return &KeyError{Key: KeyDevice, Err: err}
	}
	switch dtype {
	case "auto", "bf16", "fp32":
	default:
		return keyErr(KeyDtype, "%q is not one of auto, bf16, fp32", dtype)
	}
	if kind == "cpu" {
		return nil
	}
	if !f.CUDAAvailable || f.DeviceCount == 0 {
		build := ""
		if f.CUDAVersion == "" {
			build = " (a CPU-only torch build)"
		}
		return keyErr(KeyDevice, "%s asked, but torch %s on %s sees no CUDA device%s", device, f.Torch, f.Executable, build)
	}
	use := f.Devices
	if index >= 0 {
		if index >= f.DeviceCount {
			return keyErr(KeyDevice, "%s asked, but torch %s on %s sees %d CUDA device(s): %s", device, f.Torch, f.Executable, f.DeviceCount, strings.Join(f.DeviceNames(), ", "))
		}
		use = nil
		for _, d := range f.Devices {
			if d.Index == index {
				use = append(use, d)
			}
		}
	}
	if dtype == "fp32" {
		return nil
	}
	for _, d := range use {
		bf16 := d.BF16
		if d.Capability[0] > 0 {
			bf16 = d.Capability[0] >= 8
		}
		if bf16 {
			continue
		}
		what := "bf16 asked"
		if dtype == "auto" {
			what = "auto means bf16 on CUDA"
		}
		return keyErr(KeyDtype, "%s, but cuda:%d (%s) has compute capability %d.%d, without bf16 (needs ≥ 8.0): set %s fp32", what, d.Index, d.Name, d.Capability[0], d.Capability[1], KeyDtype)
	}
	return nil
}

// Check is the package's Check for o's device and dtype, and refuses
// Compile on a torch without torch.compile (before 2.0) naming
// device.torch.compile.
func (o Options) Check(f Facts) error {
	o = o.withDefaults()
	if err := Check(f, o.Device, o.Dtype); err != nil {
		return err
	}
	if o.Compile && !f.Compile {
		return keyErr(KeyCompile, "true, but torch %s on %s has no torch.compile (torch ≥ 2.0)", f.Torch, f.Executable)
	}
	return nil
}
