package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// scaffold is what `gr00tgw plugin new` derives from the checkpoint's
// contract for one embodiment tag.
type scaffold struct {
	Name, Version, Tag string
	// Rel is the package directory relative to the checkout root, and
	// Pack the command that builds and packs it from there.
	Rel, Pack  string
	Checkpoint string
	Desc       abi.Description
	pc         processor.Config
	stats      map[string]map[string]statBounds // modality → key → bounds
}

// statBounds is what the scaffold reads of one statistics entry.
type statBounds struct {
	Min, Max, Q01, Q99 json.RawMessage
}

var pluginName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// pluginNew is `gr00tgw plugin new NAME`: it writes embodiments/NAME/ (a
// pdk.Table plugin whose contract is the checkpoint's for the tag, its
// manifest, a test, fixture cases with the tag's side-file entries, and a
// demo observation) ready for `make plugins` and `plugin verify`.
func pluginNew(w io.Writer, args []string) error {
	fs := newFlags("plugin new", "NAME [--tag TAG] [--weights-dir DIR] [--dir DIR] [--version V]",
		"Writes DIR/NAME/ (default embodiments/NAME): a pdk.Table plugin whose contract is\nthe checkpoint's for TAG, its plugin.yaml, a test, starter fixture cases and a\ndemo observation, ready for `make plugins` and `gr00tgw plugin verify`.\nNAME: lower-case letters, digits and _.")
	tag := fs.String("tag", "", "embodiment tag (default: NAME); the checkpoint must describe it")
	weights := fs.String("weights-dir", "", "checkpoint whose contract the plugin implements (default: the embedded tiny checkpoint)")
	dir := fs.String("dir", "embodiments", "parent directory of the new plugin package")
	version := fs.String("version", "0.1.0", "plugin version (semver)")
	frame := fs.String("frame", "256x256", "nominal camera frame WIDTHxHEIGHT")
	lmax := fs.Int("l-max", 51, "longest instruction in tokens")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 1 || !pluginName.MatchString(pos[0]) {
		return fmt.Errorf("%w: gr00tgw plugin new NAME [--tag TAG] [--weights-dir DIR] [--dir DIR] (NAME: lower-case letters, digits, _), got %q", errUsage, pos)
	}
	fw, fh, err := parseFrame(*frame)
	if err != nil {
		return fmt.Errorf("%w: --frame: %v", errUsage, err)
	}
	if *weights == "" {
		if *weights, err = assets.Path(assets.CheckpointDir); err != nil {
			return err
		}
	}
	if *tag == "" {
		*tag = pos[0]
	}
	s, err := newScaffold(pos[0], *version, *tag, *weights, fw, fh, *lmax)
	if err != nil {
		return err
	}
	out := filepath.Join(*dir, pos[0])
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists", out)
	}
	root, rel, err := inCheckout(out)
	if err != nil {
		return err
	}
	s.Rel, s.Pack = rel, "make plugins"
	if filepath.Dir(rel) != "embodiments" { // make plugins packs embodiments/* only
		s.Pack = "go run ./plugins/cmd/gwplugin-pack -o build/plugins ./" + rel
	}
	if err := s.write(out); err != nil {
		_ = os.RemoveAll(out)
		return err
	}
	fmt.Fprintf(w, "wrote %s: plugin %s %s for embodiment %s (slot %d, %d cameras, %d state groups, %d action groups, horizon %d)\n",
		out, s.Name, s.Version, s.Tag, s.Desc.ProjectorSlot, len(s.Desc.Cameras), len(s.Desc.State), len(s.Desc.Actions), s.Desc.ActionHorizon)
	cd := ""
	if wd, err := os.Getwd(); err != nil || !sameDir(wd, root) {
		cd = "cd " + root + " && "
	}
	fmt.Fprintf(w, "next: %s%s && bin/gr00tgw plugin verify build/plugins/%s/%s.wasm --cases %s\n", cd, s.Pack, s.Name, s.Name, filepath.Join(rel, "testdata", "cases"))
	return nil
}

// gr00tgwModule is the module line of the checkout's go.mod.
const gr00tgwModule = "module github.com/gr00tgw/gr00tgw"

// inCheckout returns the gr00tgw checkout that holds dir (the directory
// with the module's go.mod above it) and dir relative to it. A plugin
// package builds against the checkout's PDK and is packed by its tools, so
// a directory outside any checkout is refused with the reason.
func inCheckout(dir string) (root, rel string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if first, _, _ := strings.Cut(string(b), "\n"); strings.TrimSpace(first) == gr00tgwModule {
				rel, err := filepath.Rel(d, abs)
				return d, rel, err
			}
		}
		if filepath.Dir(d) == d {
			return "", "", fmt.Errorf("%w: --dir %s is outside a gr00tgw checkout (no go.mod of %s above it): a plugin package builds against the checkout's PDK and is packed by its tools; write it inside the checkout (the default, embodiments/, is packed by make plugins)",
				errUsage, filepath.Dir(abs), strings.TrimPrefix(gr00tgwModule, "module "))
		}
	}
}

func sameDir(a, b string) bool {
	ia, err1 := os.Stat(a)
	ib, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ia, ib)
}

func parseFrame(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(s, "x")
	if ok {
		w, err = strconv.Atoi(a)
		if err == nil {
			h, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || w < 64 || h < 64 || w > 4096 || h > 4096 {
		return 0, 0, fmt.Errorf("%q: want WIDTHxHEIGHT with sides in [64, 4096]", s)
	}
	return w, h, nil
}

// newScaffold reads the checkpoint's contract for tag: embodiment_id.json
// (slot), processor_config.json (cameras, frames, keys, representations,
// horizon, language key, image chain) and statistics.json (widths).
func newScaffold(name, version, tag, weights string, fw, fh, lmax int) (*scaffold, error) {
	need := fmt.Sprintf("a new embodiment tag needs three checkpoint entries: %s[%q] (projector slot), "+
		"processor_config.json processor_kwargs.modality_configs[%q] (the contract) and %s[%q] (normalisation bounds); "+
		"a checkpoint fine-tuned on the robot carries them", model.EmbodimentIDsFile, tag, tag, model.StatisticsFile, tag)
	ids, err := model.LoadEmbodimentIDs(weights)
	if err != nil {
		return nil, err
	}
	slot, err := ids.Slot(tag)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w; %s", weights, err, need)
	}
	pc, err := processor.LoadConfig(filepath.Join(weights, "processor_config.json"), tag)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w; %s", weights, err, need)
	}
	raw, err := os.ReadFile(filepath.Join(weights, model.StatisticsFile))
	if err != nil {
		return nil, err
	}
	var all map[string]map[string]map[string]statBounds
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", model.StatisticsFile, err)
	}
	shape, err := model.ParseStatisticsShape(raw)
	if err != nil {
		return nil, err
	}
	st, ok := shape[tag]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: %s has no entry for %s; %s", weights, model.StatisticsFile, tag, need)
	}
	mcfg, err := model.LoadConfig(weights)
	if err != nil {
		return nil, err
	}
	sz, err := pc.Chain.Sizes(fw, fh)
	if err != nil {
		return nil, fmt.Errorf("a %dx%d frame under the checkpoint's image chain: %w", fw, fh, err)
	}
	g := sz.Grid
	merge := max(pc.Chain.MergeSize, 1)
	r := float64(fw) / float64(fh)
	d := abi.Description{
		Name: name, Version: version, ABI: abi.Version, Embodiment: tag, ProjectorSlot: slot,
		ActionHorizon: pc.ActionHorizon, MaxStateDim: mcfg.MaxStateDim, MaxActionDim: mcfg.MaxActionDim,
		Language: abi.Language{MinChars: 1, MaxChars: 2000},
		Layout: abi.Layout{
			Name: name, VitGridTHW: [3]int{g.T, g.H, g.W}, TokensPerImage: g.T * g.H * g.W / (merge * merge), LMax: lmax,
			FrameAspect: [2]float64{round3(r * 0.94), round3(r * 1.06)}, FrameSide: [2]int{64, 4096},
		},
	}
	if len(pc.LanguageKeys) > 0 {
		d.Language.Key = pc.LanguageKeys[0]
	}
	for _, c := range pc.Cameras {
		d.Cameras = append(d.Cameras, abi.Camera{Key: c, DeltaIndices: pc.VideoDeltaIndices, Height: fh, Width: fw})
		for _, t := range pc.VideoDeltaIndices {
			d.Layout.FrameOrder = append(d.Layout.FrameOrder, fmt.Sprintf("%s@%d", c, t))
		}
	}
	for _, k := range pc.StateKeys {
		w, ok := st["state"][k]
		if !ok {
			return nil, fmt.Errorf("%s %s: no state.%s", model.StatisticsFile, tag, k)
		}
		d.State = append(d.State, abi.StateGroup{Key: k, Dim: w, DeltaIndices: pc.StateDeltaIndices})
	}
	for i, k := range pc.ActionKeys {
		ac := pc.ActionConfigs[i]
		if ac.Type != "NON_EEF" || ac.Format != "DEFAULT" || ac.Rep == "DELTA" {
			return nil, fmt.Errorf("action %s is %s/%s/%s: the scaffold's pdk.Table decodes NON_EEF/DEFAULT groups (absolute or relative); "+
				"an end-effector group needs SE(3) composition of its own (start from embodiments/droid)", k, ac.Rep, ac.Type, ac.Format)
		}
		w, ok := st["action"][k]
		if !ok {
			return nil, fmt.Errorf("%s %s: no action.%s", model.StatisticsFile, tag, k)
		}
		ag := abi.ActionGroup{Key: k, Dim: w, Rep: strings.ToLower(ac.Rep), Type: abi.TypeNonEEF, Format: abi.FormatDefault}
		if ac.Rep == "RELATIVE" {
			ag.StateKey = ac.StateKey
		}
		d.Actions = append(d.Actions, ag)
	}
	if len(pc.SinCosStateKeys) > 0 || len(pc.MeanStdStateKeys) > 0 {
		return nil, fmt.Errorf("processor_config.json encodes state keys with sin/cos or mean/std; the plugin contract has min/max normalisation only")
	}
	return &scaffold{Name: name, Version: version, Tag: tag, Checkpoint: weights, Desc: d, pc: pc, stats: all[tag]}, nil
}

func round3(x float64) float64 { return float64(int(x*1000+0.5)) / 1000 }

// write creates the plugin package in dir.
func (s *scaffold) write(dir string) error {
	files := map[string][]byte{}
	src, err := s.mainGo()
	if err != nil {
		return err
	}
	files["main.go"] = src
	files["main_test.go"] = []byte(mainTestGo)
	files[ManifestTemplateName] = []byte(fmt.Sprintf("# Manifest template for the %s plugin: gwplugin-pack fills sha256 and the\n# version from the module's Describe (Version in main.go: the one place to bump it).\nname: %s\nabi: %d\nsha256: \"\"\nembodiments: [%s]\nlimits:\n  max_pages: 512\n  timeout_ms: 100\n  pool_size: 4\n",
		s.Name, s.Name, abi.Version, s.Tag))
	cases, err := s.cases()
	if err != nil {
		return err
	}
	for name, b := range cases {
		files[filepath.Join("testdata", "cases", name)] = b
	}
	demo, err := s.demo()
	if err != nil {
		return err
	}
	files[filepath.Join("testdata", "demo", "request.json")] = demo
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ManifestTemplateName is the plugin package's manifest template.
const ManifestTemplateName = "plugin.yaml"

var mainTmpl = template.Must(template.New("main").Funcs(template.FuncMap{"q": strconv.Quote, "ints": goInts}).Parse(`// Command {{.Name}} is the gwabi v1 plugin for embodiment {{.Tag}} (projector
// slot {{.Desc.ProjectorSlot}}), scaffolded by ` + "`gr00tgw plugin new`" + ` from the contract the
// checkpoint gives the tag (processor_config.json, statistics.json,
// embodiment_id.json).
//
// It is a pdk.Table: Pre validates the observation against Describe and
// min/max-normalises the state; Post un-normalises each action group
// (absolute, or relative to its state group). Edit Describe only together
// with the checkpoint: the gateway refuses a plugin whose contract
// disagrees with it. For decoding a Table cannot express, implement
// pdk.Plugin yourself (embodiments/droid is a complete example).
//
// Build and check, from the checkout's root:
//
//	{{.Pack}}
//	bin/gr00tgw plugin verify build/plugins/{{.Name}}/{{.Name}}.wasm --cases {{.Rel}}/testdata/cases
package main

import (
	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

func init() { pdk.Register(pdk.NewTable(Describe())) }

func main() {}

// Describe is the plugin's contract for {{.Tag}}.
func Describe() abi.Description {
	return abi.Description{
		Name: {{q .Name}}, Version: {{q .Version}}, ABI: abi.Version,
		Embodiment: {{q .Tag}}, ProjectorSlot: {{.Desc.ProjectorSlot}},
		Cameras: []abi.Camera{
{{- range .Desc.Cameras}}
			{Key: {{q .Key}}, DeltaIndices: {{ints .DeltaIndices}}, Width: {{.Width}}, Height: {{.Height}}},
{{- end}}
		},
		State: []abi.StateGroup{
{{- range .Desc.State}}
			{Key: {{q .Key}}, Dim: {{.Dim}}, DeltaIndices: {{ints .DeltaIndices}}},
{{- end}}
		},
		Actions: []abi.ActionGroup{
{{- range .Desc.Actions}}
			{Key: {{q .Key}}, Dim: {{.Dim}}, Rep: {{if eq .Rep "relative"}}abi.RepRelative{{else}}abi.RepAbsolute{{end}}, Type: abi.TypeNonEEF, Format: abi.FormatDefault{{if .StateKey}}, StateKey: {{q .StateKey}}{{end}}},
{{- end}}
		},
		Language:      abi.Language{Key: {{q .Desc.Language.Key}}, MinChars: 1, MaxChars: 2000},
		ActionHorizon: {{.Desc.ActionHorizon}}, MaxStateDim: {{.Desc.MaxStateDim}}, MaxActionDim: {{.Desc.MaxActionDim}},
		Layout: abi.Layout{
			Name: {{q .Desc.Layout.Name}},
			// A {{(index .Desc.Cameras 0).Width}}x{{(index .Desc.Cameras 0).Height}} frame under the checkpoint's image chain.
			VitGridTHW:     [3]int{ {{- index .Desc.Layout.VitGridTHW 0}}, {{index .Desc.Layout.VitGridTHW 1}}, {{index .Desc.Layout.VitGridTHW 2 -}} },
			TokensPerImage: {{.Desc.Layout.TokensPerImage}},
			LMax:           {{.Desc.Layout.LMax}},
			FrameOrder:     []string{ {{- range $i, $f := .Desc.Layout.FrameOrder}}{{if $i}}, {{end}}{{q $f}}{{end -}} },
			FrameAspect:    [2]float64{ {{- index .Desc.Layout.FrameAspect 0}}, {{index .Desc.Layout.FrameAspect 1 -}} },
			FrameSide:      [2]int{ {{- index .Desc.Layout.FrameSide 0}}, {{index .Desc.Layout.FrameSide 1 -}} },
		},
	}
}
`))

func goInts(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.Itoa(x)
	}
	return "[]int{" + strings.Join(parts, ", ") + "}"
}

func (s *scaffold) mainGo() ([]byte, error) {
	if len(s.Desc.Cameras) == 0 {
		return nil, errors.New("the contract has no camera")
	}
	var b bytes.Buffer
	if err := mainTmpl.Execute(&b, s); err != nil {
		return nil, err
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated main.go: %w\n%s", err, b.Bytes())
	}
	return src, nil
}

const mainTestGo = `package main

import (
	"context"
	"testing"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// TestCases builds the plugin to wasm and runs testdata/cases under the
// production host, with the checkpoint entries of testdata/cases.
func TestCases(t *testing.T) {
	ck, err := plugins.ReadCheckpoint("testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	p := plugintest.MustOpen(t, plugintest.Guest{Dir: "."}, plugins.WithCheckpoint(ck))
	cases, err := plugintest.LoadCases("testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if r := c.Run(context.Background(), p); r.Err != nil {
			t.Errorf("%s (%s): %v", r.Name, r.File, r.Err)
		}
	}
}
`

// midState is every state group's mid, by key: a state the plugin's
// bounds accept.
func (s *scaffold) midState() (map[string][]float64, error) {
	state := map[string][]float64{}
	for _, g := range s.Desc.State {
		m, err := s.mid("state", g.Key, 0)
		if err != nil {
			return nil, err
		}
		state[g.Key] = m
	}
	return state, nil
}

// mid is the midpoint of the bounds the plugin normalises with (q01/q99
// under use_percentiles, else min/max), per column; min/max for
// relative_action. step picks a row of a per-step array.
func (s *scaffold) mid(modality, key string, step int) ([]float64, error) {
	b, ok := s.stats[modality][key]
	if !ok {
		return nil, fmt.Errorf("%s: no %s.%s", model.StatisticsFile, modality, key)
	}
	lo, hi := b.Min, b.Max
	if s.pc.UsePercentiles && modality != "relative_action" {
		lo, hi = b.Q01, b.Q99
	}
	row := func(raw json.RawMessage) ([]float64, error) {
		var flat []float64
		if json.Unmarshal(raw, &flat) == nil {
			return flat, nil
		}
		var nested [][]float64
		if err := json.Unmarshal(raw, &nested); err != nil || step >= len(nested) {
			return nil, fmt.Errorf("%s %s.%s: unusable bounds", model.StatisticsFile, modality, key)
		}
		return nested[step], nil
	}
	l, err := row(lo)
	if err != nil {
		return nil, err
	}
	h, err := row(hi)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(l))
	for i := range l {
		out[i] = float64(float32((l[i] + h[i]) / 2))
	}
	return out, nil
}

// cases writes the starter fixtures: the state at the midpoint of its
// bounds normalises to 0; a zero action chunk decodes to the midpoint of
// the action bounds (plus the state, for relative groups); a missing
// state group is refused naming it. The tag's checkpoint entries go
// beside them, so the cases run against any checkpoint.
func (s *scaffold) cases() (map[string][]byte, error) {
	cams := map[string]map[string]int{}
	for _, c := range s.Desc.Cameras {
		cams[c.Key] = map[string]int{"frames": len(c.DeltaIndices), "height": c.Height, "width": c.Width}
	}
	state, err := s.midState()
	if err != nil {
		return nil, err
	}
	in := map[string]any{"embodiment": s.Tag, "instruction": "pick up the object", "cameras": cams, "state": state}
	out := map[string][]byte{}
	put := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", " ")
		out[name] = append(b, '\n')
		return err
	}
	if err := put("00_pre_midpoint.json", map[string]any{"name": "state at the midpoint of its bounds", "stage": "pre", "input": in,
		"want": map[string]any{"state": make([]float64, s.Desc.MaxStateDim), "tolerance": 1e-6}}); err != nil {
		return nil, err
	}
	acts := map[string][][]float64{}
	for _, a := range s.Desc.Actions {
		rows := make([][]float64, s.Desc.ActionHorizon)
		for k := range rows {
			if a.Rep == abi.RepRelative {
				m, err := s.mid("relative_action", a.Key, k)
				if err != nil {
					return nil, err
				}
				row := make([]float64, a.Dim)
				for j := range row {
					row[j] = float64(float32(state[a.StateKey][j])) + m[j]
				}
				rows[k] = row
			} else {
				m, err := s.mid("action", a.Key, 0)
				if err != nil {
					return nil, err
				}
				rows[k] = m
			}
		}
		acts[a.Key] = rows
	}
	pred := make([][]float32, max(s.Desc.ActionHorizon, s.pc.MaxActionHorizon))
	for i := range pred {
		pred[i] = make([]float32, s.Desc.MaxActionDim)
	}
	post := map[string]any{"embodiment": s.Tag, "state": state, "action_pred": pred}
	if err := put("01_post_zero_chunk.json", map[string]any{"name": "a zero chunk decodes to the bounds' midpoints", "stage": "post", "input": post,
		"want": map[string]any{"actions": acts, "tolerance": 1e-4}}); err != nil {
		return nil, err
	}
	missing := map[string][]float64{}
	for k, v := range state {
		missing[k] = v
	}
	gone := s.Desc.State[len(s.Desc.State)-1].Key
	delete(missing, gone)
	bad := map[string]any{"embodiment": s.Tag, "instruction": "pick up the object", "cameras": cams, "state": missing}
	if err := put("02_pre_missing_state.json", map[string]any{"name": "a missing state group is refused", "stage": "pre", "input": bad,
		"want": map[string]any{"error": map[string]string{"code": abi.CodeInvalidState, "field": "state." + gone}}}); err != nil {
		return nil, err
	}
	// The tag's checkpoint entries, for plugin verify and the test.
	raw, err := json.MarshalIndent(map[string]any{s.Tag: s.stats}, "", " ")
	if err != nil {
		return nil, err
	}
	out["statistics.json"] = append(raw, '\n')
	pcRaw, err := os.ReadFile(filepath.Join(s.Checkpoint, "processor_config.json"))
	if err != nil {
		return nil, err
	}
	var pc map[string]any
	if err := json.Unmarshal(pcRaw, &pc); err != nil {
		return nil, err
	}
	if kw, ok := pc["processor_kwargs"].(map[string]any); ok {
		if mc, ok := kw["modality_configs"].(map[string]any); ok {
			kw["modality_configs"] = map[string]any{s.Tag: mc[s.Tag]}
		}
	}
	if raw, err = json.MarshalIndent(pc, "", " "); err != nil {
		return nil, err
	}
	out["processor_config.json"] = append(raw, '\n')
	return out, nil
}

// demo writes a demo observation for warm-up (the gateway checks it for
// finiteness and repeat determinism until a golden for a checkpoint
// exists): synthetic frames of the nominal size, the state at its
// midpoints, an instruction and a seed.
func (s *scaffold) demo() ([]byte, error) {
	images := map[string][]string{}
	for ci, c := range s.Desc.Cameras {
		for t := range c.DeltaIndices {
			img := image.NewRGBA(image.Rect(0, 0, c.Width, c.Height))
			for y := 0; y < c.Height; y++ {
				for x := 0; x < c.Width; x++ {
					img.Set(x, y, color.RGBA{uint8(x * 255 / c.Width), uint8(y * 255 / c.Height), uint8(40*ci + 20*t), 255})
				}
			}
			var b bytes.Buffer
			if err := png.Encode(&b, img); err != nil {
				return nil, err
			}
			images[c.Key] = append(images[c.Key], base64.StdEncoding.EncodeToString(b.Bytes()))
		}
	}
	state, err := s.midState()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(map[string]any{"images": images, "state": state, "instruction": "pick up the object",
		"embodiment": s.Tag, "seed": 1}, "", " ")
	return append(b, '\n'), err
}
