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
