package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gr00tgw/gr00tgw/core/safetensors"
	"github.com/gr00tgw/gr00tgw/kernels"
	"github.com/gr00tgw/gr00tgw/kernels/arena"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
)

func init() {
	register(&command{
		name:    "arena",
		summary: "plan and pack the DiT megakernel's bfp8_b DRAM weight arena",
		run:     arenaCmd,
	})
}

// arenaCmd plans the arena of a checkpoint (or of synthetic weights with
// --synthetic real|tiny), packs it, prints the plan as JSON and, with --out,
// writes the packed bytes (the device upload cache) and FILE.json (the plan
// facts with the digest, to validate the cache).
func arenaCmd(ctx context.Context, args []string) error {
	fs := newFlags("arena", "(--weights-dir DIR | --synthetic real|tiny) [--out FILE] [--policy P] [--plan-only]",
		"Plans the DiT megakernel's DRAM weight arena for a checkpoint, packs it and prints\nthe plan facts (with the digest) as JSON. With --out it writes the packed bytes\nto FILE (parent directories created) and the facts to FILE.json.")
	weights := fs.String("weights-dir", "", "checkpoint directory (config.json + model.safetensors[.index.json])")
	deprecatedAlias(fs, "weights", "weights-dir")
	out := fs.String("out", "", "write the packed arena here (and the plan to FILE.json)")
	policy := fs.String("policy", "mixed_dit", "dtype policy: mixed_dit (bfp8_b weights, bf16 biases), bf16 or fp32")
	synthetic := fs.String("synthetic", "", "use deterministic random weights of shape real|tiny instead of --weights-dir")
	seed := fs.Uint64("seed", 1, "seed of --synthetic weights")
	planOnly := fs.Bool("plan-only", false, "print the plan without reading weights or packing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	p, err := arena.PolicyByName(*policy)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var (
		dims schedule.Dims
		src  arena.WeightSource
	)
	switch {
	case *synthetic == "real":
		dims = schedule.N17()
		src = arena.Synthetic{Dims: dims, Seed: *seed}
	case *synthetic == "tiny":
		dims = schedule.N17Tiny()
		src = arena.Synthetic{Dims: dims, Seed: *seed}
	case *synthetic != "":
		return fmt.Errorf("%w: --synthetic must be real or tiny", errUsage)
	case *weights == "":
		return fmt.Errorf("%w: need --weights-dir DIR or --synthetic real|tiny", errUsage)
	default:
		raw, err := os.ReadFile(filepath.Join(*weights, "config.json"))
		if err != nil {
			return fmt.Errorf("arena: %w", err)
		}
		if dims, err = schedule.FromConfig(raw); err != nil {
			return err
		}
		if !*planOnly {
			set, err := safetensors.Open(*weights)
			if err != nil {
				return err
			}
			defer set.Close()
			src = arena.FromSafetensors(set)
		}
	}
	s, err := schedule.Plan(dims)
	if err != nil {
		return err
	}
	pl, err := arena.Build(s, p)
	if err != nil {
		return err
	}
	if err := s.Check(func(mm *schedule.Matmul) int { return p.WeightFormat(mm).Bytes() }); err != nil {
		return err
	}
	var digest arena.Digest
	t0 := time.Now()
	if !*planOnly {
		var w io.Writer = io.Discard
		var f *os.File
		if *out != "" {
			if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
				return fmt.Errorf("arena: %w", err)
			}
			if f, err = os.Create(*out); err != nil {
				return fmt.Errorf("arena: %w", err)
			}
			defer f.Close()
			bw := bufio.NewWriterSize(f, 1<<20)
			defer bw.Flush()
			w = bw
		}
		if digest, err = pl.Pack(ctx, src, w); err != nil {
			return err
		}
		if bw, ok := w.(*bufio.Writer); ok {
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("arena: write %s: %w", *out, err)
			}
		}
		if f != nil {
			if err := f.Close(); err != nil {
				return fmt.Errorf("arena: write %s: %w", *out, err)
			}
		}
	}
	facts := kernels.Facts(pl, digest)
	if !*planOnly {
		facts["pack_seconds"] = time.Since(t0).Seconds()
	}
	js, err := json.MarshalIndent(facts, "", "  ")
	if err != nil {
		return err
	}
	if *out != "" && !*planOnly {
		if err := os.WriteFile(*out+".json", append(js, '\n'), 0o644); err != nil {
			return fmt.Errorf("arena: %w", err)
		}
	}
	_, err = fmt.Fprintf(os.Stdout, "%s\n", js)
	return err
}
