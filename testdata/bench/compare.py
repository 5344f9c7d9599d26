#!/usr/bin/python3
"""Go GEMM vs PyTorch GEMM at the GR00T N1.7 shapes, in one run.

    /usr/bin/python3 testdata/bench/compare.py [--count 3] [--benchtime 10x] [--variants avx512,avx512-bf16]

Runs `go test -bench=MatMul ./core/tensor/` (from the repository root) and
testdata/bench/torch_gemm.py (2 threads, OMP_WAIT_POLICY=PASSIVE), keeps the
best GFLOP/s of each side per shape (the machine is shared; best-of is the
least noisy estimate) and prints one table plus one parseable line per
shape and variant:

    gemm_ratio name=<shape> variant=<go variant> go_gflops=<x> torch_gflops=<y> ratio=<x/y> go_cpu_gflops=<a> torch_cpu_gflops=<b> cpu_ratio=<a/b>

The *_cpu_* figures divide the flops by CPU time ÷ threads (speed on
dedicated cores, robust to a busy machine; it undercounts torch when
OpenBLAS threads spin, so cpu_ratio flatters Go).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def go_bench(count, benchtime, variants):
    bench = "^BenchmarkMatMul$"
    if variants:
        bench += "/.*/^(" + "|".join(sorted(variants)) + ")$"
    cmd = ["go", "test", "-run=^$", f"-bench={bench}",
           f"-benchtime={benchtime}", f"-count={count}", "./core/tensor/"]
    print("#", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    best, cpu = {}, {}
    pat = re.compile(r"^BenchmarkMatMul/([^/\s]+)/(\S+?)(?:-\d+)?\s.*?([\d.]+) GFLOP/s\s+([\d.]+) GFLOP/s-cpu")
    for line in out.splitlines():
        m = pat.match(line)
        if not m:
            continue
        name, variant, g, c = m.group(1), m.group(2), float(m.group(3)), float(m.group(4))
        if variants and variant not in variants:
            continue
        best[(name, variant)] = max(best.get((name, variant), 0.0), g)
        cpu[(name, variant)] = max(cpu.get((name, variant), 0.0), c)
    return best, cpu


def torch_bench(count):
    env = dict(os.environ, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="PASSIVE")
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "testdata/bench/torch_gemm.py"), "--reps", "10"]
    best, cpu = {}, {}
    for _ in range(count):
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("#"):
                print(line, flush=True)
                continue
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            best[f["name"]] = max(best.get(f["name"], 0.0), float(f["gflops"]))
            cpu[f["name"]] = max(cpu.get(f["name"], 0.0), float(f["cpu_gflops"]))
    return best, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3)
    ap.add_argument("--benchtime", default="10x")
    ap.add_argument("--variants", default="", help="comma-separated Go variants (default: all)")
    args = ap.parse_args()
    variants = set(filter(None, args.variants.split(",")))
    gob, goc = go_bench(args.count, args.benchtime, variants)
    tb, tc = torch_bench(args.count)

    def ratio(a, b):
        return a / b if b else float("nan")

    print(f"{'shape':32} {'go variant':12} {'go':>7} {'torch':>7} {'ratio':>6} | {'go cpu':>7} {'torch cpu':>9} {'ratio':>6}  (GFLOP/s)")
    for key in sorted(gob):
        name, variant = key
        g, t, gc, tcc = gob[key], tb.get(name, 0.0), goc[key], tc.get(name, 0.0)
        print(f"{name:32} {variant:12} {g:7.1f} {t:7.1f} {ratio(g, t):6.2f} | {gc:7.1f} {tcc:9.1f} {ratio(gc, tcc):6.2f}")
    for key in sorted(gob):
        name, variant = key
        g, t, gc, tcc = gob[key], tb.get(name, 0.0), goc[key], tc.get(name, 0.0)
        print(f"gemm_ratio name={name} variant={variant} go_gflops={g:.1f} torch_gflops={t:.1f} "
              f"ratio={ratio(g, t):.2f} go_cpu_gflops={gc:.1f} torch_cpu_gflops={tcc:.1f} cpu_ratio={ratio(gc, tcc):.2f}")


if __name__ == "__main__":
    sys.exit(main())
