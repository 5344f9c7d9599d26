package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/binding"
	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/cpu"
	"github.com/gr00tgw/gr00tgw/internal/inputsdir"
	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/service"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run the model offline on one /predict body and write action_pred.npy, timing.json (and --taps)",
		run:     runCmd,
	})
}

// defaultEmbodiment is the DROID tag (projector slot 24).
const defaultEmbodiment = "oxe_droid_relative_eef_relative_joint"

// runRequest is the part of a /predict body `gr00tgw run` reads itself; the
// frames and the instruction go to the host pipeline.
type runRequest struct {
	Images map[string][]string  `json:"images"`
	State  map[string][]float64 `json:"state"`
	instructionFields
	Embodiment string      `json:"embodiment"`
	Noise      [][]float32 `json:"noise"`
	Seed       *uint64     `json:"seed"`
}

type runFlags struct {
	weights, request, inputs, out, noise, state, embodiment, policy, plugins string
	seed                                                                     int64
	seedSet, taps                                                            bool
	threads                                                                  int
}

func runCmd(ctx context.Context, args []string) error {
	var f runFlags
	fs := newFlags("run", "--out DIR (--request REQ.json | --inputs DIR) [flags]",
		"Runs the model offline on one /predict body (or on encoded inputs) with the CPU\nbackend and writes action_pred.npy, action_pred_valid.npy, actions.json (the\nplugin's decoded actions), timing.json and facts.json; --taps adds every\nintermediate tensor.")
	fs.StringVar(&f.weights, "weights-dir", "", "checkpoint directory (default: the module's testdata/n17-tiny)")
	fs.StringVar(&f.request, "request", "", "a /predict JSON body: frames + instruction go through core/processor, the state through the embodiment plugin's pre, noise/seed/embodiment are honoured")
	fs.StringVar(&f.inputs, "inputs", "", "instead of the request's frames+instruction: a directory of encoded model inputs: pixel_values.npy, image_grid_thw.npy, input_ids.npy, attention_mask.npy, position_ids.npy [, state_normalized.npy, noise.npy]")
	fs.StringVar(&f.out, "out", "", "output directory (created)")
	fs.StringVar(&f.noise, "noise", "", "initial noise .npy [40,132] or [1,40,132]")
	fs.Int64Var(&f.seed, "seed", 0, "seed for torch.randn-compatible noise (when no --noise)")
	fs.StringVar(&f.state, "state", "", "normalised state .npy [132] (overrides the request's raw state)")
	fs.StringVar(&f.embodiment, "embodiment", "", "embodiment tag (default: the request's, else "+defaultEmbodiment+"), or a projector slot number: "+
		"the model then runs that slot, with the processor config, statistics and plugin of the request's embodiment tag, else of the one tag "+
		"embodiment_id.json puts on that slot; a slot that no tag or several tags share is refused without a tag (the choice is printed)")
	fs.StringVar(&f.policy, "policy", "", "dtype policy: "+strings.Join(cpu.Policies(), ", ")+" (default "+cpu.DefaultPolicy+"; mixed_dit runs the DiT as the CPU emulation of the bfp8_b megakernel)")
	fs.IntVar(&f.threads, "threads", 0, "cores to use (0 = all)")
	fs.StringVar(&f.plugins, "plugins-dir", "", "embodiment plugin directory for actions.json (default: the checkout's build/plugins; \"-\" skips decoding)")
	fs.BoolVar(&f.taps, "taps", false, "also write every intermediate tensor as <name>.npy")
	deprecatedAlias(fs, "weights", "weights-dir")
	deprecatedAlias(fs, "plugins", "plugins-dir")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	f.seedSet = fs.Changed("seed")
	if f.out == "" {
		return fmt.Errorf("%w: --out is required", errUsage)
	}
	if f.request == "" && f.inputs == "" {
		return fmt.Errorf("%w: need --request REQ.json and/or --inputs DIR", errUsage)
	}
	if f.weights == "" {
		w, err := defaultWeights()
		if err != nil {
			return err
		}
		f.weights = w
	}
	return runOffline(ctx, f)
}

// defaultWeights is the module's testdata/n17-tiny (found like the
// processor's default assets).
func defaultWeights() (string, error) {
	d, err := assets.Path(assets.CheckpointDir)
	if err != nil {
		return "", fmt.Errorf("%w: no --weights-dir: %w", errUsage, err)
	}
	return d, nil
}

func runOffline(ctx context.Context, f runFlags) error {
	timing := map[string]float64{}
	tStart := time.Now()

	var req runRequest
	if f.request != "" {
		b, err := os.ReadFile(f.request)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return fmt.Errorf("request[%s]: %w", f.request, err)
		}
	}
	// Embodiment: the tag whose processor config, statistics and plugin
	// are used, and the projector slot the model runs.
	tag, slot, note, err := resolveEmbodiment(f.weights, f.embodiment, req.Embodiment)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintf(os.Stderr, "gr00tgw run: %s\n", note)
	}
	in := &device.Inputs{EmbodimentID: slot}
	tPre := time.Now()
	switch {
	case f.inputs != "":
		if err := inputsdir.Read(in, f.inputs); err != nil {
			return err
		}
	case len(req.Images) == 0:
		return fmt.Errorf("%w: the request has no images (and no --inputs DIR)", errUsage)
	default:
		inst, err := req.instruction()
		if err != nil {
			return fmt.Errorf("request[%s]: %w", f.request, err)
		}
		if err := processRequest(in, f.weights, tag, req.Images, inst); err != nil {
			return err
		}
	}

	// The embodiment's plugin: its pre normalises the request's state and
	// its post decodes the actions, exactly as /predict runs them.
	emb, closeEmb, err := openRunPlugin(ctx, f, tag)
	if err != nil {
		return err
	}
	if closeEmb != nil {
		defer closeEmb(context.WithoutCancel(ctx))
	}

	// State: --state, else the request's raw state, else the inputs dir.
	switch {
	case f.state != "":
		s, err := inputsdir.ReadFloat32s(f.state)
		if err != nil {
			return err
		}
		in.State = s
	case len(req.State) > 0:
		if emb == nil {
			return fmt.Errorf("%w: the request's state is normalised by the embodiment's plugin: pass --plugins-dir (or --state)", errUsage)
		}
		s, err := pluginState(ctx, emb, tag, &req)
		if err != nil {
			return err
		}
		in.State = s
	}
	if in.State == nil {
		return fmt.Errorf("%w: no state: pass --state, a request with state, or state_normalized.npy in --inputs", errUsage)
	}
	timing["preprocess"] = ms(time.Since(tPre))

	// Noise: --noise, else --seed, else the request's noise/seed, else the
	// inputs dir's noise.npy, else seed 0.
	switch {
	case f.noise != "":
		n, err := inputsdir.ReadFloat32s(f.noise)
		if err != nil {
			return err
		}
		in.Noise = n
	case f.seedSet:
		in.Noise, in.Seed = nil, uint64(f.seed)
	case len(req.Noise) > 0:
		in.Noise = nil
		for _, row := range req.Noise {
			in.Noise = append(in.Noise, row...)
		}
	case req.Seed != nil:
		in.Noise, in.Seed = nil, *req.Seed
	}

	// load: open → ready (weights packed, stage plans built, the
	// backend's warm-up prediction done), with the resident set after it.
	tLoad := time.Now()
	be, err := cpu.Open(ctx, device.Options{WeightsDir: f.weights, Policy: f.policy, Threads: f.threads}, cpu.DefaultLayout)
	if err != nil {
		return err
	}
	defer be.Close()
	timing["load"] = ms(time.Since(tLoad))
	if w, ok := be.Facts().Extra["warmup_ms"].(float64); ok {
		timing["load_warmup"] = w // the part of load spent in the warm-up prediction
	}
	if rss, hwm, ok := procRSSMiB(); ok {
		timing["rss_after_load_mib"], timing["rss_peak_after_load_mib"] = rss, hwm
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	var tapErr error
	var tap cpu.Tap
	steps := map[string][][]float32{}
	stepShape := map[string][]int{}
	if f.taps {
		tap = func(name string, step int, shape []int, data []float32) {
			if tapErr != nil {
				return
			}
			if step >= 0 {
				steps[name] = append(steps[name], slices.Clone(data))
				stepShape[name] = slices.Clone(shape)
				return
			}
			if name == "action_pred" {
				return // written below from the result
			}
			tapErr = npy.WriteFile(filepath.Join(f.out, name+".npy"), goldenShape(name, shape), data)
		}
		if err := writeInputs(f.out, in); err != nil {
			return err
		}
	}
	res, err := be.PredictTaps(ctx, in, tap)
	if err != nil {
		return err
	}
	if tapErr != nil {
		return tapErr
	}
	for name, rows := range steps {
		var all []float32
		for _, r := range rows {
			all = append(all, r...)
		}
		if err := npy.WriteFile(filepath.Join(f.out, name+".npy"), append([]int{len(rows)}, stepShape[name]...), all); err != nil {
			return err
		}
	}
	for _, s := range res.Stages {
		timing[s.Name] = ms(s.Duration)
	}
	tDec := time.Now()
	valid, err := validActionDim(f.weights, tag, emb)
	if err != nil {
		return err
	}
	pv := make([]float32, 0, res.Horizon*valid)
	for r := 0; r < res.Horizon; r++ {
		pv = append(pv, res.ActionPred[r*res.ActionDim:r*res.ActionDim+valid]...)
	}
	if err := writeActions(f, emb, tag, req.State, res); err != nil {
		return err
	}
	timing["decode"] = ms(time.Since(tDec))
	if err := npy.WriteFile(filepath.Join(f.out, "action_pred.npy"), []int{res.Horizon, res.ActionDim}, res.ActionPred); err != nil {
		return err
	}
	if err := npy.WriteFile(filepath.Join(f.out, "action_pred_valid.npy"), []int{res.Horizon, valid}, pv); err != nil {
		return err
	}
	timing["total"] = ms(time.Since(tStart))
	if _, hwm, ok := procRSSMiB(); ok {
		timing["rss_peak_mib"] = hwm
	}
	tb, _ := json.MarshalIndent(timing, "", "  ")
	if err := os.WriteFile(filepath.Join(f.out, "timing.json"), append(tb, '\n'), 0o644); err != nil {
		return err
	}
	// facts.json: what served the run (policy; for mixed_dit the
	// megakernel's arena and core map under extra.stage).
	facts := be.Facts()
	fb, err := json.MarshalIndent(map[string]any{"backend": facts.Backend, "policy": facts.Policy,
		"stages": facts.Stages, "extra": facts.Extra}, "", "  ")
	if err != nil {
		return fmt.Errorf("facts: %w", err)
	}
	if err := os.WriteFile(filepath.Join(f.out, "facts.json"), append(fb, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (policy %s; vision %.1f ms, llm %.1f ms, adapter %.1f ms, denoise %.1f ms)\n", f.out,
		facts.Policy, timing["vision"], timing["llm"], timing["adapter"], timing["denoise"])
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// procRSSMiB reads the process's resident set (VmRSS) and its peak so far
// (VmHWM) from /proc/self/status, in MiB; ok is false where there is no
// /proc.
func procRSSMiB() (rss, hwm float64, ok bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	var n int
	for _, line := range strings.Split(string(b), "\n") {
		for key, dst := range map[string]*float64{"VmRSS:": &rss, "VmHWM:": &hwm} {
			if rest, found := strings.CutPrefix(line, key); found {
				f := strings.Fields(rest) // "123456 kB"
				if len(f) == 2 && f[1] == "kB" {
					if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
						*dst = kb / 1024
						n++
					}
				}
			}
		}
	}
	return rss, hwm, n == 2
}

// goldenShape adds the batch dimension the MANIFEST's files carry.
func goldenShape(name string, shape []int) []int {
	if strings.HasPrefix(name, "llm_") || name == "backbone_features" || name == "vlln_out" ||
		name == "adapter_out" || name == "state_features" {
		return append([]int{1}, shape...)
	}
	return shape
}

// writeInputs writes the encoded model inputs under the goldens' file names
// (testdata/n17-tiny/caseA).
func writeInputs(dir string, in *device.Inputs) error {
	s := len(in.InputIDs)
	wide := func(v []int32) []int64 {
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out
	}
	grid := make([]int64, 0, 3*len(in.ImageGridTHW))
	for _, g := range in.ImageGridTHW {
		grid = append(grid, int64(g[0]), int64(g[1]), int64(g[2]))
	}
	mask := in.AttentionMask
	if mask == nil {
		mask = make([]int32, s)
		for i := range mask {
			mask[i] = 1
		}
	}
	w := []struct {
		name  string
		shape []int
		data  any
	}{
		{"pixel_values", []int{in.PixelRows, in.PixelCols}, in.PixelValues},
		{"image_grid_thw", []int{len(in.ImageGridTHW), 3}, grid},
		{"input_ids", []int{1, s}, wide(in.InputIDs)},
		{"attention_mask", []int{1, s}, wide(mask)},
		{"position_ids", []int{3, 1, s}, wide(in.PositionIDs)},
		{"state_normalized", []int{1, 1, len(in.State)}, in.State},
	}
	if in.Noise != nil {
		w = append(w, struct {
			name  string
			shape []int
			data  any
		}{"noise", []int{1, len(in.Noise) / 132, 132}, in.Noise})
	}
	for _, x := range w {
		if err := npy.WriteFile(filepath.Join(dir, x.name+".npy"), x.shape, x.data); err != nil {
			return err
		}
	}
	return nil
}

// processRequest runs the host pipeline (core/processor with tag's
// processor config: frames → pixel_values and grids, instruction →
// input_ids, mRoPE ids).
func processRequest(in *device.Inputs, weights, tag string, images map[string][]string, instruction string) error {
	p, err := processor.Open(weights, tag, defaultTokenizer())
	if err != nil {
		return err
	}
	out, err := p.Process(&processor.Observation{Images: images, Instruction: instruction}, processor.Options{})
	if err != nil {
		return err
	}
	in.PixelValues, in.PixelRows, in.PixelCols = out.PixelValues, out.Rows, out.RowWidth
	in.ImageGridTHW = in.ImageGridTHW[:0]
	for _, g := range out.ImageGridTHW {
		in.ImageGridTHW = append(in.ImageGridTHW, [3]int{g.T, g.H, g.W})
	}
	narrow := func(v []int64) ([]int32, error) {
		o := make([]int32, len(v))
		for i, x := range v {
			if x < math.MinInt32 || x > math.MaxInt32 {
				return nil, fmt.Errorf("processor output value %d overflows int32", x)
			}
			o[i] = int32(x)
		}
		return o, nil
	}
	if in.InputIDs, err = narrow(out.InputIDs); err != nil {
		return err
	}
	if in.AttentionMask, err = narrow(out.AttentionMask); err != nil {
		return err
	}
	if in.PositionIDs, err = narrow(out.PositionIDs); err != nil {
		return err
	}
	return nil
}

// resolveEmbodiment is the embodiment `run` serves, from --embodiment
// (flag) and the request's embodiment (reqTag): tag names the processor
// config, statistics and plugin; slot is the projector slot the model runs.
// A tag maps to its slot with the checkpoint's embodiment_id.json. A
// number is a slot: the tag is then reqTag, else the one tag the checkpoint
// puts on that slot, else (no tag, or several) the run is refused. note
// says what was chosen when a number was given.
func resolveEmbodiment(weights, flag, reqTag string) (tag string, slot int, note string, err error) {
	ids, err := model.LoadEmbodimentIDs(weights)
	if err != nil {
		return "", 0, "", fmt.Errorf("embodiment: %w", err)
	}
	n, numErr := strconv.Atoi(flag)
	if flag == "" || numErr != nil {
		tag = cmp.Or(flag, reqTag, defaultEmbodiment)
		if ids == nil {
			return "", 0, "", fmt.Errorf("embodiment[%s]: the checkpoint has no %s", tag, model.EmbodimentIDsFile)
		}
		slot, err := ids.Slot(tag)
		if err != nil {
			return "", 0, "", fmt.Errorf("embodiment[%s]: %w", tag, err)
		}
		return tag, slot, "", nil
	}
	if n < 0 {
		return "", 0, "", fmt.Errorf("%w: --embodiment %d: a projector slot is not negative", errUsage, n)
	}
	if reqTag != "" {
		own := "not in " + model.EmbodimentIDsFile
		if s, ok := ids[reqTag]; ok {
			own = fmt.Sprintf("its own slot is %d", s)
		}
		return reqTag, n, fmt.Sprintf("embodiment: projector slot %d (--embodiment) with the processor config, statistics and plugin of the request's embodiment %s (%s)", n, reqTag, own), nil
	}
	var on []string
	for t, s := range ids {
		if s == n {
			on = append(on, t)
		}
	}
	sort.Strings(on)
	switch len(on) {
	case 1:
		return on[0], n, fmt.Sprintf("embodiment: projector slot %d (--embodiment) with the processor config, statistics and plugin of %s, the one tag on that slot in %s", n, on[0], model.EmbodimentIDsFile), nil
	case 0:
		return "", 0, "", fmt.Errorf("%w: --embodiment %d: no tag has projector slot %d in the checkpoint's %s, so there are no statistics or processor config to use; pass --embodiment TAG (or a request with \"embodiment\")", errUsage, n, n, model.EmbodimentIDsFile)
	default:
		return "", 0, "", fmt.Errorf("%w: --embodiment %d: projector slot %d is shared by %s in the checkpoint's %s; name the tag whose statistics and processor config to use with --embodiment TAG (or the request's \"embodiment\")", errUsage, n, n, strings.Join(on, ", "), model.EmbodimentIDsFile)
	}
}

// pluginState normalises the request's raw state with the embodiment's
// plugin pre. The plugin also checks the cameras, so it sees the request's
// frames (their sizes, read from the encoded headers).
func pluginState(ctx context.Context, emb service.Embodiment, tag string, req *runRequest) ([]float32, error) {
	inst, err := req.instruction()
	if err != nil {
		return nil, err
	}
	var cams []service.CameraImages
	for _, key := range emb.Describe().Cameras {
		ci := service.CameraImages{Key: key, Frames: len(req.Images[key])}
		if len(req.Images[key]) > 0 {
			b, err := base64.StdEncoding.DecodeString(req.Images[key][0])
			if err != nil {
				return nil, fmt.Errorf("request: images.%s[0]: %w", key, err)
			}
			if _, w, h, err := image.Config(b); err == nil {
				ci.Width, ci.Height = w, h
			}
		}
		cams = append(cams, ci)
	}
	st, err := emb.Pre(ctx, &service.PreInput{RequestID: "run", Embodiment: tag, Cameras: cams, State: req.State,
		StateDtype: "float32", Instruction: inst})
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return st, nil
}

// validActionDim is the number of real action dimensions of tag: the sum of
// the plugin's action group widths, or without a plugin, of the
// checkpoint's (processor_config.json keys, statistics.json widths).
func validActionDim(weights, tag string, emb service.Embodiment) (int, error) {
	n := 0
	if emb != nil {
		for _, g := range emb.Describe().ActionGroups {
			n += g.Dim
		}
		return n, nil
	}
	pc, err := processor.LoadConfig(filepath.Join(weights, "processor_config.json"), tag)
	if err != nil {
		return 0, err
	}
	shape, err := model.LoadStatisticsShape(weights)
	if err != nil {
		return 0, err
	}
	for _, k := range pc.ActionKeys {
		w, ok := shape[tag]["action"][k]
		if !ok {
			return 0, fmt.Errorf("statistics.json: action[%s] missing for embodiment[%s]", k, tag)
		}
		n += w
	}
	return n, nil
}

// sortedKeys returns m's keys in order (nil for an empty m).
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// openRunPlugin opens tag's plugin from --plugins-dir (default: the
// checkout's build/plugins). It returns no plugin, and says so, when
// --plugins-dir is "-" or the default directory is missing (plugins not
// built: `make plugins`); an explicit directory that lacks the plugin is
// an error.
func openRunPlugin(ctx context.Context, f runFlags, tag string) (service.Embodiment, func(context.Context) error, error) {
	if f.plugins == "-" {
		return nil, nil, nil
	}
	dir := f.plugins
	if dir == "" {
		d, err := assets.Path(assets.PluginsDir)
		if err == nil {
			_, err = os.Stat(d)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gr00tgw run: no plugins (%v): no actions.json, and the request's state cannot be normalised (run `make plugins`)\n", err)
			return nil, nil, nil
		}
		dir = d
	}
	ck, err := plugins.ReadCheckpoint(f.weights)
	if err != nil {
		return nil, nil, err
	}
	emb, closeEmb, err := binding.OpenEmbodiment(ctx, dir, tag, plugins.WithCheckpoint(ck), plugins.WithCacheDir(""))
	if err != nil {
		return nil, nil, fmt.Errorf("plugins-dir: %w", err)
	}
	return emb, closeEmb, nil
}

// writeActions decodes the normalised chunk into physical actions with the
// embodiment's plugin (its post stage, exactly as /predict does) and writes
// actions.json in the /predict response's "actions" shape. It is skipped
// when the request carries no raw state or there is no plugin.
func writeActions(f runFlags, emb service.Embodiment, tag string, state map[string][]float64, res *device.Result) error {
	if len(state) == 0 || emb == nil {
		return nil
	}
	acts, err := emb.Post(context.Background(), &service.PostInput{ActionPred: res.ActionPred, Horizon: res.Horizon, Dim: res.ActionDim, State: state, StateDtype: "float32"})
	if err != nil {
		return fmt.Errorf("actions: %w", err)
	}
	info := emb.Describe()
	out := map[string][][]float32{}
	for _, g := range info.ActionGroups {
		v := acts[g.Key]
		if g.Dim <= 0 || len(v)%g.Dim != 0 {
			return fmt.Errorf("actions: group[%s] has %d values, not a multiple of %d", g.Key, len(v), g.Dim)
		}
		rows := make([][]float32, 0, len(v)/g.Dim)
		for i := 0; i < len(v); i += g.Dim {
			rows = append(rows, v[i:i+g.Dim])
		}
		out[g.Key] = rows
	}
	b, err := json.MarshalIndent(map[string]any{"actions": out, "embodiment": tag}, "", " ")
	if err != nil {
		return fmt.Errorf("actions: %w", err)
	}
	return os.WriteFile(filepath.Join(f.out, "actions.json"), append(b, '\n'), 0o644)
}
