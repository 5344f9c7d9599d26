package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/binding"
	httpfront "github.com/gr00tgw/gr00tgw/frontend/http"
	"github.com/gr00tgw/gr00tgw/service"
)

func init() {
	register(&command{name: "golden", summary: "compute a checkpoint's fp32 demo goldens (CPU backend) into golden_dir, which warm-up then gates every policy and backend against", run: runGolden})
}

// goldenFile is what `gr00tgw golden` writes as actions.json: the layout
// of a demo golden (service.LoadDemo) plus where it came from.
type goldenFile struct {
	Golden           string                 `json:"golden"`
	Actions          map[string][][]float64 `json:"actions"`
	Embodiment       string                 `json:"embodiment"`
	Plugin           string                 `json:"plugin"`
	PluginVersion    string                 `json:"plugin_version"`
	CheckpointSHA256 string                 `json:"checkpoint_sha256"`
	ComputedAt       string                 `json:"computed_at"`
}

// runGolden is `gr00tgw golden`: with serve's configuration (weights_dir,
// plugins_dir, embodiments, golden_dir, …) but the CPU backend, the fp32
// policy and no warm-up gate, it serves every embodiment in-process, runs
// each one's demo observation twice (the runs must agree bit for bit), and
// writes <golden_dir>/<checkpoint sha256>/<tag>/{request.json,actions.json}.
func runGolden(ctx context.Context, args []string) error {
	fs := newFlags("golden", "[--weights-dir DIR] [--<key> value ...]",
		"Computes the fp32 CPU-backend golden of every served embodiment's demo observation for the\n"+
			"checkpoint and writes <golden_dir>/<checkpoint sha256>/<tag>/{request.json,actions.json}.\n"+
			"`serve` then gates each embodiment's warm-up against it (any policy, any backend) when the\n"+
			"checkpoint ships no golden of its own.")
	file := configFlags(fs)
	force := fs.Bool("force", false, "recompute goldens that are already current (same checkpoint digest, plugin, version and demo request)")
	loaded, err := parseConfig(fs, args, file)
	if err != nil {
		return err
	}
	cfg := loaded.Config
	cfg.Backend, cfg.Policy, cfg.WarmupRuns = "cpu", "fp32", 0
	out := binding.GoldenDir(cfg)
	if out == "" {
		return fmt.Errorf("%w: golden_dir is %q: nowhere to write goldens", errUsage, cfg.GoldenDir)
	}
	// Warm-up is off on purpose (this computes the goldens, it serves
	// nothing): the gateway's warning that it serves without a fidelity
	// check would mislead, once per embodiment.
	log := slog.New(dropMessages{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), "warm-up disabled"})
	root, rerr := assets.Root()
	if rerr != nil && (cfg.WeightsDir == "" || cfg.TokenizerDir == "" || cfg.PluginsDir == "") {
		return rerr
	}
	core, err := service.New(service.Options{Config: cfg, Logger: log, Version: versionString()})
	if err != nil {
		return err
	}
	srv, err := httpfront.New(core, httpfront.Options{})
	if err != nil {
		return err
	}
	var deps *service.Deps
	if err := core.Start(ctx, func(ctx context.Context) (*service.Deps, error) {
		d, err := binding.Open(ctx, cfg, binding.Resolve(cfg, root), log, nil)
		deps = d
		return d, err
	}); err != nil {
		return err
	}
	defer core.Shutdown(context.Background(), srv.Shutdown)
	core.WaitBound(ctx)
	digest, _ := deps.Backend.Facts().Extra["checkpoint_sha256"].(string)
	if digest == "" {
		return fmt.Errorf("the backend reports no checkpoint digest")
	}
	var info struct {
		Embodiments []struct {
			Name, Plugin, Status string
			PluginVersion        string `json:"plugin_version"`
		} `json:"embodiments"`
	}
	if err := getJSON(srv, "/info", &info); err != nil {
		return err
	}
	wrote := 0
	for _, e := range info.Embodiments {
		if e.Status != "ok" {
			fmt.Printf("skip %s: %s\n", e.Name, e.Status)
			continue
		}
		dir := filepath.Join(out, digest, e.Name)
		if !*force {
			if ok, err := goldenCurrent(srv, e.Name, e.Plugin, e.PluginVersion, digest, dir); err != nil {
				return fmt.Errorf("embodiment %s: %w", e.Name, err)
			} else if ok {
				fmt.Printf("kept %s (plugin %s %s): %s is current (--force recomputes)\n", e.Name, e.Plugin, e.PluginVersion, dir)
				wrote++
				continue
			}
		}
		if err := writeGolden(srv, e.Name, e.Plugin, e.PluginVersion, digest, dir); err != nil {
			return fmt.Errorf("embodiment %s: %w", e.Name, err)
		}
		fmt.Printf("ok   %s (plugin %s %s) -> %s\n", e.Name, e.Plugin, e.PluginVersion, dir)
		wrote++
	}
	if wrote == 0 {
		return fmt.Errorf("no embodiment served")
	}
	return nil
}

// goldenCurrent reports whether dir already holds tag's golden for this
// checkpoint digest, plugin and version, computed from the demo request
// srv serves now: computed once, a golden is kept (the predictions are the
// cost: ~20 s each at real size).
func goldenCurrent(srv *httpfront.Server, tag, plugin, version, digest, dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "actions.json"))
	if os.IsNotExist(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var g goldenFile
	if json.Unmarshal(b, &g) != nil || g.CheckpointSHA256 != digest || g.Embodiment != tag ||
		g.Plugin != plugin || g.PluginVersion != version || len(g.Actions) == 0 {
		return false, nil
	}
	req, err := os.ReadFile(filepath.Join(dir, "request.json"))
	if err != nil {
		return false, nil
	}
	var demo struct {
		Request json.RawMessage `json:"request"`
	}
	if err := getJSON(srv, "/demo?embodiment="+tag, &demo); err != nil {
		return false, err
	}
	return bytes.Equal(req, demo.Request), nil
}

// writeGolden runs tag's demo twice through srv and writes the golden.
func writeGolden(srv *httpfront.Server, tag, plugin, version, digest, dir string) error {
	var demo struct {
		Request json.RawMessage `json:"request"`
	}
	if err := getJSON(srv, "/demo?embodiment="+tag, &demo); err != nil {
		return err
	}
	var runs []map[string][][]float64
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, "/predict", bytes.NewReader(demo.Request))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.App().Test(req, -1)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("demo predict: %d %s", resp.StatusCode, b)
		}
		var pr service.PredictResponse
		if err := json.Unmarshal(b, &pr); err != nil {
			return err
		}
		runs = append(runs, pr.Actions)
	}
	for k, rows := range runs[0] {
		for i := range rows {
			if !slices.Equal(rows[i], runs[1][k][i]) {
				return fmt.Errorf("demo predict is not deterministic (%s step %d differs between two runs)", k, i)
			}
		}
	}
	g := goldenFile{
		Golden: "fp32 CPU-backend golden computed by `gr00tgw golden` for this checkpoint (two runs, bit-identical); " +
			"it proves agreement with gr00tgw's own fp32 path, not with the PyTorch reference",
		Actions: runs[0], Embodiment: tag, Plugin: plugin, PluginVersion: version, CheckpointSHA256: digest,
		ComputedAt: time.Now().UTC().Format(time.RFC3339),
	}
	body, err := json.MarshalIndent(g, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "request.json"), demo.Request, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "actions.json"), append(body, '\n'), 0o644)
}

func getJSON(srv *httpfront.Server, path string, v any) error {
	req, _ := http.NewRequest(http.MethodGet, path, nil)
	resp, err := srv.App().Test(req, -1)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// dropMessages is a slog.Handler that drops the records whose message
// starts with prefix and passes the others to Handler.
type dropMessages struct {
	slog.Handler
	prefix string
}

func (d dropMessages) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, d.prefix) {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}

func (d dropMessages) WithAttrs(as []slog.Attr) slog.Handler {
	return dropMessages{d.Handler.WithAttrs(as), d.prefix}
}

func (d dropMessages) WithGroup(name string) slog.Handler {
	return dropMessages{d.Handler.WithGroup(name), d.prefix}
}
