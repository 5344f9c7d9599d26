package benchmodel

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/safetensors"
)

// The Python twin of WriteCheckpoint, device/torchrunner/tools/random_checkpoint.py,
// generates the real-size checkpoint on GPU hosts that have no Go
// (scripts/gpu-check.sh). These tests hold it to the Go writer: the same
// plan (names, shapes, order, shard split) and config at real size, and at
// tiny size the same files with byte-identical safetensors headers and
// index. It needs a python3 with numpy (Debian: python3-numpy); the test
// skips, saying so, without one.

const pyCheckpointTool = "../../device/torchrunner/tools/random_checkpoint.py"

// numpyPython returns a python3 that imports numpy (/usr/bin/python3
// first: Debian's, where python3-numpy and python3-torch live), or skips.
func numpyPython(t *testing.T) string {
	t.Helper()
	cands := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	for _, p := range cands {
		if exec.Command(p, "-c", "import numpy").Run() == nil {
			return p
		}
	}
	t.Skipf("random_checkpoint.py: no python3 with numpy among %v (Debian: apt-get install python3-numpy)", cands)
	return ""
}

// pyDescription is random_checkpoint.py --describe's output.
type pyDescription struct {
	Config  map[string]any `json:"config"`
	Tensors []struct {
		Name  string `json:"name"`
		Shape []int  `json:"shape"`
		DType string `json:"dtype"`
	} `json:"tensors"`
	TotalSize int64             `json:"total_size"`
	WeightMap map[string]string `json:"weight_map"`
}

// TestPythonCheckpointPlan: at real size the Python writer plans what
// WriteCheckpoint writes — model.Plan(DefaultConfig()) less lm_head, in
// order, 6,288,032,000 bytes of BF16 — with realConfigJSON's config.json
// (as JSON values), and splits the shards where the Go writer does.
func TestPythonCheckpointPlan(t *testing.T) {
	py := numpyPython(t)
	out, err := exec.Command(py, "-B", pyCheckpointTool, "--describe", "--tiny-dir", tinyDir).Output()
	require.NoError(t, err, "random_checkpoint.py --describe")
	var d pyDescription
	require.NoError(t, json.Unmarshal(out, &d))

	type spec struct {
		Name  string
		Shape []int
	}
	var want, got []spec
	for _, s := range model.Plan(model.DefaultConfig()) {
		if s.Name != model.LMHeadName {
			want = append(want, spec{s.Name, s.Shape})
		}
	}
	for _, s := range d.Tensors {
		got = append(got, spec{s.Name, s.Shape})
		require.Equal(t, "BF16", s.DType, s.Name)
	}
	require.Equal(t, want, got, "plan: go (expected) vs python (actual)")
	require.Equal(t, int64(6_288_032_000), d.TotalSize)

	cfgJSON, err := realConfigJSON(filepath.Join(tinyDir, model.ConfigFile))
	require.NoError(t, err)
	var wantCfg map[string]any
	require.NoError(t, json.Unmarshal(cfgJSON, &wantCfg))
	require.Equal(t, wantCfg, d.Config, "config.json: go (expected) vs python (actual)")
	cfg, err := model.ParseConfig(mustJSON(t, d.Config))
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())

	// The shard split: the tensor that starts the second shard is the one
	// after the first total/2 bytes.
	var cur int64
	first := ""
	for _, s := range want {
		n := int64(2)
		for _, x := range s.Shape {
			n *= int64(x)
		}
		if cur >= d.TotalSize/CheckpointShards && first == "" {
			first = s.Name
		}
		cur += n
	}
	require.Equal(t, "model-00002-of-00002.safetensors", d.WeightMap[first], first)
}

// TestPythonCheckpointTiny: on the tiny checkpoint's plan the Python writer
// writes the Go writer's files — the same names, byte-identical shard
// headers, shard sizes and index, the same side files and config.json —
// and a checkpoint core/safetensors opens with finite BF16 values; then
// the writer's own unittest runs.
func TestPythonCheckpointTiny(t *testing.T) {
	py := numpyPython(t)
	cfg, err := model.LoadConfig(tinyDir)
	require.NoError(t, err)
	cfgJSON, err := os.ReadFile(filepath.Join(tinyDir, model.ConfigFile))
	require.NoError(t, err)
	goDir, pyDir := filepath.Join(t.TempDir(), "go"), filepath.Join(t.TempDir(), "py")
	require.NoError(t, writeCheckpoint(goDir, tinyDir, model.Plan(cfg), cfgJSON))
	out, err := exec.Command(py, "-B", pyCheckpointTool, "--scale", "tiny", "--rng", "numpy",
		"--tiny-dir", tinyDir, "--out", pyDir).CombinedOutput()
	require.NoError(t, err, "random_checkpoint.py:\n%s", out)

	goFiles, pyFiles := dirNames(t, goDir), dirNames(t, pyDir)
	// The Python writer adds the tiny backbone_config.json (a tiny checkpoint
	// needs it to load; the Go test copies it by hand).
	require.Equal(t, goFiles, without(pyFiles, model.BackboneConfigFile))
	for _, f := range goFiles {
		a, b := readFile(t, filepath.Join(goDir, f)), readFile(t, filepath.Join(pyDir, f))
		switch filepath.Ext(f) {
		case ".safetensors":
			require.Equal(t, len(a), len(b), f)
			ha, hb := stHeader(t, a), stHeader(t, b)
			require.Equal(t, string(ha), string(hb), "%s: header", f)
		case ".json":
			if f == model.ConfigFile { // Go writes 1 for 1.0: compare values
				var x, y any
				require.NoError(t, json.Unmarshal(a, &x))
				require.NoError(t, json.Unmarshal(b, &y))
				require.Equal(t, x, y, f)
			} else {
				require.Equal(t, string(a), string(b), f)
			}
		}
	}
	st, err := safetensors.Open(pyDir)
	require.NoError(t, err)
	for _, n := range st.Names() {
		vals, err := st.Float32(n)
		require.NoError(t, err, n)
		for i, v := range vals {
			if v != v || v > 4 || v < -4 {
				t.Fatalf("%s[%d] = %v: not a finite init value", n, i, v)
			}
		}
	}

	ut := exec.Command(py, "-B", "-m", "unittest", "discover", "-s", filepath.Dir(pyCheckpointTool), "-p", "test_*.py")
	out, err = ut.CombinedOutput()
	require.NoError(t, err, "python unittest:\n%s", out)
	t.Logf("%s", bytes.TrimSpace(out))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func without(names []string, drop string) []string {
	var out []string
	for _, n := range names {
		if n != drop {
			out = append(out, n)
		}
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// stHeader is a safetensors file's JSON header, padding included.
func stHeader(t *testing.T, b []byte) []byte {
	t.Helper()
	require.GreaterOrEqual(t, len(b), 8)
	n := binary.LittleEndian.Uint64(b)
	require.LessOrEqual(t, n, uint64(len(b)-8))
	h := b[8 : 8+n]
	var v map[string]any
	require.NoError(t, json.NewDecoder(io.LimitReader(bytes.NewReader(h), int64(n))).Decode(&v))
	return h
}
