package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gr00tgw.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func parsedFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	RegisterFlags(fs)
	fs.String("config", "", "")
	require.NoError(t, fs.Parse(args))
	return fs
}

func TestDefaultsValidate(t *testing.T) {
	c := Default()
	require.NoError(t, c.Validate())
	l, err := Load(Sources{Environ: []string{}})
	require.NoError(t, err)
	assert.Equal(t, Default(), l.Config)
	for _, k := range Keys() {
		assert.Equal(t, LayerDefault, l.Provenance[k.Name].Layer, k.Name)
	}
}

func TestEveryKeyHasFlagAndEnv(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys() {
		require.NotEmpty(t, k.Flag, k.Name)
		require.False(t, seen[k.Flag], "duplicate flag %s", k.Flag)
		seen[k.Flag] = true
		require.Equal(t, EnvPrefix+strings.ToUpper(strings.ReplaceAll(k.Name, ".", "_")), k.Env[len(k.Env)-1])
	}
	k, ok := Lookup("warmup_pcc_min")
	require.True(t, ok)
	assert.Equal(t, []string{"GR00T_WARMUP_PCC_MIN", "GR00TGW_WARMUP_PCC_MIN"}, k.Env)
}

func TestLayering(t *testing.T) {
	file := writeFile(t, `
addr: 0.0.0.0:9000
threads: 4
warmup_runs: 3
request_timeout: 5s
log:
  format: text
otel:
  traces:
    exporter: stdout
`)
	tests := []struct {
		name    string
		file    string
		env     []string
		args    []string
		check   func(t *testing.T, l *Loaded)
		wantErr string
	}{
		{
			name: "file over defaults",
			file: file,
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, "0.0.0.0:9000", l.Config.Addr)
				assert.Equal(t, 4, l.Config.Threads)
				assert.Equal(t, 5*time.Second, l.Config.RequestTimeout)
				assert.Equal(t, "text", l.Config.Log.Format)
				assert.Equal(t, "stdout", l.Config.OTel.Traces.Exporter)
				assert.Equal(t, Origin{LayerFile, file}, l.Provenance["log.format"])
				assert.Equal(t, Origin{LayerDefault, ""}, l.Provenance["log.level"])
			},
		},
		{
			name: "env over file, seed alias",
			file: file,
			env:  []string{"GR00T_WARMUP_RUNS=5", "GR00T_WEIGHTS_DIR=/w", "GR00TGW_LOG_LEVEL=debug"},
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, 5, l.Config.WarmupRuns)
				assert.Equal(t, "/w", l.Config.WeightsDir)
				assert.Equal(t, "debug", l.Config.Log.Level)
				assert.Equal(t, Origin{LayerEnv, "GR00T_WARMUP_RUNS"}, l.Provenance["warmup_runs"])
			},
		},
		{
			name: "canonical env beats alias",
			env:  []string{"GR00TGW_WARMUP_RUNS=2", "GR00T_WARMUP_RUNS=5"},
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, 2, l.Config.WarmupRuns)
				assert.Equal(t, Origin{LayerEnv, "GR00TGW_WARMUP_RUNS"}, l.Provenance["warmup_runs"])
			},
		},
		{
			name: "flag over env over file",
			file: file,
			env:  []string{"GR00TGW_THREADS=8", "GR00TGW_ADDR=127.0.0.1:1"},
			args: []string{"--threads=2", "--log-format=json", "--request-timeout=250ms"},
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, 2, l.Config.Threads)
				assert.Equal(t, "127.0.0.1:1", l.Config.Addr, "unchanged flag must not override env")
				assert.Equal(t, "json", l.Config.Log.Format)
				assert.Equal(t, 250*time.Millisecond, l.Config.RequestTimeout)
				assert.Equal(t, Origin{LayerFlag, "--threads"}, l.Provenance["threads"])
				assert.Equal(t, Origin{LayerEnv, "GR00TGW_ADDR"}, l.Provenance["addr"])
			},
		},
		{
			name:    "unknown file key",
			file:    writeFile(t, "adr: x\n"),
			wantErr: "key[adr]",
		},
		{
			name:    "bad env int names key and source",
			env:     []string{"GR00T_WARMUP_RUNS=five"},
			wantErr: "config: key[warmup_runs] (from env GR00T_WARMUP_RUNS): \"five\" is not an integer",
		},
		{
			name:    "pcc out of range",
			env:     []string{"GR00T_WARMUP_PCC_MIN=1.5"},
			wantErr: "config: key[warmup_pcc_min] (from env GR00T_WARMUP_PCC_MIN): 1.5 is outside [-1, 1]",
		},
		{
			name:    "duration without unit in file",
			file:    writeFile(t, "drain_timeout: 30\n"),
			wantErr: "key[drain_timeout]",
		},
		{
			name:    "float for int in file",
			file:    writeFile(t, "queue_depth: 1.5\n"),
			wantErr: "key[queue_depth]",
		},
		{
			name:    "bad exporter from flag",
			args:    []string{"--otel-traces-exporter=zipkin"},
			wantErr: "config: key[otel.traces.exporter] (from flag --otel-traces-exporter): \"zipkin\" is not one of none, stdout, otlp-grpc, otlp-http",
		},
		{
			name:    "bad addr",
			args:    []string{"--addr=nope"},
			wantErr: "key[addr]",
		},
		{
			name:    "bad log level",
			file:    writeFile(t, "log:\n  level: loud\n"),
			wantErr: "key[log.level]",
		},
		{
			name:    "negative queue depth",
			env:     []string{"GR00TGW_QUEUE_DEPTH=-1"},
			wantErr: "key[queue_depth]",
		},
		{
			name:    "bool env",
			env:     []string{"GR00TGW_METRICS_ENABLED=maybe"},
			wantErr: "key[metrics.enabled]",
		},
		{
			name:    "missing file",
			file:    filepath.Join(t.TempDir(), "absent.yaml"),
			wantErr: "absent.yaml",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{File: tc.file, Environ: tc.env}
			if src.Environ == nil {
				src.Environ = []string{}
			}
			src.Flags = parsedFlags(t, tc.args...)
			l, err := Load(src)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, l)
		})
	}
}

func TestPrintRedactsSecretsAndShowsProvenance(t *testing.T) {
	l, err := Load(Sources{Environ: []string{"GR00TGW_ADMIN_TOKEN=hunter2", "GR00T_TOKENIZER_DIR=/tok"}})
	require.NoError(t, err)
	var sb strings.Builder
	require.NoError(t, l.Print(&sb))
	out := sb.String()
	assert.NotContains(t, out, "hunter2")
	assert.Contains(t, out, `"<redacted>"`)
	assert.Regexp(t, `tokenizer_dir\s+= "/tok"\s+# env GR00T_TOKENIZER_DIR`, out)
	assert.Regexp(t, `addr\s+= "127.0.0.1:20000"\s+# default`, out)
	assert.Equal(t, len(Keys()), strings.Count(out, "\n"))
}

// The runner is Linux-only: device.isolation defaults to process on Linux
// and inproc elsewhere, and process off Linux is an error naming the key.
func TestIsolationDefaultPerOS(t *testing.T) {
	defer func(g string) { goos = g }(goos)
	goos = "linux"
	assert.Equal(t, "process", Default().Device.Isolation)
	goos = "darwin"
	assert.Equal(t, "inproc", Default().Device.Isolation)
	l, err := Load(Sources{Environ: []string{}})
	require.NoError(t, err)
	assert.Equal(t, "inproc", l.Config.Device.Isolation)
	_, err = Load(Sources{Environ: []string{"GR00TGW_DEVICE_ISOLATION=process"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "device.isolation")
	assert.Contains(t, err.Error(), "needs Linux")
}

// A configured demo_dir that does not exist (or is a file) is a config
// error naming demo_dir, not a silent fallback to the plugin's demo.
func TestDemoDirMustExist(t *testing.T) {
	_, err := Load(Sources{Environ: []string{}, Flags: parsedFlags(t, "--demo-dir", "/nonexistent")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "demo_dir")
	assert.Contains(t, err.Error(), "/nonexistent")
	f := writeFile(t, "x: 1\n")
	_, err = Load(Sources{Environ: []string{"GR00TGW_DEMO_DIR=" + f}})
	require.ErrorContains(t, err, "not a directory")
	l, err := Load(Sources{Environ: []string{"GR00TGW_DEMO_DIR=" + t.TempDir()}})
	require.NoError(t, err)
	assert.NotEmpty(t, l.Config.DemoDir)
}

// The torch runner's keys: defaults, every layer, and what is refused
// (naming the key): a device or dtype outside the set, backend torch
// without runner processes or off Linux, a policy other than the default,
// a runner command of its own.
func TestTorchKeys(t *testing.T) {
	l, err := Load(Sources{Environ: []string{}})
	require.NoError(t, err)
	assert.Equal(t, Torch{Device: "cuda", Dtype: "auto", Python: "python3", CUDAGraphs: true}, l.Config.Device.Torch)
	for _, k := range []struct{ name, flag, env string }{
		{"device.torch.device", "torch-device", "GR00TGW_DEVICE_TORCH_DEVICE"},
		{"device.torch.dtype", "torch-dtype", "GR00TGW_DEVICE_TORCH_DTYPE"},
		{"device.torch.python", "torch-python", "GR00TGW_DEVICE_TORCH_PYTHON"},
		{"device.torch.compile", "torch-compile", "GR00TGW_DEVICE_TORCH_COMPILE"},
		{"device.torch.cuda_graphs", "torch-cuda-graphs", "GR00TGW_DEVICE_TORCH_CUDA_GRAPHS"},
	} {
		key, ok := Lookup(k.name)
		require.True(t, ok, k.name)
		assert.Equal(t, k.flag, key.Flag)
		assert.Equal(t, []string{k.env}, key.Env)
	}

	defer func(g string) { goos = g }(goos)
	goos = "linux"
	for _, tc := range []struct {
		name    string
		file    string
		env     []string
		args    []string
		want    func(t *testing.T, c Config)
		wantErr string
	}{
		{name: "flags", args: []string{"--backend", "torch", "--torch-device", "cuda:1", "--torch-dtype", "bf16", "--torch-python", "/usr/bin/python3", "--torch-compile", "--torch-cuda-graphs=false"},
			want: func(t *testing.T, c Config) {
				assert.Equal(t, "torch", c.Backend)
				assert.Equal(t, Torch{Device: "cuda:1", Dtype: "bf16", Python: "/usr/bin/python3", Compile: true}, c.Device.Torch)
			}},
		{name: "env", env: []string{"GR00TGW_BACKEND=torch", "GR00TGW_DEVICE_TORCH_DEVICE=cpu", "GR00TGW_DEVICE_TORCH_DTYPE=fp32", "GR00TGW_DEVICE_TORCH_CUDA_GRAPHS=off"},
			want: func(t *testing.T, c Config) {
				assert.Equal(t, Torch{Device: "cpu", Dtype: "fp32", Python: "python3"}, c.Device.Torch)
			}},
		{name: "file", file: writeFile(t, "backend: torch\ndevice:\n  torch:\n    device: cuda:0\n    compile: true\n"),
			want: func(t *testing.T, c Config) {
				assert.Equal(t, Torch{Device: "cuda:0", Dtype: "auto", Python: "python3", Compile: true, CUDAGraphs: true}, c.Device.Torch)
			}},
		{name: "default policy said out loud", args: []string{"--backend", "torch", "--policy", "fp32"},
			want: func(t *testing.T, c Config) { assert.Equal(t, "fp32", c.Policy) }},
		{name: "torch keys unchecked against cpu", args: []string{"--torch-device", "cpu"},
			want: func(t *testing.T, c Config) { assert.Equal(t, "cpu", c.Backend) }},
		{name: "dtype fp16", args: []string{"--torch-dtype", "fp16"},
			wantErr: `config: key[device.torch.dtype] (from flag --torch-dtype): "fp16" is not one of auto, bf16, fp32`},
		{name: "device gpu", env: []string{"GR00TGW_DEVICE_TORCH_DEVICE=gpu"},
			wantErr: `config: key[device.torch.device] (from env GR00TGW_DEVICE_TORCH_DEVICE): "gpu" is not cpu, cuda or cuda:N`},
		{name: "device cuda:-1", args: []string{"--torch-device", "cuda:-1"}, wantErr: `key[device.torch.device]`},
		{name: "device cuda:", args: []string{"--torch-device", "cuda:"}, wantErr: `key[device.torch.device]`},
		{name: "empty python", args: []string{"--torch-python", " "}, wantErr: `key[device.torch.python] (from flag --torch-python): must not be empty`},
		{name: "torch inproc", args: []string{"--backend", "torch", "--device-isolation", "inproc"},
			wantErr: `config: key[backend] (from flag --backend): torch runs in runner processes: set device.isolation process (it is "inproc")`},
		{name: "torch policy", args: []string{"--backend", "torch", "--policy", "mixed_dit"},
			wantErr: `config: key[policy] (from flag --policy): "mixed_dit": backend torch takes its dtype from device.torch.dtype; leave policy at its default (fp32)`},
		{name: "torch policy from alias", env: []string{"GR00T_POLICY=bf16", "GR00TGW_BACKEND=torch"},
			wantErr: `config: key[policy] (from env GR00T_POLICY)`},
		{name: "torch runner command", args: []string{"--backend", "torch", "--device-runner-command", "/opt/runner"},
			wantErr: `config: key[device.runner_command] (from flag --device-runner-command): ["/opt/runner"]: backend torch starts its own runner`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = []string{}
			}
			l, err := Load(Sources{File: tc.file, Environ: env, Flags: parsedFlags(t, tc.args...)})
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.want(t, l.Config)
		})
	}

	// Off Linux there are no runner processes: backend torch is refused
	// with the reason (device.isolation defaults to inproc there).
	goos = "darwin"
	_, err = Load(Sources{Environ: []string{"GR00TGW_BACKEND=torch"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config: key[backend] (from env GR00TGW_BACKEND): torch runs in runner processes (device.isolation process), which need Linux; this is darwin")
}
