#!/usr/bin/python3
"""PyTorch fp32 reference of one whole GR00T N1.7 predict, stage by stage.

    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 testdata/bench/torch_stages.py \\
        --weights-dir DIR --inputs testdata/n17-tiny/caseA [--reps 2] [--out OUTDIR] [--check]

A test tool for `make bench-model` (tools/cmd/benchmodel
-stages). It loads a checkpoint directory (safetensors, single or sharded;
BF16/F16/F32) into fp32 torch tensors with the torch runner's model
(device/torchrunner/gr00t_torchrunner/model.py: the kept LLM layers only),
then runs it on the encoded inputs of --inputs (pixel_values,
image_grid_thw, input_ids, attention_mask, position_ids, state_normalized,
noise .npy: the caseA inputs fit the tiny and the real-size checkpoint
alike) in eager fp32, stage by stage:

  vision   patch embed, bilinear position embedding, 2-D rotary, the ViT
           blocks (attention within each image, the images batched),
           deepstack mergers, final merger
  llm      token embeddings + image rows, interleaved mRoPE, the kept
           decoder layers (QK-norm, GQA, causal + padding mask), deepstack
           injection; the output before the final norm
  adapter  vlln + the VL self-attention blocks
  denoise  state encoder, 4 Euler steps of action encoder + DiT + decoder,
           as upstream computes them: every DiT block evaluates its AdaLN
           linear and, in cross blocks, K/V over all VL rows with a key
           mask, in every step
  denoise_hoisted  the same result with what the Go backend hoists hoisted
           (cross K/V once per request, AdaLN rows and output modulation
           once per tau): the same algorithm as the Go side, to compare
           kernels

Printed lines (times: best of --reps after one untimed run; cpu = process
CPU time / threads, the least of the reps):

    torch_load s=<open -> every tensor fp32 (bf16)> cpu_s=... rss_mib=... tensors=N
    torch_stage name=<stage> ms=... median_ms=... cpu_ms=...
    torch_rss peak_mib=...

--out writes action_pred.npy [H, A] (and backbone_features, adapter_out,
vision_merger) for the Go side to compare against. --rtc H,O,F,r with
--rtc-prev P.npy runs the denoise stage with upstream's real-time chunking
(its action_pred is then that denoise's). --check compares every
stage with the fp32 goldens in --inputs (the tiny checkpoint's caseA) and
exits 1 if one is off by more than 1e-4 of its max magnitude.
"""
import argparse
import math
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchinfo  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "device", "torchrunner"))
from gr00t_torchrunner.model import Model  # noqa: E402 — the runner's model is the reference


def rss_mib(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def mha(q, k, v, heads, mask=None):
    T, D = q.shape
    hd = D // heads
    q, k, v = (t.reshape(-1, heads, hd).transpose(0, 1) for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    if mask is not None:
        s = s.masked_fill(~mask[None, None, :], float("-inf"))
    return (s.softmax(-1) @ v).transpose(0, 1).reshape(T, D)


def rtc_strength(T, A, O, F_, r):
    """Upstream N1.7's RTC row strengths [T, A] (shared/spec/rtc.md §1), restated with its torch
    ops: 0 below F, the ramp (1 - exp(-r t)) / max(1 - exp(-r t[-1]), 1e-8) on
    t = linspace(0, 1, O - F + 2) without its endpoints on rows F..O-1, 1 from O on."""
    s = torch.ones(T, A)
    s[:F_] = 0
    n = O - F_ + 2
    t = torch.linspace(0, 1, n)
    g = (1 - torch.exp(-r * t)) / torch.clamp(1 - torch.exp(-r * t[-1]), min=1e-8)
    s[F_:O] = g[1:-1, None]
    return s


def denoise_upstream(m, slot, vl, img, valid, state, noise, rtc=None):
    """The flow-matching loop as upstream computes it: every DiT block evaluates its AdaLN linear
    and, in cross blocks, K/V over all VL rows with a key mask, in every step. rtc = (P, H, O, F, r):
    real-time chunking by inpainting as upstream's get_action_with_features does it."""
    cfg, W, H, T = m.cfg, m.cfg.width, m.cfg.heads, m.cfg.horizon
    sf = m._cat("state_encoder.layer2", slot, F.relu(m._cat("state_encoder.layer1", slot, state)))
    keys = {"text": ~img & valid, "image": img & valid}
    x = noise
    strength = None
    if rtc is not None:
        prev, h, o, f_, r = rtc
        x = x.clone()
        x[:o] = prev[h - o:h]
        strength = rtc_strength(T, x.shape[1], o, f_, r)
    for s, tau in enumerate(cfg.taus):
        a = m._cat("action_encoder.W1", slot, x)
        hh = F.silu(m._cat("action_encoder.W2", slot, torch.cat([a, m.sinus[s]], dim=1)))
        z = torch.cat([sf, m._cat("action_encoder.W3", slot, hh) + m.pos_rows])
        st = F.silu(m._temb(tau))
        for i, kind in enumerate(cfg.kinds):
            b = f"model.transformer_blocks.{i}."
            sc, sh = m._lin(b + "norm1.linear", st).chunk(2)
            n = F.layer_norm(z, (W,), eps=1e-5) * (1 + sc) + sh
            q = m._lin(b + "attn1.to_q", n)
            if kind == "self":
                o = mha(q, m._lin(b + "attn1.to_k", n), m._lin(b + "attn1.to_v", n), H)
            else:
                o = mha(q, m._lin(b + "attn1.to_k", vl), m._lin(b + "attn1.to_v", vl), H, keys[kind])
            z = z + m._lin(b + "attn1.to_out.0", o)
            y = F.gelu(m._lin(b + "ff.net.0.proj", F.layer_norm(z, (W,), eps=1e-5)), approximate="tanh")
            z = z + m._lin(b + "ff.net.2", y)
        shift, scale = m._lin("model.proj_out_1", st).chunk(2)
        out = m._lin("model.proj_out_2", F.layer_norm(z, (W,), eps=1e-6) * (1 + scale) + shift)
        v = m._cat("action_decoder.layer2", slot, F.relu(m._cat("action_decoder.layer1", slot, out[1:])))
        x = x + v / cfg.steps if strength is None else x + (v / cfg.steps) * strength
    return x


def timed(fn, reps, threads):
    fn()  # untimed first run
    walls, cpus = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls), statistics.median(walls), min(cpus) / threads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights-dir", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--load-only", action="store_true",
                    help="load the weights, print torch_load and exit (one load per process: a second load in the same "
                         "process reuses the allocator's pages and is ~3x faster than any fresh start)")
    ap.add_argument("--slot", type=int, default=24)
    ap.add_argument("--rtc", default="",
                    help="H,O,F,r: real-time chunking (upstream's semantics) on denoise, the previous chunk from --rtc-prev")
    ap.add_argument("--rtc-prev", default="", help="the previous chunk, normalised [rows, 132] .npy")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                    help="bf16: the torch runner's bf16 path on the CPU (oneDNN); denoise is then its hoisted form")
    ap.add_argument("--out", default="")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--threads", type=int, default=int(os.environ["OMP_NUM_THREADS"]))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torchinfo.report()

    c0, t0 = time.process_time(), time.perf_counter()
    m = Model.load(args.weights_dir, "cpu", torch.bfloat16 if args.dtype == "bf16" else torch.float32)
    cfg = m.cfg
    print(f"torch_load s={time.perf_counter() - t0:.3f} cpu_s={time.process_time() - c0:.3f} "
          f"rss_mib={rss_mib():.0f} tensors={len(m.w)}", flush=True)
    if args.load_only:
        return

    ld = lambda n: np.load(os.path.join(args.inputs, n + ".npy"))  # noqa: E731
    pix = torch.from_numpy(ld("pixel_values")).float().to(m.dtype)
    grids = [tuple(int(v) for v in g) for g in ld("image_grid_thw")]
    ids = torch.from_numpy(ld("input_ids").reshape(-1)).long()
    mask = torch.from_numpy(ld("attention_mask").reshape(-1)).long()
    pos = torch.from_numpy(ld("position_ids").reshape(3, -1)).long()
    state = torch.from_numpy(ld("state_normalized").reshape(1, -1)).float()
    noise = torch.from_numpy(ld("noise").reshape(cfg.horizon, -1)).float()
    img, valid = ids == cfg.image_token, mask != 0
    img_idx = img.nonzero().flatten()
    slot = args.slot
    rtc = None
    if args.rtc:
        h, o, f_, r = args.rtc.split(",")
        prev = torch.from_numpy(np.load(args.rtc_prev)).float().reshape(-1, noise.shape[1])
        rtc = (prev, int(h), int(o), int(f_), float(r))

    taps = {}
    res = {}
    stages = (
        ("vision", lambda: m.vision(pix, grids, taps)),
        ("llm", lambda: m.llm(ids, None if bool(valid.all()) else mask, pos, img_idx, res["vision"][0],
                              res["vision"][1], taps)),
        ("adapter", lambda: m.adapter(res["llm"], taps)),
        ("denoise", lambda: denoise_upstream(m, slot, res["adapter"], img, valid, state, noise, rtc)),
        ("denoise_hoisted", lambda: m.denoise(slot, res["adapter"][~img & valid], res["adapter"][img & valid], state,
                                              noise, taps)),
    )
    if args.dtype == "bf16":  # the runner's own path: its denoise is the hoisted form
        stages = stages[:3] + (("denoise", stages[4][1]),)
    with torch.no_grad():
        for name, fn in stages:
            r = timed(lambda: res.__setitem__(name, fn()), args.reps, args.threads)
            print(f"torch_stage name={name} ms={r[0] * 1e3:.1f} median_ms={r[1] * 1e3:.1f} cpu_ms={r[2] * 1e3:.1f}",
                  flush=True)
    print(f"torch_rss peak_mib={rss_mib('VmHWM'):.0f}", flush=True)
    if rtc is not None:  # the RTC result is upstream's denoise (the hoisted one runs without RTC)
        taps["action_pred"] = res["denoise"]
    elif "denoise_hoisted" in res:
        d = (res["denoise"] - res["denoise_hoisted"]).abs().max().item()
        print(f"# denoise vs denoise_hoisted: max|d| {d:.3g}", flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for n in ("action_pred", "backbone_features", "adapter_out", "vision_merger"):
            np.save(os.path.join(args.out, n + ".npy"), taps[n].numpy())
    if args.check:
        bad = 0
        for n, t in taps.items():
            p = os.path.join(args.inputs, n + ".npy")
            if not os.path.exists(p):
                continue
            g = torch.from_numpy(np.load(p)).float().reshape(t.shape)
            rel = ((t - g).abs().max() / g.abs().max()).item()
            ok = rel <= 1e-4
            bad += not ok
            print(f"check {n}: max|d|/max|golden| = {rel:.2e} {'ok' if ok else 'FAIL'}", flush=True)
        if bad:
            sys.exit(1)


if __name__ == "__main__":
    main()
