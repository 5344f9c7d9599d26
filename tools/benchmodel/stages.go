package benchmodel

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/cpu"
	"github.com/gr00tgw/gr00tgw/internal/inputsdir"
)

// Stages are the names of one predict's stages, in order.
var Stages = []string{device.StageVision, device.StageLLM, device.StageAdapter, device.StageDenoise}

// StageRun is what RunStages measured.
type StageRun struct {
	// Load is cpu.Open: open → ready (weights packed, plans built, warm-up
	// done), the best of the loads (least wall, least CPU); Loads has each.
	Load  Timing
	Loads []Timing
	// Warmup is the part of Load spent in the backend's warm-up prediction.
	Warmup time.Duration
	// RSSAfterLoadMiB and PeakRSSMiB are VmRSS after Open and VmHWM at the
	// end (0 without /proc).
	RSSAfterLoadMiB, PeakRSSMiB float64
	// Stages holds each stage's best wall time and least CPU time over the
	// timed predicts; Predict the whole predict's.
	Stages  map[string]Timing
	Predict Timing
	// ActionPred is the last predict's [Horizon, MaxActionDim] output
	// (with reps 0: the untimed one's).
	ActionPred []float32
	// Facts is what the backend reported (policy, checkpoint digest, …).
	Facts device.Facts
}

// RunStages opens the checkpoint dir with the CPU backend under policy ("":
// fp32) loads times (at least once), closing all but the last backend and
// returning the Go heap to the OS before each open, so that every load
// starts as a fresh process's does (a heap left by earlier work made a
// real-size load 1.5× slower on a Zen 3 VM); then it runs one untimed and
// reps timed predicts on the encoded inputs of
// inputsDir (pixel_values, image_grid_thw, input_ids, attention_mask,
// position_ids, state_normalized, noise .npy; slot 24, DROID) and closes
// the backend. Per-stage CPU time is read at the stage boundaries through
// the backend's taps (vision_merger, backbone_features, adapter_out), which
// pass views and cost nothing measurable.
func RunStages(ctx context.Context, dir, inputsDir, policy string, loads, reps int) (StageRun, error) {
	var run StageRun
	in, err := ReadInputs(inputsDir)
	if err != nil {
		return run, err
	}
	var be *cpu.Backend
	run.Load = Timing{Wall: math.MaxInt64, CPU: math.MaxInt64}
	for range max(loads, 1) {
		if be != nil {
			if err := be.Close(); err != nil {
				return run, err
			}
			be = nil
		}
		runtime.GC()
		debug.FreeOSMemory()
		t0 := now()
		if be, err = cpu.Open(ctx, device.Options{WeightsDir: dir, Policy: policy}, cpu.DefaultLayout); err != nil {
			return run, err
		}
		t := now().sub(t0)
		run.Load = Timing{Wall: min(run.Load.Wall, t.Wall), CPU: min(run.Load.CPU, t.CPU)}
		run.Loads = append(run.Loads, t)
	}
	defer be.Close()
	run.RSSAfterLoadMiB, _ = ProcStatusMiB("VmRSS")
	run.Facts = be.Facts()
	if w, ok := run.Facts.Extra["warmup_ms"].(float64); ok {
		run.Warmup = time.Duration(w * float64(time.Millisecond))
	}
	run.Stages = map[string]Timing{}
	best := func(name string, t Timing) {
		b, ok := run.Stages[name]
		if !ok {
			run.Stages[name] = t
			return
		}
		run.Stages[name] = Timing{Wall: min(b.Wall, t.Wall), CPU: min(b.CPU, t.CPU)}
	}
	run.Predict = Timing{Wall: math.MaxInt64, CPU: math.MaxInt64}
	var marks [len(StageEndTaps)]instant
	tap := func(name string, step int, _ []int, _ []float32) {
		if i := StageEnd(name); i >= 0 {
			marks[i] = now()
		}
	}
	for i := -1; i < reps; i++ {
		start := now()
		res, err := be.PredictTaps(ctx, in, tap)
		end := now()
		if err != nil {
			return run, err
		}
		run.ActionPred = res.ActionPred
		if i < 0 {
			continue
		}
		prev := start
		for k, s := range res.Stages {
			cpuEnd := end.cpu
			if k < len(marks) {
				cpuEnd = marks[k].cpu
			}
			best(s.Name, Timing{Wall: s.Duration, CPU: cpuEnd - prev.cpu})
			if k < len(marks) {
				prev = marks[k]
			}
		}
		p := end.sub(start)
		run.Predict = Timing{Wall: min(run.Predict.Wall, p.Wall), CPU: min(run.Predict.CPU, p.CPU)}
	}
	run.PeakRSSMiB, _ = ProcStatusMiB("VmHWM")
	return run, nil
}

// StageEnd is the index in StageEndTaps of the tap named name, or -1.
func StageEnd(name string) int {
	for i, e := range StageEndTaps {
		if name == e {
			return i
		}
	}
	return -1
}

// StageEndTaps are the taps that end vision, llm and adapter, in order
// (denoise ends with the predict).
var StageEndTaps = [...]string{"vision_merger", "backbone_features", "adapter_out"}

// ReadInputs reads a directory of encoded model inputs (the layout of
// testdata/n17-tiny/caseA, state_normalized and noise required: the torch
// side reads the same noise) for embodiment slot 24.
func ReadInputs(dir string) (*device.Inputs, error) {
	in := &device.Inputs{EmbodimentID: 24}
	if err := inputsdir.Read(in, dir); err != nil {
		return nil, fmt.Errorf("benchmodel: %w", err)
	}
	if in.State == nil || in.Noise == nil {
		return nil, fmt.Errorf("benchmodel: %s needs state_normalized.npy and noise.npy", dir)
	}
	return in, nil
}

// ProcStatusMiB reads one kB field of /proc/self/status (VmRSS, VmHWM) in
// MiB.
func ProcStatusMiB(field string) (float64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					return kb / 1024, true
				}
			}
		}
	}
	return 0, false
}

// PCC is the Pearson correlation of a and b (1 when both are constant and
// equal).
func PCC(a, b []float32) float64 {
	n := min(len(a), len(b))
	if n == 0 {
		return 0
	}
	var ma, mb float64
	for i := range n {
		ma += float64(a[i])
		mb += float64(b[i])
	}
	ma /= float64(n)
	mb /= float64(n)
	var sab, saa, sbb float64
	for i := range n {
		x, y := float64(a[i])-ma, float64(b[i])-mb
		sab += x * y
		saa += x * x
		sbb += y * y
	}
	if saa == 0 || sbb == 0 {
		if saa == sbb {
			return 1
		}
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}
