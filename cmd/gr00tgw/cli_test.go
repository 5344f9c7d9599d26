package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
)

// withHelpOut captures what help writes while f runs.
func withHelpOut(t *testing.T, f func()) string {
	t.Helper()
	var b bytes.Buffer
	old := helpOut
	helpOut = &b
	defer func() { helpOut = old }()
	f()
	return b.String()
}

// allCommands is every subcommand's full name ("run", "plugin verify").
func allCommands() []string {
	var out []string
	for n, c := range commands {
		if c.verbs == nil {
			out = append(out, n)
		}
		for _, v := range c.verbs {
			out = append(out, n+" "+v.name)
		}
	}
	sort.Strings(out)
	return out
}

// TestHelpListsEverySubcommand: `gr00tgw help`, `-h`, `--help` list every
// subcommand with its summary on stdout (exit 0); no arguments lists them
// on stderr (exit 2); an unknown command is a usage error.
func TestHelpListsEverySubcommand(t *testing.T) {
	names := allCommands()
	require.Subset(t, names, []string{"arena", "config print", "encode", "plugin new", "plugin verify", "predict", "run", "serve", "version"})
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, dispatch(context.Background(), args, &out, &errb), "%v", args)
		for _, n := range names {
			assert.Regexp(t, `(?m)^  `+n+` +\S`, out.String(), "%v lists %s with a summary", args, n)
		}
	}
	var out, errb bytes.Buffer
	assert.Equal(t, 2, dispatch(context.Background(), nil, &out, &errb))
	assert.Contains(t, errb.String(), "plugin verify")
	errb.Reset()
	assert.Equal(t, 2, dispatch(context.Background(), []string{"frobnicate"}, &out, &errb))
	assert.Contains(t, errb.String(), `unknown command "frobnicate"`)
}

// TestHelpSubcommand: `gr00tgw help SUB` and `gr00tgw SUB --help` print
// SUB's usage and flags (exit 0) for every subcommand; deprecated aliases
// are not shown.
func TestHelpSubcommand(t *testing.T) {
	for _, n := range allCommands() {
		words := strings.Fields(n)
		for _, args := range [][]string{append([]string{"help"}, words...), append(words, "--help"), append(words, "-h")} {
			var out, errb bytes.Buffer
			var code int
			h := withHelpOut(t, func() { code = dispatch(context.Background(), args, &out, &errb) })
			require.Equal(t, 0, code, "%v: %s", args, errb.String())
			assert.Contains(t, h, "usage: gr00tgw "+n, "%v", args)
		}
	}
	h := withHelpOut(t, func() { dispatch(context.Background(), []string{"help", "run"}, &bytes.Buffer{}, &bytes.Buffer{}) })
	for _, f := range []string{"--weights-dir", "--plugins-dir", "--embodiment", "--request", "--out", "--taps"} {
		assert.Contains(t, h, f)
	}
	assert.NotContains(t, h, "--weights ")
	assert.NotContains(t, h, "--plugins ")
	h = withHelpOut(t, func() { dispatch(context.Background(), []string{"help", "plugin"}, &bytes.Buffer{}, &bytes.Buffer{}) })
	assert.Contains(t, h, "plugin verify")
	assert.Contains(t, h, "plugin new")
}

// TestFlagsOneNamePerConcept: the checkpoint directory is --weights-dir,
// the plugin directory --plugins-dir and the wazero cache
// --plugin-cache-dir in every subcommand that takes them, as in serve.
func TestFlagsOneNamePerConcept(t *testing.T) {
	want := map[string][]string{
		"serve":         {"--weights-dir", "--plugins-dir", "--plugin-cache-dir", "--embodiment", "--policy", "--threads"},
		"run":           {"--weights-dir", "--plugins-dir", "--embodiment", "--policy", "--threads", "--request", "--out"},
		"encode":        {"--weights-dir", "--request", "--out"},
		"arena":         {"--weights-dir", "--policy", "--out"},
		"plugin verify": {"--weights-dir", "--plugin-cache-dir", "--cases"},
		"plugin new":    {"--weights-dir", "--tag", "--dir"},
		"predict":       {"--request", "--out", "--url"},
	}
	for cmd, flags := range want {
		h := withHelpOut(t, func() {
			dispatch(context.Background(), append([]string{"help"}, strings.Fields(cmd)...), &bytes.Buffer{}, &bytes.Buffer{})
		})
		for _, f := range flags {
			assert.Contains(t, h, f+" ", "%s has %s", cmd, f)
		}
	}
}

// TestFlagsInterspersedAndAliases: flags before or after positional
// arguments; the old names (--weights, --checkpoint, --cache-dir,
// --plugins) and the old single-dash spelling still work for one release.
func TestFlagsInterspersedAndAliases(t *testing.T) {
	dir := checkoutTempDir(t)
	var out bytes.Buffer
	require.NoError(t, pluginNew(&out, []string{"--dir", dir, "mylibero", "--tag", "libero_sim", "--version", "0.3.0"}))
	assert.FileExists(t, filepath.Join(dir, "mylibero", "plugin.yaml"))
	require.NoError(t, pluginNew(&out, []string{"-dir", dir, "second", "-tag=libero_sim"}))
	assert.FileExists(t, filepath.Join(dir, "second", "plugin.yaml"))

	plan := func(args ...string) map[string]any {
		t.Helper()
		var m map[string]any
		b := captureStdout(t, func() { require.NoError(t, arenaCmd(context.Background(), append(args, "--plan-only"))) })
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
		return m
	}
	want := plan("--weights-dir", runTiny)
	assert.Equal(t, want, plan("--weights", runTiny))
	assert.Equal(t, want, plan("-weights-dir", runTiny))
	assert.Equal(t, want, plan("--weights-dir="+runTiny))

	err := arenaCmd(context.Background(), []string{"--plan-only", "extra"})
	assert.ErrorIs(t, err, errUsage)
	err = arenaCmd(context.Background(), []string{"--no-such-flag"})
	assert.ErrorIs(t, err, errUsage)
}

// captureStdout returns what f writes to os.Stdout.
func captureStdout(t *testing.T, f func()) []byte {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r)
		done <- b.Bytes()
	}()
	defer func() { os.Stdout = old }()
	f()
	os.Stdout = old
	require.NoError(t, w.Close())
	return <-done
}

// TestArenaOutCreatesParent: `arena --out out/x.bin` on a fresh clone (no
// out/) creates the directory.
func TestArenaOutCreatesParent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out", "deeper", "x.bin")
	captureStdout(t, func() {
		require.NoError(t, arenaCmd(context.Background(), []string{"--synthetic", "tiny", "--out", out}))
	})
	assert.FileExists(t, out)
	assert.FileExists(t, out+".json")
}

// TestResolveEmbodiment: a tag is its slot; a number is a slot whose
// statistics and processor config are the request's tag's, else the one
// tag on that slot, else refused, never DROID's by default.
func TestResolveEmbodiment(t *testing.T) {
	for _, c := range []struct {
		flag, req string
		tag       string
		slot      int
		note, err string
	}{
		{"", "", defaultEmbodiment, 24, "", ""},
		{"", "libero_sim", "libero_sim", 2, "", ""},
		{"libero_sim", "oxe_droid_relative_eef_relative_joint", "libero_sim", 2, "", ""},
		{"24", "", defaultEmbodiment, 24, "the one tag on that slot", ""},
		{"2", "", "libero_sim", 2, "the one tag on that slot", ""},
		{"10", "libero_sim", "libero_sim", 10, "of the request's embodiment libero_sim (its own slot is 2)", ""},
		{"10", "", "", 0, "", "slot 10 is shared by new_embodiment, robocasa_gr1_tabletop, robocasa_panda_omron"},
		{"5", "", "", 0, "", "no tag has projector slot 5"},
		{"-1", "", "", 0, "", "not negative"},
		{"nope", "", "", 0, "", "no entry for embodiment nope"},
	} {
		tag, slot, note, err := resolveEmbodiment(runTiny, c.flag, c.req)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "--embodiment %q request %q", c.flag, c.req)
			continue
		}
		require.NoError(t, err, "--embodiment %q request %q", c.flag, c.req)
		assert.Equal(t, c.tag, tag, "--embodiment %q request %q", c.flag, c.req)
		assert.Equal(t, c.slot, slot, "--embodiment %q request %q", c.flag, c.req)
		if c.note == "" {
			assert.Empty(t, note)
		} else {
			assert.Contains(t, note, c.note)
		}
	}
}

// TestInstructionAliases: run and encode read instruction, language or
// prompt (exactly one), as /predict does.
func TestInstructionAliases(t *testing.T) {
	for body, want := range map[string]string{
		`{"instruction": "a"}`: "a", `{"language": "b"}`: "b", `{"prompt": "c"}`: "c",
		`{}`: "error: no instruction", `{"instruction": "a", "prompt": "c"}`: "error: instruction and prompt are aliases",
	} {
		var r runRequest
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		got, err := r.instruction()
		if e, ok := strings.CutPrefix(want, "error: "); ok {
			assert.ErrorContains(t, err, e, body)
			continue
		}
		require.NoError(t, err, body)
		assert.Equal(t, want, got, body)
	}
}

// TestRunPromptAlias: `gr00tgw run` on case A's request with the
// instruction sent as "prompt" (and as "language") computes the same
// action_pred as with "instruction".
func TestRunPromptAlias(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(runCaseA, "request.json"))
	require.NoError(t, err)
	pd := droidPlugins(t)
	runWith := func(field string) []float32 {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		inst := m["instruction"]
		delete(m, "instruction")
		m[field] = inst
		b, err := json.Marshal(m)
		require.NoError(t, err)
		req := filepath.Join(t.TempDir(), "req.json")
		require.NoError(t, os.WriteFile(req, b, 0o644))
		out := t.TempDir()
		captureStdout(t, func() {
			require.NoError(t, runCmd(context.Background(), []string{"--weights-dir", runTiny, "--request", req, "--out", out, "--plugins-dir", pd}))
		})
		return readGolden(t, filepath.Join(out, "action_pred.npy"))
	}
	want := runWith("instruction")
	golden := readGolden(t, filepath.Join(runCaseA, "action_pred.npy"))
	require.Len(t, want, len(golden))
	for i := range golden {
		require.InDelta(t, golden[i], want[i], 1e-4, "action_pred[%d] from the request's frames and instruction", i)
	}
	assert.Equal(t, want, runWith("prompt"))
	assert.Equal(t, want, runWith("language"))
}

// checkoutTempDir is a fresh directory inside the checkout (under the
// git-ignored build/), where `plugin new` may write a package.
func checkoutTempDir(t *testing.T) string {
	t.Helper()
	parent := filepath.Join(moduleRoot(t), "build")
	require.NoError(t, os.MkdirAll(parent, 0o755))
	dir, err := os.MkdirTemp(parent, "pluginnew-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestPluginNewWhere: a package outside a gr00tgw checkout is refused with
// the reason (it could not build against the PDK nor be packed); inside,
// the next-step hint and the scaffold's comment give the command that packs
// it from where it is: make plugins for embodiments/*, gwplugin-pack with
// its path elsewhere.
func TestPluginNewWhere(t *testing.T) {
	var out bytes.Buffer
	outside := t.TempDir()
	err := pluginNew(&out, []string{"--dir", outside, "myrobot", "--tag", "libero_sim"})
	require.ErrorIs(t, err, errUsage)
	assert.ErrorContains(t, err, "is outside a gr00tgw checkout")
	assert.NoDirExists(t, filepath.Join(outside, "myrobot"))

	dir := checkoutTempDir(t)
	rel, err := filepath.Rel(moduleRoot(t), dir)
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, pluginNew(&out, []string{"--dir", dir, "myrobot", "--tag", "libero_sim", "--version", "0.2.0"}))
	pack := "go run ./plugins/cmd/gwplugin-pack -o build/plugins ./" + filepath.Join(rel, "myrobot")
	assert.Contains(t, out.String(), pack+" && bin/gr00tgw plugin verify build/plugins/myrobot/myrobot.wasm --cases "+filepath.Join(rel, "myrobot", "testdata", "cases"))
	src, err := os.ReadFile(filepath.Join(dir, "myrobot", "main.go"))
	require.NoError(t, err)
	assert.Contains(t, string(src), "//\t"+pack+"\n")
	assert.Contains(t, string(src), `Version: "0.2.0"`)
	yml, err := os.ReadFile(filepath.Join(dir, "myrobot", "plugin.yaml"))
	require.NoError(t, err)
	assert.NotContains(t, string(yml), "version:", "the version lives in the Go source only")
}

// TestEncodePromptTokens: encode's prompt_tokens is /predict's (the
// instruction's tokens: 8 for DROID's demo, as in the seed's response
// example), and seq_len = prompt + template + image tokens.
func TestEncodePromptTokens(t *testing.T) {
	req := filepath.Join(moduleRoot(t), "embodiments", "droid", "testdata", "demo", "request.json")
	out := captureStdout(t, func() {
		require.NoError(t, runEncode(context.Background(), []string{"--request", req, "--out", t.TempDir()}))
	})
	f := map[string]int{}
	for _, kv := range strings.Fields(string(out)) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				f[k] = n
			}
		}
	}
	assert.Equal(t, 8, f["prompt_tokens"], "%s", out)
	assert.Equal(t, f["seq_len"], f["prompt_tokens"]+f["template_tokens"]+f["image_tokens"], "%s", out)
	assert.NotContains(t, string(out), "text_tokens")
}

// TestConfigPrintResolved: config print shows what a placeholder value
// stands for (the embedded checkpoint, build/plugins, every core) and the
// noise keys; a value that was set is shown as set.
func TestConfigPrintResolved(t *testing.T) {
	out := string(captureStdout(t, func() {
		require.NoError(t, runConfigPrint(context.Background(), []string{"--threads", "1"}))
	}))
	root := moduleRoot(t)
	for _, want := range []string{
		"# default → " + filepath.Join(root, "testdata", "n17-tiny") + " (the embedded tiny checkpoint)",
		"# default → " + filepath.Join(root, "build", "plugins"),
		"default_seed                = 42 ",
		"random_noise                = false ",
	} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, `(?m)^threads +?= 1 +# flag --threads$`, out)
}

// TestLogFormatAuto: log.format auto is text on a terminal (a pty's
// master end here) and JSON on a file or pipe; json and text are kept.
func TestLogFormatAuto(t *testing.T) {
	tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no /dev/ptmx to stand for a terminal: %v", err)
	}
	defer tty.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer file.Close()
	assert.Equal(t, "text", logFormatFor(config.Log{Format: "auto"}, tty))
	assert.Equal(t, "json", logFormatFor(config.Log{Format: "auto"}, file))
	assert.Equal(t, "json", logFormatFor(config.Log{Format: "json"}, tty))
	assert.Equal(t, "text", logFormatFor(config.Log{Format: "text"}, file))
}
