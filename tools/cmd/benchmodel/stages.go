package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/cpu"
	"github.com/gr00tgw/gr00tgw/tools/benchmodel"
)

// fp32Storage is a dtype policy registered by this tool only: the fp32
// policy without bf16 weight storage (tensor.Default everywhere), the
// reference the default policy's action_pred is checked against.
const fp32Storage = "fp32-storage"

// flopCount is a dtype policy registered by this tool only: the fp32
// policy's kernels behind one benchmodel.CountingKernels (flopCounter,
// replaced at each Open), to count the GEMM work of a predict.
const flopCount = "flop-count"

var flopCounter *benchmodel.CountingKernels

func init() {
	cpu.RegisterPolicy(fp32Storage, func() (cpu.Policy, error) {
		k := tensor.Default()
		return cpu.Policy{Name: fp32Storage, Vision: k, LLM: k, Adapter: k, Denoise: k}, nil
	})
	cpu.RegisterPolicy(flopCount, func() (cpu.Policy, error) {
		c := &benchmodel.CountingKernels{K: tensor.DefaultBF16Weights()}
		flopCounter = c
		return cpu.Policy{Name: flopCount, Vision: c, LLM: c, Adapter: c, Denoise: c}, nil
	})
}

// stageFlops opens ckpt under the flop-count policy and counts each stage's
// GEMM flops (2·m·n·k; attention products not included) in one predict on
// inputs, reading the counter at the taps that end the stages.
func stageFlops(ctx context.Context, ckpt, inputs string) (map[string]float64, error) {
	in, err := benchmodel.ReadInputs(inputs)
	if err != nil {
		return nil, err
	}
	runtime.GC()
	debug.FreeOSMemory()
	be, err := cpu.Open(ctx, device.Options{WeightsDir: ckpt, Policy: flopCount}, cpu.DefaultLayout)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	c := flopCounter
	c.Flops.Store(0) // the warm-up's
	var ends [len(benchmodel.StageEndTaps) + 1]int64
	tap := func(name string, _ int, _ []int, _ []float32) {
		if i := benchmodel.StageEnd(name); i >= 0 {
			ends[i] = c.Flops.Load()
		}
	}
	if _, err := be.PredictTaps(ctx, in, tap); err != nil {
		return nil, err
	}
	ends[len(ends)-1] = c.Flops.Load()
	out := map[string]float64{}
	prev := int64(0)
	for i, s := range benchmodel.Stages {
		out[s] = float64(ends[i] - prev)
		prev = ends[i]
	}
	return out, nil
}

// runStages is -stages: Go and torch on one whole real-size predict, stage
// by stage, side by side in one run.
func runStages(ckpt, inputs, python, torchOut string, loads, reps int, fp32Check bool) error {
	if benchmodel.NeedsCheckpoint(ckpt) {
		fmt.Printf("# writing the real-size random checkpoint to %s (~6.3 GB)\n", ckpt)
		t0 := time.Now()
		if err := benchmodel.WriteCheckpoint(ckpt, filepath.Join("testdata", "n17-tiny")); err != nil {
			return err
		}
		fmt.Printf("# written in %.1f s\n", time.Since(t0).Seconds())
	}
	threads := float64(runtime.GOMAXPROCS(0))
	fmt.Printf("# cpu: %s; isa: %s (tensor.Variants()[0]); GOMAXPROCS=%d; %s %s/%s; %s\n", cpuModel(),
		tensor.Variants()[0].Name, runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("# checkpoint %s, inputs %s, reps %d (best of; one untimed predict first), loads %d per side (best of)\n", ckpt, inputs, reps, loads)
	ctx := context.Background()
	g, err := benchmodel.RunStages(ctx, ckpt, inputs, "", loads, reps)
	if err != nil {
		return err
	}
	fmt.Printf("go_load s=%.3f cpu_s=%.3f warmup_s=%.3f rss_after_load_mib=%.0f peak_rss_mib=%.0f policy=%s loads_s=%s\n",
		g.Load.Wall.Seconds(), g.Load.CPU.Seconds(), g.Warmup.Seconds(), g.RSSAfterLoadMiB, g.PeakRSSMiB, g.Facts.Policy, seconds(g.Loads))
	if reps < 1 {
		fmt.Println("# -stage-reps 0: no timed predict (action_pred of the untimed one)")
		python = "" // nothing to set torch's times beside
	}
	for _, s := range benchmodel.Stages {
		if t, ok := g.Stages[s]; ok {
			fmt.Printf("go_stage name=%s ms=%.1f cpu_ms=%.1f\n", s, ms(t.Wall), ms(t.CPU)/threads)
		}
	}
	if reps >= 1 {
		fmt.Printf("go_stage name=predict ms=%.1f cpu_ms=%.1f\n", ms(g.Predict.Wall), ms(g.Predict.CPU)/threads)
	}
	goPred := g.ActionPred
	g.ActionPred = nil
	if fp32Check {
		runtime.GC()
		debug.FreeOSMemory()
		r, err := benchmodel.RunStages(ctx, ckpt, inputs, fp32Storage, 1, 0)
		if err != nil {
			return err
		}
		d := maxAbsDiff(goPred, r.ActionPred)
		fmt.Printf("fp32_check policy=%s pcc=%.9f max_abs_diff=%.3g bit_identical=%v peak_rss_mib=%.0f load_s=%.1f\n",
			fp32Storage, benchmodel.PCC(goPred, r.ActionPred), d, d == 0, r.PeakRSSMiB, r.Load.Wall.Seconds())
	}
	if python == "" {
		return nil
	}
	if _, err := os.Stat(python); err != nil {
		fmt.Printf("# %s not found: Go figures only\n", python)
		return nil
	}
	flops, err := stageFlops(ctx, ckpt, inputs)
	if err != nil {
		return err
	}
	peak := tensor.FMAPeak(runtime.GOMAXPROCS(0))
	runtime.GC()
	debug.FreeOSMemory() // torch holds ~12 GB of fp32 weights: give Go's back first
	out := torchOut
	if out == "" {
		tmp, err := os.MkdirTemp("", "torch-stages-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		out = tmp
	}
	tt, tload, err := torchStages(python, ckpt, inputs, out, loads, reps)
	if err != nil {
		return err
	}
	fmt.Printf("%-16s %10s %10s %7s | %10s %10s %7s\n", "stage", "go ms", "torch ms", "ratio", "go cpu", "torch cpu", "ratio")
	row := func(name, tname string, gt benchmodel.Timing) {
		t := tt[tname]
		gm, gc := ms(gt.Wall), ms(gt.CPU)/threads
		fmt.Printf("%-16s %10.1f %10.1f %7.2f | %10.1f %10.1f %7.2f\n", name, gm, t.ms, div(t.ms, gm), gc, t.cpuMs, div(t.cpuMs, gc))
	}
	for _, s := range benchmodel.Stages {
		row(s, s, g.Stages[s])
	}
	row("denoise_hoisted", "denoise_hoisted", g.Stages["denoise"])
	fmt.Printf("%-16s %10.1f %10.1f %7.2f   (open → ready; torch: safetensors → fp32 tensors)\n", "load",
		ms(g.Load.Wall), tload*1e3, div(tload*1e3, ms(g.Load.Wall)))
	for _, s := range append(benchmodel.Stages, "denoise_hoisted") {
		gs := g.Stages[strings.TrimSuffix(s, "_hoisted")]
		t := tt[s]
		fmt.Printf("stage_ratio name=%s go_ms=%.1f torch_ms=%.1f ratio=%.2f go_cpu_ms=%.1f torch_cpu_ms=%.1f cpu_ratio=%.2f\n",
			s, ms(gs.Wall), t.ms, div(t.ms, ms(gs.Wall)), ms(gs.CPU)/threads, t.cpuMs, div(t.cpuMs, ms(gs.CPU)/threads))
	}
	// What the FMA peak allows: a Go side whose every GEMM ran at the peak
	// and whose attention and elementwise work took no time at all would
	// reach max_ratio_at_peak; below 1.5 no fp32 code can reach 1.5×.
	fmt.Printf("# fp32 FMA peak %.1f GFLOP/s on %d threads (tensor.FMAPeak); GEMM flops counted in one predict (attention not included)\n", peak, runtime.GOMAXPROCS(0))
	for _, s := range benchmodel.Stages {
		f, gs, t := flops[s], g.Stages[s], tt[s]
		fmt.Printf("stage_bound name=%s gemm_gflop=%.1f go_gemm_gflops=%.1f torch_gemm_gflops=%.1f go_frac_peak=%.2f torch_frac_peak=%.2f max_ratio_at_peak=%.2f\n",
			s, f/1e9, div(f/1e6, ms(gs.Wall)), div(f/1e6, t.ms), div(f/1e6, ms(gs.Wall)*peak), div(f/1e6, t.ms*peak), div(t.ms*peak, f/1e6))
	}
	fmt.Printf("load_ratio go_s=%.2f torch_s=%.2f go_over_torch=%.2f\n", g.Load.Wall.Seconds(), tload, div(g.Load.Wall.Seconds(), tload))
	a, err := npy.ReadFile(filepath.Join(out, "action_pred.npy"))
	if err != nil {
		return err
	}
	tp, err := a.Float32s()
	if err != nil {
		return err
	}
	fmt.Printf("fidelity action_pred go_vs_torch pcc=%.9f max_abs_diff=%.3g\n", benchmodel.PCC(goPred, tp), maxAbsDiff(goPred, tp))
	switch {
	case torchBF16 == "off":
		return nil
	case torchBF16 == "auto" && bf16Features() == noBF16:
		fmt.Printf("# torch runner bf16 on the CPU: skipped: %s has %s (-torch-bf16 on runs it anyway: tens of minutes at real size)\n", cpuModel(), noBF16)
		return nil
	}
	return torchBF16Stages(python, ckpt, inputs, out, reps, g, goPred)
}

// torchBF16Stages runs the torch runner's bf16 path on the CPU (torch_stages.py
// --dtype bf16: oneDNN's bf16 matmul, AMX or AVX512_BF16 where the CPU has
// them, emulated otherwise) and sets it beside the Go fp32 backend, stage
// by stage: the figure that decides whether a fast CPU path should be the
// torch runner or new Go kernels.
func torchBF16Stages(python, ckpt, inputs, out string, reps int, g benchmodel.StageRun, goPred []float32) error {
	bfOut := filepath.Join(out, "bf16")
	if err := os.MkdirAll(bfOut, 0o755); err != nil {
		return err
	}
	fmt.Printf("# torch runner bf16 on the CPU: %s; bf16 features: %s\n", cpuModel(), bf16Features())
	tt, tload, err := torchRun(python, ckpt, inputs, bfOut, reps, false, "--dtype", "bf16")
	if err != nil {
		return err
	}
	threads := float64(runtime.GOMAXPROCS(0))
	for _, s := range benchmodel.Stages {
		gs, t := g.Stages[s], tt[s]
		fmt.Printf("stage_ratio_bf16 name=%s go_fp32_ms=%.1f torch_bf16_ms=%.1f ratio=%.2f go_cpu_ms=%.1f torch_bf16_cpu_ms=%.1f\n",
			s, ms(gs.Wall), t.ms, div(t.ms, ms(gs.Wall)), ms(gs.CPU)/threads, t.cpuMs)
	}
	fmt.Printf("load_bf16 torch_s=%.2f\n", tload)
	a, err := npy.ReadFile(filepath.Join(bfOut, "action_pred.npy"))
	if err != nil {
		return err
	}
	tp, err := a.Float32s()
	if err != nil {
		return err
	}
	fmt.Printf("fidelity action_pred torch_bf16_vs_go_fp32 pcc=%.9f max_abs_diff=%.3g\n", benchmodel.PCC(goPred, tp), maxAbsDiff(goPred, tp))
	return nil
}

// noBF16 is bf16Features' answer for a CPU without bf16 instructions.
const noBF16 = "no bf16 instructions (bf16 matmul emulated in fp32)"

// bf16Features names the CPU's bf16 instructions (/proc/cpuinfo flags).
func bf16Features() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	var have []string
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				if f == "avx512_bf16" || f == "amx_bf16" || f == "amx_tile" {
					have = append(have, f)
				}
			}
			break
		}
	}
	if len(have) == 0 {
		return noBF16
	}
	return strings.Join(have, " ")
}

// torchStages runs torch_stages.py loads−1 times with --load-only, then
// once whole (each load in a fresh process, as the Go side's each start
// from a heap returned to the OS), and returns the stage times and the
// best load's seconds.
func torchStages(python, ckpt, inputs, out string, loads, reps int) (map[string]result, float64, error) {
	best := math.Inf(1)
	for range loads - 1 {
		_, s, err := torchRun(python, ckpt, inputs, out, reps, true)
		if err != nil {
			return nil, 0, err
		}
		best = min(best, s)
	}
	res, s, err := torchRun(python, ckpt, inputs, out, reps, false)
	return res, min(best, s), err
}

// torchRun runs torch_stages.py once (with --load-only: the load alone)
// and returns its stage times and load seconds.
func torchRun(python, ckpt, inputs, out string, reps int, loadOnly bool, extra ...string) (map[string]result, float64, error) {
	script := filepath.Join("testdata", "bench", "torch_stages.py")
	args := append([]string{"-W", "ignore", script, "--weights-dir", ckpt, "--inputs", inputs,
		"--reps", strconv.Itoa(reps), "--out", out}, extra...)
	if loadOnly {
		args = append(args, "--load-only")
	}
	cmd := exec.Command(python, args...)
	cmd.Env = torchEnv(runtime.GOMAXPROCS(0))
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	res := map[string]result{}
	var load float64
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		f := map[string]string{}
		for _, kv := range strings.Fields(line)[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		switch {
		case strings.HasPrefix(line, "torch_stage "):
			m, _ := strconv.ParseFloat(f["ms"], 64)
			c, _ := strconv.ParseFloat(f["cpu_ms"], 64)
			res[f["name"]] = result{m, c}
		case strings.HasPrefix(line, "torch_load "):
			load, _ = strconv.ParseFloat(f["s"], 64)
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", script, err)
	}
	return res, load, nil
}

// seconds lists the wall seconds of ts, comma-separated.
func seconds(ts []benchmodel.Timing) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%.3f", t.Wall.Seconds())
	}
	return b.String()
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// cpuModel is /proc/cpuinfo's first "model name" (GOARCH elsewhere).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}
