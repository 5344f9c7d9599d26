package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// End-to-end tests of the served set with the real binary and real
// plugins: many embodiments under concurrent traffic, reloads that add,
// replace, refuse and retire plugins while DROID traffic runs, and a
// scaffolded plugin served after a reload.

const liberoTag = "libero_sim"

var (
	packOnce sync.Once
	packBin  string
	packErr  error
)

// packTool builds gwplugin-pack once per test process.
func packTool(t *testing.T) string {
	t.Helper()
	packOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gwplugin-pack-")
		if err != nil {
			packErr = err
			return
		}
		packBin = filepath.Join(dir, "gwplugin-pack")
		c := exec.Command(goTool(t), "build", "-o", packBin, "./plugins/cmd/gwplugin-pack")
		c.Dir = moduleRoot(t)
		if out, err := c.CombinedOutput(); err != nil {
			packErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	require.NoError(t, packErr)
	return packBin
}

// run runs the binary (or tool) in the module root and returns its output.
func runTool(t *testing.T, bin string, args ...string) string {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Dir = moduleRoot(t)
	c.Env = childEnv(moduleRoot(t))
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), out)
	return string(out)
}

// scaffoldPkg runs `gr00tgw plugin new` into a fresh embodiments/_... package
// (the go tool and gwplugin-pack's discovery skip "_" directories; the
// package must sit inside the module to build), applies edit to its
// main.go, packs it into out and returns the package directory.
func scaffoldPkg(t *testing.T, bin, out, name string, args ...string) string {
	t.Helper()
	return scaffoldEdit(t, bin, out, name, nil, args...)
}

func scaffoldEdit(t *testing.T, bin, out, name string, edit func(src string) string, args ...string) string {
	t.Helper()
	parent, err := os.MkdirTemp(filepath.Join(moduleRoot(t), "embodiments"), "_scaffoldtest-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	rel, err := filepath.Rel(moduleRoot(t), parent)
	require.NoError(t, err)
	runTool(t, bin, append([]string{"plugin", "new", name, "--dir", rel}, args...)...)
	pkg := filepath.Join(rel, name)
	if edit != nil {
		p := filepath.Join(moduleRoot(t), pkg, "main.go")
		src, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, []byte(edit(string(src))), 0o644))
	}
	runTool(t, packTool(t), "-o", out, "./"+pkg)
	return pkg
}

// copyPlugins copies the packed droid and libero plugins into a fresh
// plugins_dir.
func copyPlugins(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"droid", "libero"} {
		require.NoError(t, os.CopyFS(filepath.Join(dir, n), os.DirFS(filepath.Join(src, n))))
	}
	return dir
}

// waitServed waits until /v2/models/TAG/ready answers 200.
func waitServed(t *testing.T, g *childGateway, tag string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(g.base + "/v2/models/" + tag + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 20*time.Millisecond, "embodiment %s never became ready", tag)
}

// demoFor fetches /demo?embodiment=TAG: its request and golden actions.
func demoFor(t *testing.T, g *childGateway, tag string) ([]byte, map[string][][]float64) {
	t.Helper()
	resp, err := http.Get(g.base + "/demo?embodiment=" + tag)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var d struct {
		Request  json.RawMessage `json:"request"`
		Expected struct {
			Actions map[string][][]float64 `json:"actions"`
		} `json:"expected"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	return d.Request, d.Expected.Actions
}

type predicted struct {
	Actions       map[string][][]float64 `json:"actions"`
	Embodiment    string                 `json:"embodiment"`
	Plugin        struct{ Name, Version string }
	Error, Field  string
	ActionHorizon int `json:"action_horizon"`
}

func predict(t *testing.T, c *http.Client, g *childGateway, body []byte, kv ...string) (int, predicted) {
	st, _, b, err := postPredict(c, g.base, body, "application/json", kv...)
	if err != nil {
		return 0, predicted{Error: err.Error()}
	}
	var p predicted
	_ = json.Unmarshal(b, &p)
	if st != http.StatusOK && p.Error == "" {
		p.Error = string(b)
	}
	return st, p
}

func reload(t *testing.T, g *childGateway) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.base+"/admin/reload", nil)
	req.Header.Set("Authorization", "Bearer e2e-admin")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestE2EManyEmbodiments: the default server serves DROID and LIBERO from
// one process; four clients interleave both for 30 s (-short: 5 s); every
// answer is 200 (or 503 back-pressure) and bit-identical to the same
// request served alone.
func TestE2EManyEmbodiments(t *testing.T) {
	bin, plugins := buildGateway(t)
	g := startGateway(t, bin, copyPlugins(t, plugins), "--queue-depth", "16")
	waitServed(t, g, liberoTag)
	c := &http.Client{Timeout: 60 * time.Second}
	droidReq, droidGolden := demoFor(t, g, "oxe_droid_relative_eef_relative_joint")
	liberoReq, liberoGolden := demoFor(t, g, liberoTag)
	type job struct {
		tag  string
		body []byte
		hdr  []string
	}
	// DROID's demo without its embodiment field (the default) and routed
	// by header; LIBERO's by body and by header.
	var droidMap map[string]any
	require.NoError(t, json.Unmarshal(droidReq, &droidMap))
	delete(droidMap, "embodiment")
	droidPlain, _ := json.Marshal(droidMap)
	var liberoMap map[string]any
	require.NoError(t, json.Unmarshal(liberoReq, &liberoMap))
	delete(liberoMap, "embodiment")
	liberoPlain, _ := json.Marshal(liberoMap)
	jobs := []job{
		{"droid", droidPlain, nil},
		{"libero", liberoReq, nil},
		{"droid", droidReq, []string{"X-Embodiment", "oxe_droid_relative_eef_relative_joint"}},
		{"libero", liberoPlain, []string{"X-Embodiment", liberoTag}},
	}
	alone := map[string]map[string][][]float64{}
	for _, j := range jobs[:2] {
		st, p := predict(t, c, g, j.body, j.hdr...)
		require.Equal(t, http.StatusOK, st, p.Error)
		alone[j.tag] = p.Actions
	}
	d, err := maxActionDiff(alone["droid"], droidGolden)
	require.NoError(t, err)
	assert.Less(t, d, 1e-3, "DROID vs its golden")
	d, err = maxActionDiff(alone["libero"], liberoGolden)
	require.NoError(t, err)
	assert.Less(t, d, 1e-5, "LIBERO vs its golden")

	dur := 30 * time.Second
	if testing.Short() {
		dur = 5 * time.Second
	}
	var ok, busy, bad atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(dur)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for time.Now().Before(stop) {
				j := jobs[rng.IntN(len(jobs))]
				st, p := predict(t, c, g, j.body, j.hdr...)
				switch {
				case st == http.StatusServiceUnavailable:
					busy.Add(1)
				case st != http.StatusOK:
					bad.Add(1)
					t.Errorf("%s: %d %s", j.tag, st, p.Error)
				default:
					ok.Add(1)
					if d, err := maxActionDiff(p.Actions, alone[j.tag]); err != nil || d != 0 {
						bad.Add(1)
						t.Errorf("%s: actions differ from the request served alone (max|d| %g, %v)", j.tag, d, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%v: %d ok, %d back-pressure (503), %d failed", dur, ok.Load(), busy.Load(), bad.Load())
	assert.Zero(t, bad.Load())
	assert.Positive(t, ok.Load())
}

// TestE2EReloadUnderTraffic: while DROID traffic runs, LIBERO's plugin is
// (a) replaced by a new version — the served version changes; (b)
// replaced by broken ones (bad sha256, a trap in gw_init, a failing
// warm-up), each refused while the previous version keeps serving; (c)
// removed — LIBERO requests get 400 naming embodiment. DROID never sees a
// failure.
func TestE2EReloadUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds four plugin variants (a minute)")
	}
	bin, plugins := buildGateway(t)
	pdir := copyPlugins(t, plugins)
	variants := t.TempDir()
	scaffoldPkg(t, bin, filepath.Join(variants, "v110"), "libero", "--tag", liberoTag, "--version", "1.1.0")
	scaffoldEdit(t, bin, filepath.Join(variants, "trap"), "libero", func(src string) string {
		return strings.Replace(src, "func init() { pdk.Register(pdk.NewTable(Describe())) }",
			"type trapInit struct{ *pdk.Table }\n\nfunc (trapInit) Init(*abi.InitConfig) error { panic(\"trap in gw_init\") }\n\nfunc init() { pdk.Register(trapInit{pdk.NewTable(Describe())}) }", 1)
	}, "--tag", liberoTag, "--version", "1.2.0")
	scaffoldEdit(t, bin, filepath.Join(variants, "skew"), "libero", func(src string) string {
		return strings.Replace(src, "func init() { pdk.Register(pdk.NewTable(Describe())) }",
			"type skewed struct{ *pdk.Table }\n\nfunc (s skewed) Post(in *pdk.PostInput) (*pdk.Actions, error) {\n\ta, err := s.Table.Post(in)\n\tif err == nil {\n\t\tfor _, g := range a.Groups {\n\t\t\tfor i := range g.Values {\n\t\t\t\tg.Values[i] = 0.3 - g.Values[i]\n\t\t\t}\n\t\t}\n\t}\n\treturn a, err\n}\n\nfunc init() { pdk.Register(skewed{pdk.NewTable(Describe())}) }", 1)
	}, "--tag", liberoTag, "--version", "1.3.0")

	g := startGateway(t, bin, pdir, "--admin-token", "e2e-admin", "--queue-depth", "16")
	waitServed(t, g, liberoTag)
	c := &http.Client{Timeout: 60 * time.Second}
	droidReq, _ := demoFor(t, g, "oxe_droid_relative_eef_relative_joint")
	liberoReq, liberoGolden := demoFor(t, g, liberoTag)
	st, ref := predict(t, c, g, droidReq)
	require.Equal(t, http.StatusOK, st, ref.Error)

	var droidOK, droidBad atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st, p := predict(t, c, g, droidReq)
				if st == http.StatusServiceUnavailable {
					continue
				}
				if d, err := maxActionDiff(p.Actions, ref.Actions); st != http.StatusOK || err != nil || d != 0 {
					droidBad.Add(1)
					t.Errorf("DROID during reloads: %d %s (max|d| %g, %v)", st, p.Error, d, err)
					continue
				}
				droidOK.Add(1)
			}
		}()
	}
	libero := func() (int, predicted) { return predict(t, c, g, liberoReq) }
	install := func(src string) {
		require.NoError(t, os.RemoveAll(filepath.Join(pdir, "libero")))
		require.NoError(t, os.CopyFS(filepath.Join(pdir, "libero"), os.DirFS(filepath.Join(src, "libero"))))
	}

	// (a) a new version: served after its warm-up passed LIBERO's golden.
	st, p := libero()
	require.Equal(t, http.StatusOK, st, p.Error)
	assert.Equal(t, "1.0.0", p.Plugin.Version)
	install(filepath.Join(variants, "v110"))
	code, body := reload(t, g)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"change":"replaced"`)
	st, p = libero()
	require.Equal(t, http.StatusOK, st, p.Error)
	assert.Equal(t, "1.1.0", p.Plugin.Version, "the served version changed")
	d, err := maxActionDiff(p.Actions, liberoGolden)
	require.NoError(t, err)
	assert.Less(t, d, 1e-5)

	// (b) broken versions are refused; 1.1.0 keeps serving.
	for _, tc := range []struct {
		name, src, reason string
		edit              func()
	}{
		{"bad sha256", filepath.Join(variants, "v110"), "sha256 mismatch", func() {
			mf := filepath.Join(pdir, "libero", "plugin.yaml")
			b, err := os.ReadFile(mf)
			require.NoError(t, err)
			i := bytes.Index(b, []byte("sha256: "))
			require.GreaterOrEqual(t, i, 0)
			j := i + len("sha256: ")
			if b[j] == '"' {
				j++
			}
			c := byte('0')
			if b[j] == '0' {
				c = '1'
			}
			b[j] = c
			require.NoError(t, os.WriteFile(mf, b, 0o644))
		}},
		{"trap in gw_init", filepath.Join(variants, "trap"), "trap", nil},
		{"failing warm-up", filepath.Join(variants, "skew"), "PCC", nil},
	} {
		install(tc.src)
		if tc.edit != nil {
			tc.edit()
		}
		code, body := reload(t, g)
		assert.Equal(t, http.StatusUnprocessableEntity, code, "%s: %s", tc.name, body)
		assert.Contains(t, body, `"change":"refused"`, tc.name)
		assert.Contains(t, body, tc.reason, tc.name)
		st, p := libero()
		require.Equal(t, http.StatusOK, st, "%s: %s", tc.name, p.Error)
		assert.Equal(t, "1.1.0", p.Plugin.Version, "%s: the previous version keeps serving", tc.name)
	}

	// (c) removed: LIBERO is no longer served; DROID never notices.
	require.NoError(t, os.RemoveAll(filepath.Join(pdir, "libero")))
	code, body = reload(t, g)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"change":"retired"`)
	st, p = libero()
	assert.Equal(t, http.StatusBadRequest, st)
	assert.Equal(t, "embodiment", p.Field)
	assert.Contains(t, p.Error, "served: [oxe_droid_relative_eef_relative_joint]")

	close(stop)
	wg.Wait()
	t.Logf("DROID during the reloads: %d ok, %d failed", droidOK.Load(), droidBad.Load())
	assert.Zero(t, droidBad.Load())
	assert.Positive(t, droidOK.Load())
}

// TestE2EScaffoldServed: a checkpoint that describes a new robot
// (testdata/n17-tiny-newrobot: new_embodiment, one camera, relative
// joints, an absolute gripper);
// `gr00tgw plugin new` scaffolds its plugin, gwplugin-pack builds it,
// `plugin verify` passes its cases, and dropped into a running server's
// plugins_dir it is served after a reload (warm-up: determinism on its
// shipped demo).
func TestE2EScaffoldServed(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a plugin")
	}
	bin, plugins := buildGateway(t)
	ck := filepath.Join(moduleRoot(t), "testdata", "n17-tiny-newrobot")
	built := t.TempDir()
	pkg := scaffoldPkg(t, bin, built, "myrobot", "--tag", "new_embodiment", "--weights-dir", ck, "--frame", "320x240")
	out := runTool(t, bin, "plugin", "verify", filepath.Join(built, "myrobot", "myrobot.wasm"), "--cases", filepath.Join(pkg, "testdata", "cases"))
	assert.Contains(t, out, "embodiment new_embodiment, slot 10")
	assert.NotContains(t, out, "FAIL")

	pdir := copyPlugins(t, plugins)
	g := startGateway(t, bin, pdir, "--admin-token", "e2e-admin", "--weights-dir", ck)
	require.NoError(t, os.CopyFS(filepath.Join(pdir, "myrobot"), os.DirFS(filepath.Join(built, "myrobot"))))
	code, body := reload(t, g)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"embodiment":"new_embodiment","change":"added"`)
	req, _ := demoFor(t, g, "new_embodiment")
	st, p := predict(t, &http.Client{Timeout: 60 * time.Second}, g, req)
	require.Equal(t, http.StatusOK, st, p.Error)
	assert.Equal(t, "new_embodiment", p.Embodiment)
	assert.Equal(t, 16, p.ActionHorizon)
	require.Len(t, p.Actions["joints"], 16)
	require.Len(t, p.Actions["joints"][0], 7)
	require.Len(t, p.Actions["gripper"][0], 1)
}

// TestE2EGolden: a checkpoint that ships no demo and no golden (as a real
// snapshot) is served with the plugins' demos and determinism warm-ups;
// `gr00tgw golden` computes its fp32 goldens once, and then a server with
// another policy (mixed_dit) gates every embodiment against them.
func TestE2EGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two servers and a golden run")
	}
	bin, plugins := buildGateway(t)
	src := filepath.Join(moduleRoot(t), "testdata", "n17-tiny")
	ck := t.TempDir()
	for _, f := range []string{"model.safetensors", "config.json", "backbone_config.json", "embodiment_id.json", "statistics.json", "processor_config.json"} {
		require.NoError(t, os.Symlink(filepath.Join(src, f), filepath.Join(ck, f)))
	}
	goldens := t.TempDir()
	pdir := copyPlugins(t, plugins)
	out := runTool(t, bin, "golden", "--weights-dir", ck, "--plugins-dir", pdir, "--golden-dir", goldens, "--plugin-cache-dir", "-")
	assert.Contains(t, out, "ok   oxe_droid_relative_eef_relative_joint")
	assert.Contains(t, out, "ok   libero_sim")
	assert.NotContains(t, out, "warm-up disabled", "golden serves nothing: no warning that it serves unchecked")
	// Computed once: a second run keeps the current goldens; --force
	// recomputes them.
	out = runTool(t, bin, "golden", "--weights-dir", ck, "--plugins-dir", pdir, "--golden-dir", goldens, "--plugin-cache-dir", "-")
	assert.Contains(t, out, "kept oxe_droid_relative_eef_relative_joint")
	assert.Contains(t, out, "kept libero_sim")
	out = runTool(t, bin, "golden", "--weights-dir", ck, "--plugins-dir", pdir, "--golden-dir", goldens, "--plugin-cache-dir", "-", "--force")
	assert.Contains(t, out, "ok   libero_sim")

	g := startGateway(t, bin, pdir, "--weights-dir", ck, "--golden-dir", goldens, "--policy", "mixed_dit")
	waitServed(t, g, liberoTag)
	resp, err := http.Get(g.base + "/info")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var info struct {
		Embodiments []struct {
			Name, Status string
			Warmup       struct {
				Check  string
				MinPCC float64 `json:"min_pcc"`
			}
			Demo struct{ Source string }
		} `json:"embodiments"`
	}
	require.NoError(t, json.Unmarshal(b, &info))
	require.Len(t, info.Embodiments, 2, string(b))
	for _, e := range info.Embodiments {
		assert.Equal(t, "ok", e.Status, e.Name)
		assert.Equal(t, "golden", e.Warmup.Check, "%s: mixed_dit gated against the fp32 golden", e.Name)
		assert.GreaterOrEqual(t, e.Warmup.MinPCC, 0.999, e.Name)
		assert.Contains(t, e.Demo.Source, goldens, e.Name)
	}
}
