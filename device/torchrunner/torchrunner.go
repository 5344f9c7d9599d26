// Package torchrunner carries the PyTorch runner — the Python package
// gr00t_torchrunner, embedded in the gr00tgw binary — and the Go side of
// starting it: Extract writes the package to a cache directory for
// PYTHONPATH, Probe asks an interpreter what its torch offers (without
// loading a model), Check turns what it found into one clear line naming
// the configuration key at fault, and Options.Command builds the argv and
// environment runner.Open starts each runner with (config
// device.torch.*; device/RUNNER.md is the protocol it speaks).
//
// The Python package is embedded so that a static gr00tgw binary alone
// brings up the torch backend on a GPU host that has Python and torch but
// no Go toolchain and no checkout.
//
// # Notes
//
// Only gr00t_torchrunner/*.py is embedded (not subdirectories, not
// tests/): a sub-package needs its own pattern in the go:embed line.
package torchrunner

import (
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Package is the name of the Python package (python -m Package).
const Package = "gr00t_torchrunner"

//go:embed gr00t_torchrunner/*.py
var pkgFS embed.FS

// Files returns the embedded Python package, rooted so that its files are
// at gr00t_torchrunner/<name>.py. It is read-only and safe for concurrent
// use.
func Files() fs.FS { return pkgFS }

var (
	sumOnce sync.Once
	sumHex  string
	sumErr  error
)

// Sum is the hex sha256 of the embedded package (every file's name, size
// and content, in name order): the cache directory's name carries its
// first 12 digits, so that two gr00tgw builds with different runners never
// share one.
func Sum() (string, error) {
	sumOnce.Do(func() {
		h := sha256.New()
		err := walkFiles(func(name string, data []byte) error {
			var n [8]byte
			binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
			h.Write([]byte(name))
			h.Write([]byte{0})
			h.Write(n[:])
			h.Write(data)
			return nil
		})
		sumHex, sumErr = hex.EncodeToString(h.Sum(nil)), err
	})
	return sumHex, sumErr
}

// walkFiles calls fn for every embedded file in name order with its path
// relative to the package's parent (gr00t_torchrunner/x.py).
func walkFiles(fn func(name string, data []byte) error) error {
	return fs.WalkDir(pkgFS, Package, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := pkgFS.ReadFile(p)
		if err != nil {
			return err
		}
		return fn(p, data)
	})
}

var (
	extractMu   sync.Mutex
	extractDone = map[string]string{} // base → PYTHONPATH dir, extracted by this process
)

// Extract writes the embedded package once per content hash under the
// user cache directory ($XDG_CACHE_HOME, else os.UserCacheDir()) as
// gr00tgw/torchrunner-<12 hex>/gr00t_torchrunner/, or under os.TempDir()
// when the cache directory cannot be created, and returns the directory to
// put on PYTHONPATH (the one holding gr00t_torchrunner/). See ExtractIn.
func Extract() (string, error) {
	var tried []string
	if base, err := os.UserCacheDir(); err == nil {
		dir, err := ExtractIn(filepath.Join(base, "gr00tgw"))
		if err == nil {
			return dir, nil
		}
		tried = append(tried, err.Error())
	} else {
		tried = append(tried, err.Error())
	}
	// The shared temporary directory: a directory of this user's own, 0700,
	// so that another user cannot plant files (sitecustomize.py) there.
	tmp := filepath.Join(os.TempDir(), fmt.Sprintf("gr00tgw-%d", os.Getuid()))
	if err := privateDir(tmp); err != nil {
		return "", fmt.Errorf("torchrunner: %w (and the user cache: %s)", err, strings.Join(tried, "; "))
	}
	dir, err := ExtractIn(tmp)
	if err != nil {
		return "", fmt.Errorf("%w (and the user cache: %s)", err, strings.Join(tried, "; "))
	}
	return dir, nil
}

// ExtractIn writes the embedded package under base as
// torchrunner-<12 hex>/gr00t_torchrunner/ and returns base's
// torchrunner-<12 hex> directory (for PYTHONPATH). A directory already
// there with the same content is used as it is; one whose files differ
// (edited, truncated) is moved aside and written again.
//
// It is safe for concurrent use, also by several processes: the files are
// written to a fresh temporary directory next to the target, which is then
// renamed into place in one step (a process that loses the race uses the
// winner's copy). Within one process a base is checked once.
func ExtractIn(base string) (string, error) {
	extractMu.Lock()
	defer extractMu.Unlock()
	if dir, ok := extractDone[base]; ok {
		return dir, nil
	}
	sum, err := Sum()
	if err != nil {
		return "", fmt.Errorf("torchrunner: embedded package: %w", err)
	}
	dir := filepath.Join(base, "torchrunner-"+sum[:12])
	for attempt := 0; ; attempt++ {
		ok, err := intact(dir)
		if err != nil {
			return "", err
		}
		if ok {
			extractDone[base] = dir
			return dir, nil
		}
		if attempt == 2 {
			return "", fmt.Errorf("torchrunner: extract[%s]: its content keeps differing from the embedded package", dir)
		}
		if err := install(base, dir); err != nil {
			return "", err
		}
	}
}

// intact reports whether dir holds exactly the embedded files' content
// (false when it does not exist). A copy that differs is moved aside (and
// removed) so that install can put a good one in its place.
// privateDir makes dir (0700) or checks that it is this user's and closed to
// others.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() || st.Mode().Perm()&0o077 != 0 || !ownedByMe(st) {
		return fmt.Errorf("%s is not a private directory of this user (mode %v): remove it or set XDG_CACHE_HOME", dir, st.Mode())
	}
	return nil
}

func intact(dir string) (bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	good := true
	err := walkFiles(func(name string, data []byte) error {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || string(got) != string(data) {
			good = false
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("torchrunner: extract[%s]: %w", dir, err)
	}
	if good {
		return true, nil
	}
	stale := fmt.Sprintf("%s.stale-%d", dir, os.Getpid())
	if err := os.Rename(dir, stale); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("torchrunner: extract[%s]: moving a damaged copy aside: %w", dir, err)
	}
	_ = os.RemoveAll(stale)
	return false, nil
}

// install writes the package into a temporary directory under base and
// renames it to dir; when another process renamed its copy first, that
// one stays (the caller checks it).
func install(base, dir string) error {
	if err := os.MkdirAll(base, 0o755); err != nil {
		return fmt.Errorf("torchrunner: extract[%s]: %w", base, err)
	}
	tmp, err := os.MkdirTemp(base, ".torchrunner-tmp-")
	if err != nil {
		return fmt.Errorf("torchrunner: extract[%s]: %w", base, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("torchrunner: extract[%s]: %w", tmp, err)
	}
	err = walkFiles(func(name string, data []byte) error {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("torchrunner: extract[%s]: %w", tmp, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return nil // another process won the race
		}
		return fmt.Errorf("torchrunner: extract[%s]: %w", dir, err)
	}
	return nil
}

// Options configure the torch runner: config device.torch.*. The zero
// value means the configuration defaults except CUDAGraphs (off when
// false; config's default is on).
type Options struct {
	// Python is the interpreter: a name looked up on PATH or a path
	// ("": python3).
	Python string
	// Device is cpu, cuda or cuda:N ("": cuda). With cuda and several
	// runners, runner i uses cuda:(i mod device count) (the runner picks).
	Device string
	// Dtype is auto (bf16 on CUDA, fp32 on CPU), bf16 or fp32 ("": auto).
	Dtype string
	// Compile asks for torch.compile (torch ≥ 2.0).
	Compile bool
	// CUDAGraphs captures the denoising loop in CUDA graphs (CUDA only).
	CUDAGraphs bool
}

func (o Options) withDefaults() Options {
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.Device == "" {
		o.Device = "cuda"
	}
	if o.Dtype == "" {
		o.Dtype = "auto"
	}
	return o
}

// Command returns the argv and the environment that start one torch
// runner from the package extracted at dir (Extract's result): argv is
// `<python> -B -m gr00t_torchrunner --device D --dtype T [--compile]
// --cuda-graphs on|off` (runner.Open appends --fd 3 --backend … --index
// I), env is environ (nil: os.Environ()) with dir put first on
// PYTHONPATH and PYTHONUNBUFFERED=1 (so a crashing runner's last lines
// reach the gateway's stderr tail). The slices are new; environ is not
// modified.
func (o Options) Command(dir string, environ []string) (argv, env []string) {
	o = o.withDefaults()
	argv = []string{o.Python, "-B", "-m", Package, "--device", o.Device, "--dtype", o.Dtype}
	if o.Compile {
		argv = append(argv, "--compile")
	}
	graphs := "off"
	if o.CUDAGraphs {
		graphs = "on"
	}
	argv = append(argv, "--cuda-graphs", graphs)
	return argv, Env(dir, environ)
}

// Env returns environ (nil: os.Environ()) with dir first on PYTHONPATH
// (any PYTHONPATH already set follows it) and PYTHONUNBUFFERED=1, as a new
// slice.
func Env(dir string, environ []string) []string {
	if environ == nil {
		environ = os.Environ()
	}
	pp := dir
	env := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		switch {
		case strings.HasPrefix(kv, "PYTHONPATH="):
			if old := strings.TrimPrefix(kv, "PYTHONPATH="); old != "" {
				pp = dir + string(os.PathListSeparator) + old
			}
		case strings.HasPrefix(kv, "PYTHONUNBUFFERED="), strings.HasPrefix(kv, "PYTHONSAFEPATH="):
		default:
			env = append(env, kv)
		}
	}
	// PYTHONSAFEPATH (Python ≥ 3.11; ignored before): `python -m` would
	// otherwise put the gateway's working directory first on sys.path, and a
	// gr00t_torchrunner/ or torch/ there would shadow the real ones.
	return append(env, "PYTHONPATH="+pp, "PYTHONUNBUFFERED=1", "PYTHONSAFEPATH=1")
}

// ParseDevice splits a device name: "cpu" → ("cpu", -1), "cuda" →
// ("cuda", -1), "cuda:N" → ("cuda", N). Anything else is an error naming
// it.
func ParseDevice(s string) (kind string, index int, err error) {
	switch s {
	case "cpu", "cuda":
		return s, -1, nil
	}
	if n, ok := strings.CutPrefix(s, "cuda:"); ok {
		i, err := strconv.Atoi(n)
		if err == nil && i >= 0 && strconv.Itoa(i) == n {
			return "cuda", i, nil
		}
	}
	return "", 0, fmt.Errorf("device %q is not cpu, cuda or cuda:N", s)
}

// pkgFile is the embedded path of one module of the package.
func pkgFile(name string) string { return path.Join(Package, name) }

// HasModule reports whether the embedded package has module name
// ("probe" for gr00t_torchrunner/probe.py).
func HasModule(name string) bool {
	_, err := fs.Stat(pkgFS, pkgFile(name+".py"))
	return err == nil
}
