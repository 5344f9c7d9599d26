"""`python3 -B -m gr00t_torchrunner.selfcheck`: one predict per dtype on the same encoded inputs.

    python3 -B -m gr00t_torchrunner.selfcheck --weights-dir DIR --inputs testdata/n17-tiny/caseA \\
        [--device cuda] [--dtypes fp32,bf16] [--reps 3]

--inputs holds the encoded model inputs as .npy (pixel_values, image_grid_thw, input_ids,
attention_mask, position_ids, state_normalized, noise; case A's fit the tiny and the real-size
checkpoint alike). The first dtype is the reference; each line compares one dtype with it:

    selfcheck device=cuda:0 name="NVIDIA H100 80GB HBM3" torch=2.11.0
    selfcheck dtype=fp32 ms=... pcc_vs_fp32=1.000000000 max_abs=0 peak_mib=...
    selfcheck dtype=bf16 ms=... pcc_vs_fp32=0.999990 max_abs=... peak_mib=...

ms is the best of --reps warm predicts (after one untimed). With action_pred.npy in --inputs (a
golden) a last line gives each dtype's PCC against it. Exit 1 when a PCC is below --min-pcc.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, List

import numpy as np
import torch

from .engine import cpu_name, resolve_device, resolve_dtype
from .model import Inputs, Model


def load_inputs(d: str) -> Inputs:
    def ld(n: str) -> np.ndarray:
        return np.load(os.path.join(d, n + ".npy"))

    return Inputs(pixel_values=torch.from_numpy(ld("pixel_values")).float(),
                  grids=[tuple(int(v) for v in g) for g in ld("image_grid_thw")],
                  input_ids=torch.from_numpy(ld("input_ids").reshape(-1).astype(np.int64)),
                  position_ids=torch.from_numpy(ld("position_ids").reshape(3, -1).astype(np.int64)),
                  state=torch.from_numpy(ld("state_normalized").reshape(-1)).float(),
                  attention_mask=torch.from_numpy(ld("attention_mask").reshape(-1).astype(np.int64)),
                  noise=torch.from_numpy(ld("noise").reshape(-1)).float(), embodiment_id=24)


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(np.corrcoef(a.double().flatten().numpy(), b.double().flatten().numpy())[0, 1])


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m gr00t_torchrunner.selfcheck", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights-dir", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--slot", type=int, default=24)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--min-pcc", type=float, default=0.999)
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dev = resolve_device(args.device, 0)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else (cpu_name() or "cpu")
    print(f'selfcheck device={dev} name="{name}" torch={torch.__version__}', flush=True)
    inp = load_inputs(args.inputs)
    inp.embodiment_id = args.slot
    outs: Dict[str, torch.Tensor] = {}
    ok = True
    for spec in args.dtypes.split(","):
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        m = Model.load(args.weights_dir, str(dev), resolve_dtype(spec, dev))
        out, _ = m.predict(inp)
        best = float("inf")
        for _ in range(args.reps):
            t0 = time.perf_counter()
            m.predict(inp)
            best = min(best, time.perf_counter() - t0)
        peak = torch.cuda.max_memory_allocated(dev) >> 20 if dev.type == "cuda" else 0
        ref = outs[next(iter(outs))] if outs else out
        p, d = pcc(out, ref), float((out - ref).abs().max())
        first = next(iter(outs), spec)
        print(f"selfcheck dtype={spec} ms={best * 1e3:.2f} pcc_vs_{first}={p:.9f} max_abs={d:.3g} peak_mib={peak}", flush=True)
        ok = ok and p >= args.min_pcc
        outs[spec] = out
        del m
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    golden = os.path.join(args.inputs, "action_pred.npy")
    if os.path.exists(golden):
        g = torch.from_numpy(np.load(golden)).float().reshape(next(iter(outs.values())).shape)
        print("selfcheck golden " + " ".join(f"{k}_pcc={pcc(v, g):.9f} {k}_max_abs={float((v - g).abs().max()):.3g}"
                                             for k, v in outs.items()), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
