#!/usr/bin/python3
"""Time Debian's PyTorch fp32 GEMMs at the GR00T N1.7 shapes.

Run (2 threads, passive OpenMP waiting, as the perf notes prescribe):

    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 testdata/bench/torch_gemm.py

Each shape computes y[m,n] = x[m,k] @ W[n,k].T + bias with
torch.nn.functional.linear (the nn.Linear path the reference runs), after
3 warm-ups; it prints one line per shape:

    torch_gemm name=<shape> m=<m> n=<n> k=<k> ms=<best> gflops=<best> median_gflops=<median> cpu_gflops=<c>

best = fastest of --reps runs. cpu_gflops divides the flops by the least
process CPU time of a run ÷ threads: the speed on dedicated cores when the
shared machine steals time (it undercounts torch if OpenBLAS threads spin). `go test -bench=MatMul ./core/tensor/` uses the
same shape names, so the lines join on name=.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torchinfo  # noqa: E402

SHAPES = [  # name, m, n, k, rotate  (same as core/tensor/bench_test.go)
    # rotate: distinct weights cycled per call, so the weight-streaming DiT
    # shapes read their weights from DRAM as in the model, not from L3.
    ("vision_qkv_1792x1536x1024", 1792, 1024, 1536, 1),
    ("vision_mlp_up_1792x1024x4096", 1792, 4096, 1024, 1),
    ("vision_mlp_down_1792x4096x1024", 1792, 1024, 4096, 1),
    ("llm_512x2048x6144", 512, 6144, 2048, 1),
    ("dit_41x1536x6144", 41, 6144, 1536, 6),
    ("dit_41x6144x1536", 41, 1536, 6144, 6),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=int(os.environ["OMP_NUM_THREADS"]))
    ap.add_argument("--only", default="", help="substring filter on shape names")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    torchinfo.report()
    for name, m, n, k, rotate in SHAPES:
        if args.only and args.only not in name:
            continue
        x = torch.randn(m, k)
        ws = [torch.randn(n, k) for _ in range(rotate)]
        b = torch.randn(n)
        with torch.no_grad():
            for i in range(3):
                torch.nn.functional.linear(x, ws[i % rotate], b)
            times, cpus = [], []
            for i in range(args.reps):
                w = ws[i % rotate]
                c0 = time.process_time()
                t0 = time.perf_counter()
                torch.nn.functional.linear(x, w, b)
                times.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
        flop = 2.0 * m * n * k
        best = min(times)
        med = statistics.median(times)
        print(f"torch_gemm name={name} m={m} n={n} k={k} ms={best*1e3:.3f} "
              f"gflops={flop/best/1e9:.1f} median_gflops={flop/med/1e9:.1f} "
              f"cpu_gflops={flop/(min(cpus)/args.threads)/1e9:.1f}", flush=True)


if __name__ == "__main__":
    main()
