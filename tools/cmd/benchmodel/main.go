// Command benchmodel times a real-size ViT block, LLM decoder layer and DiT
// step of the Go CPU backend (tools/benchmodel) and, when Debian's
// PyTorch is installed, the same computations in torch
// (testdata/bench/torch_model.py), in one run, and prints Go ms, torch ms
// and their ratio per item. With -gemm it first runs the GEMM comparison
// (testdata/bench/compare.py); with -stages it then times one whole
// real-size predict stage by stage (vision, llm, adapter, denoise) on a
// real-size random checkpoint, Go's CPU backend beside
// testdata/bench/torch_stages.py, with both sides' load time, peak RSS and
// the action_pred agreement, then (-torch-bf16; by default where the CPU
// has AVX512_BF16 or AMX) the torch runner's bf16 path on the CPU beside
// the Go fp32 backend. Run it from the repository root (its paths,
// testdata/ included, are relative to the working directory; `make
// bench-model` builds it into bin/tools and runs all three):
//
//	(cd tools && go build -o ../bin/tools/ ./cmd/benchmodel)
//	bin/tools/benchmodel -gemm -stages -checkpoint build/n17-real
//
// Ratios are torch time ÷ Go time: above 1 the Go backend is faster. The
// cpu figures divide each side's process CPU time by its thread count (the
// time on dedicated cores; robust on a shared machine, but it undercounts
// torch when OpenBLAS threads spin). Best-of-reps everywhere.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
	"github.com/gr00tgw/gr00tgw/tools/benchmodel"
)

// torchBF16 is -torch-bf16: on, off or auto.
var torchBF16 string

type result struct {
	ms, cpuMs float64
}

func main() {
	reps := flag.Int("reps", 5, "timed repetitions per item (best-of)")
	gemm := flag.Bool("gemm", false, "first run the GEMM comparison (testdata/bench/compare.py)")
	python := flag.String("python", "/usr/bin/python3", "Python with torch for the reference timings ('' to skip torch)")
	only := flag.String("only", "", "comma-separated items: vit, llm, dit, stages (default: vit, llm, dit, and stages with -stages)")
	kernels := flag.String("kernels", "policy", "weight storage: policy (as device/cpu's fp32 policy: tensor.DefaultBF16Weights in every stage), split (fp32 backbone, bf16 action head) or fp32 (tensor.Default everywhere); all three give bit-identical results")
	writeCk := flag.String("write-checkpoint", "", "write a real-size random checkpoint (real tensor names and shapes, BF16, ~6.3 GB) to this directory and exit")
	stages := flag.Bool("stages", false, "after the block items, time one whole real-size predict stage by stage (Go CPU backend vs testdata/bench/torch_stages.py on the same -checkpoint and -inputs); writes the checkpoint first when -checkpoint holds none")
	ckpt := flag.String("checkpoint", "build/n17-real", "with -stages: the real-size checkpoint directory (written by -write-checkpoint if absent; ~6.3 GB)")
	inputs := flag.String("inputs", filepath.Join("testdata", "n17-tiny", "caseA"), "with -stages: encoded model inputs (pixel_values, image_grid_thw, input_ids, attention_mask, position_ids, state_normalized, noise .npy)")
	fp32Check := flag.Bool("fp32-check", false, "with -stages: also run the Go backend with fp32 weight storage everywhere (tensor.Default, no bf16 panels) and compare action_pred")
	torchOut := flag.String("torch-out", "", "with -stages: keep torch's action_pred.npy, backbone_features, adapter_out and vision_merger .npy in this directory (default: a temporary one)")
	loadReps := flag.Int("load-reps", 2, "with -stages: loads per side, each as a fresh process starts (Go: its heap returned to the OS first; torch: one process per load), best-of: the first load after other work pays for pages this VM has not touched yet, on either side")
	stageReps := flag.Int("stage-reps", 2, "with -stages: timed predicts per side (best-of, after one untimed)")
	cpuProfile := flag.String("cpuprofile", "", "write the Go side's CPU profile to this file (go tool pprof)")
	flag.StringVar(&torchBF16, "torch-bf16", "auto", "with -stages: also time the torch runner's bf16 path on the CPU (torch_stages.py --dtype bf16) beside the Go fp32 backend: on, off, or auto (on where the CPU has AVX512_BF16 or AMX; without them bf16 matmul is emulated and a real-size predict takes tens of minutes)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchmodel:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *writeCk != "" {
		t0 := time.Now()
		if err := benchmodel.WriteCheckpoint(*writeCk, filepath.Join("testdata", "n17-tiny")); err != nil {
			fmt.Fprintln(os.Stderr, "benchmodel:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s in %.1f s\n", *writeCk, time.Since(t0).Seconds())
		return
	}
	blocks, withStages, err := items(*only, *stages)
	if err == nil && (len(blocks) > 0 || *gemm) {
		err = run(*reps, *gemm, *python, blocks, *kernels)
	}
	if err == nil && withStages {
		// The block items' weights go back before the real-size checkpoint loads.
		runtime.GC()
		debug.FreeOSMemory()
		err = runStages(*ckpt, *inputs, *python, *torchOut, *loadReps, *stageReps, *fp32Check)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "benchmodel:", err)
		os.Exit(1)
	}
}

// items parses -only: the block items to run (vit, llm, dit; empty: all
// three) and whether the stage comparison runs (-stages, or "stages" in
// -only, which then names every item to run).
func items(only string, stages bool) (string, bool, error) {
	if only == "" {
		return "vit,llm,dit", stages, nil
	}
	var blocks []string
	withStages := false
	for _, w := range strings.Split(only, ",") {
		switch w {
		case "vit", "llm", "dit":
			blocks = append(blocks, w)
		case "stages":
			withStages = true
		default:
			return "", false, fmt.Errorf("-only %q: want a comma-separated list of vit, llm, dit, stages", only)
		}
	}
	return strings.Join(blocks, ","), withStages, nil
}

func run(reps int, gemm bool, python, only, kname string) error {
	// kb packs the backbone, kd the action head.
	var kb, kd tensor.Kernels
	switch kname {
	case "policy", "bf16":
		kb, kd = tensor.DefaultBF16Weights(), tensor.DefaultBF16Weights()
	case "split":
		kb, kd = tensor.Default(), tensor.DefaultBF16Weights()
	case "fp32":
		kb, kd = tensor.Default(), tensor.Default()
	default:
		return fmt.Errorf("-kernels %q: want policy, split or fp32", kname)
	}
	haveTorch := python != ""
	if haveTorch {
		if _, err := os.Stat(python); err != nil {
			fmt.Printf("# %s not found: Go timings only\n", python)
			haveTorch = false
		} else if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
			fmt.Printf("# %s cannot import torch: Go timings only\n", python)
			haveTorch = false
		}
	}
	if gemm {
		if haveTorch {
			v := tensor.Variants()[0].Name
			cmd := exec.Command(python, "testdata/bench/compare.py", "--count", "3", "--variants", v+","+v+"-bf16")
			cmd.Env = torchEnv(2)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("gemm comparison: %w", err)
			}
		} else {
			fmt.Println("# GEMM comparison needs torch: skipped (go test -bench=MatMul ./core/tensor/ for Go alone)")
		}
	}
	threads := float64(runtime.GOMAXPROCS(0))
	fmt.Printf("# go %s GOMAXPROCS=%d kernels=%s reps=%d\n", runtime.Version(), runtime.GOMAXPROCS(0), kname, reps)
	got := map[string]result{}
	flops := map[string]float64{}
	want := map[string]bool{}
	for _, w := range strings.Split(only, ",") {
		if w != "" {
			want[w] = true
		}
	}
	if want["vit"] || want["llm"] {
		if err := goBackbone(kb, reps, threads, want["vit"], want["llm"], got, flops); err != nil {
			return err
		}
	}
	if want["dit"] {
		if err := goDiT(kd, reps, threads, got, flops); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(got) {
		r := got[name]
		g := ""
		if f := flops[name]; f > 0 {
			g = fmt.Sprintf(" gflops=%.1f", f/r.ms/1e6)
		}
		fmt.Printf("go_model name=%s ms=%.2f cpu_ms=%.2f%s\n", name, r.ms, r.cpuMs, g)
	}
	if !haveTorch || len(got) == 0 {
		return nil
	}
	// Free the Go model before torch builds its own (the DiT is ~4.2 GB in torch).
	runtime.GC()
	debug.FreeOSMemory()
	tt, err := torchTimes(python, reps, only)
	if err != nil {
		return err
	}
	// Go's amortised per-step cost of a request: (K/V once + 4 steps) / 4,
	// against the reference's step that recomputes K/V and AdaLN.
	if s, ok := got["dit_step"]; ok {
		kv := got["dit_crosskv"]
		got["dit_step_upstream"] = result{s.ms + kv.ms/4, s.cpuMs + kv.cpuMs/4}
	}
	fmt.Printf("%-20s %10s %10s %7s | %10s %10s %7s\n", "item", "go ms", "torch ms", "ratio", "go cpu", "torch cpu", "ratio")
	for _, name := range sortedKeys(got) {
		g, t := got[name], tt[name]
		fmt.Printf("%-20s %10.2f %10.2f %7.2f | %10.2f %10.2f %7.2f\n", name, g.ms, t.ms, div(t.ms, g.ms), g.cpuMs, t.cpuMs, div(t.cpuMs, g.cpuMs))
	}
	for _, name := range sortedKeys(got) {
		g, t := got[name], tt[name]
		fmt.Printf("model_ratio name=%s go_ms=%.2f torch_ms=%.2f ratio=%.2f go_cpu_ms=%.2f torch_cpu_ms=%.2f cpu_ratio=%.2f\n",
			name, g.ms, t.ms, div(t.ms, g.ms), g.cpuMs, t.cpuMs, div(t.cpuMs, g.cpuMs))
	}
	return nil
}

func goBackbone(k tensor.Kernels, reps int, threads float64, vit, llm bool, got map[string]result, flops map[string]float64) error {
	t0 := time.Now()
	b, err := benchmodel.NewBackbone(k, 0)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Printf("# go backbone (1 vision block, 1 decoder layer): built in %.1f s\n", time.Since(t0).Seconds())
	if vit {
		r, err := best(reps, threads, b.ResetViT, b.ViTBlock)
		if err != nil {
			return err
		}
		got["vit_block"], flops["vit_block"] = r, b.ViTFLOPs()
	}
	if llm {
		r, err := best(reps, threads, nil, b.LLMLayer)
		if err != nil {
			return err
		}
		got["llm_layer"], flops["llm_layer"] = r, b.LLMFLOPs()
	}
	return nil
}

// best runs fn 2 + reps times (setup, untimed, before each) and returns the
// best wall time and the best CPU time ÷ threads of the last reps runs.
func best(reps int, threads float64, setup func(), fn func() error) (result, error) {
	r := result{ms: 1e18, cpuMs: 1e18}
	for i := -2; i < reps; i++ {
		if setup != nil {
			setup()
		}
		c0, w0 := benchcpu.Now(), time.Now()
		if err := fn(); err != nil {
			return result{}, err
		}
		w, c := time.Since(w0), benchcpu.Now()-c0
		if i >= 0 {
			r.ms = min(r.ms, ms(w))
			r.cpuMs = min(r.cpuMs, ms(c)/threads)
		}
	}
	return r, nil
}

func goDiT(k tensor.Kernels, reps int, threads float64, got map[string]result, flops map[string]float64) error {
	t0 := time.Now()
	d, err := benchmodel.NewDiT(k)
	if err != nil {
		return err
	}
	fmt.Printf("# go dit: built in %.1f s\n", time.Since(t0).Seconds())
	step := result{1e18, 1e18}
	kv := step
	den := step
	for i := -1; i < reps; i++ {
		t, err := d.Run()
		if err != nil {
			return err
		}
		if i < 0 {
			continue
		}
		for _, s := range t.Steps {
			step.ms = min(step.ms, ms(s.Wall))
			step.cpuMs = min(step.cpuMs, ms(s.CPU)/threads)
		}
		kv.ms = min(kv.ms, ms(t.CrossKV.Wall))
		kv.cpuMs = min(kv.cpuMs, ms(t.CrossKV.CPU)/threads)
		den.ms = min(den.ms, ms(t.Denoise.Wall))
		den.cpuMs = min(den.cpuMs, ms(t.Denoise.CPU)/threads)
	}
	got["dit_step"], got["dit_crosskv"] = step, kv
	flops["dit_step"] = d.StepFLOPs()
	fmt.Printf("go_model name=dit_denoise ms=%.2f cpu_ms=%.2f (K/V once + 4 steps + encoders; the whole stage beside torch: -stages; RATIONALE.md, Real size against the PyTorch reference)\n", den.ms, den.cpuMs)
	return nil
}

// torchISA maps the Go side's vector level to the settings that put torch
// and OpenBLAS on the same level: OpenBLAS 0.3.21 (Debian 12) does not
// recognise newer CPUs and falls back on older kernels by itself (an
// Emerald Rapids Xeon ran its SSE3 "Prescott" kernels, 46 GFLOP/s on the
// DiT shape against 62 with Haswell's; a Zen 5 runs "Zen", AVX2), which
// would compare Go's AVX-512 with torch's SSE3.
var torchISA = map[string][2]string{
	"avx512": {"SkylakeX", "avx512"},
	"avx2":   {"Haswell", "avx2"},
}

// torchEnv is the environment of a torch reference run: threads OpenMP
// threads, passive waits, and OPENBLAS_CORETYPE and ATEN_CPU_CAPABILITY
// at the Go side's level (tensor.Variants()[0]) unless already set; what
// it chose is printed once.
func torchEnv(threads int) []string {
	env := append(os.Environ(), "OMP_NUM_THREADS="+strconv.Itoa(threads), "OMP_WAIT_POLICY=PASSIVE")
	isa, ok := torchISA[tensor.Variants()[0].Name]
	if !ok {
		return env
	}
	var set []string
	for i, k := range []string{"OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY"} {
		if v, had := os.LookupEnv(k); had {
			set = append(set, k+"="+v+" (caller's)")
			continue
		}
		env = append(env, k+"="+isa[i])
		set = append(set, k+"="+isa[i])
	}
	torchISAOnce.Do(func() {
		fmt.Printf("# torch at the Go side's level %s: %s\n", tensor.Variants()[0].Name, strings.Join(set, " "))
	})
	return env
}

var torchISAOnce sync.Once

func torchTimes(python string, reps int, only string) (map[string]result, error) {
	script := filepath.Join("testdata", "bench", "torch_model.py")
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("run from the repository root: %w", err)
	}
	args := []string{script, "--reps", strconv.Itoa(reps)}
	if only != "" {
		args = append(args, "--only", only)
	}
	cmd := exec.Command(python, args...)
	cmd.Env = torchEnv(2)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	res := map[string]result{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		if !strings.HasPrefix(line, "torch_model ") {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Fields(line)[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		m, err1 := strconv.ParseFloat(f["ms"], 64)
		c, err2 := strconv.ParseFloat(f["cpu_ms"], 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("torch line %q: %w", line, err)
		}
		res[f["name"]] = result{m, c}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %w", script, err)
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func sortedKeys(m map[string]result) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
