#!/usr/bin/python3
"""Time Debian's PyTorch (fp32) on a real-size GR00T N1.7 ViT block and DiT step.

    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 testdata/bench/torch_model.py [--reps 5] [--only vit,llm,dit]

The same computations the Go side times (tools/benchmodel), with random
fp32 weights (speed does not depend on the values):

vit_block          one Qwen3-VL vision block on 1792 patch rows (4 images x
                   16x28): LayerNorm(eps 1e-6), qkv 1024->3072, 2-D rotary on
                   q and k, attention windowed per image (16 heads x 64, the
                   4 windows batched), proj, LayerNorm, fc1 1024->4096 +
                   GELU-tanh, fc2, residuals. The rotary cos/sin tables are
                   built once outside the timing, as upstream builds them
                   once per forward.
llm_layer          one Qwen3 decoder layer on S = 469 tokens: RMSNorm(eps 1e-6),
                   q 2048->2048 / k, v 2048->1024, per-head RMSNorm of q and k,
                   rotary, causal GQA attention (16 query / 8 KV heads x 128,
                   KV heads repeated as upstream's repeat_kv), o proj, SwiGLU
                   MLP 6144 (gate, up, down), residuals. The rotary table is
                   built outside the timing.
dit_step           one Euler step of the 32-block DiT on 41 rows (width 1536,
                   32 heads x 48, FF 6144, GELU-tanh), with what does not
                   depend on the step hoisted exactly as the Go backend does:
                   AdaLN rows norm1.linear(silu(temb)) and the cross-attention
                   K/V of the VL features precomputed; cross blocks attend to
                   the gathered key rows (text: 21, image: 448).
dit_crosskv        that hoisted prologue: gather the text / image rows of
                   vl [469, 2048] and project K and V for the 16 cross
                   blocks (once per request).
dit_step_upstream  one step as the upstream reference computes it: AdaLN
                   linear per block and step, K/V projected from all 469 VL
                   rows in every cross block with a boolean key mask.

One line per item:

    torch_model name=<item> ms=<best wall> median_ms=<median> cpu_ms=<least CPU time / threads> gflops=<flop/best>
"""
import argparse
import math
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchinfo  # noqa: E402


def timed(fn, reps, warm, threads, setup=None):
    for _ in range(warm):
        if setup:
            setup()
        fn()
    times, cpus = [], []
    for _ in range(reps):
        if setup:
            setup()
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(times), statistics.median(times), min(cpus) / threads


def report(name, best, med, cpu, flop):
    g = f" gflops={flop / best / 1e9:.1f}" if flop else ""
    print(f"torch_model name={name} ms={best * 1e3:.2f} median_ms={med * 1e3:.2f} cpu_ms={cpu * 1e3:.2f}{g}", flush=True)


def w(*shape):
    fan = shape[-1]
    return torch.empty(*shape).uniform_(-math.sqrt(3 / fan), math.sqrt(3 / fan))


def vit(args):
    n, h, heads, hd, f, imgs, gh, gw = 1792, 1024, 16, 64, 4096, 4, 16, 28
    seg = gh * gw
    x0 = torch.randn(n, h)
    n1w, n1b, n2w, n2b = 1 + 0.1 * torch.randn(h), 0.01 * torch.randn(h), 1 + 0.1 * torch.randn(h), 0.01 * torch.randn(h)
    wqkv, bqkv = w(3 * h, h), 0.01 * torch.randn(3 * h)
    wproj, bproj = w(h, h), 0.01 * torch.randn(h)
    w1, b1 = w(f, h), 0.01 * torch.randn(f)
    w2, b2 = w(h, f), 0.01 * torch.randn(h)
    # 2-D rotary tables (row, col angles), merge-block order does not matter for speed.
    inv = 1.0 / (10000 ** (torch.arange(0, hd // 2, 2, dtype=torch.float32) / (hd // 2)))
    rr = torch.arange(gh).repeat_interleave(gw).float()
    cc = torch.arange(gw).repeat(gh).float()
    ang = torch.cat([rr[:, None] * inv, cc[:, None] * inv], dim=1)  # [seg, hd/2]
    emb = torch.cat([ang, ang], dim=1).repeat(imgs, 1)  # [n, hd]
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    scale = 1 / math.sqrt(hd)

    def rot(t):
        a, b = t[..., : hd // 2], t[..., hd // 2:]
        return t * cos + torch.cat([-b, a], dim=-1) * sin

    def block(x):
        y = F.layer_norm(x, (h,), n1w, n1b, 1e-6)
        qkv = F.linear(y, wqkv, bqkv).view(n, 3, heads, hd)
        q, k, v = qkv.unbind(1)
        q, k = rot(q), rot(k)
        q = q.reshape(imgs, seg, heads, hd).transpose(1, 2)
        k = k.reshape(imgs, seg, heads, hd).transpose(1, 2)
        v = v.reshape(imgs, seg, heads, hd).transpose(1, 2)
        p = (torch.matmul(q, k.transpose(-1, -2)) * scale).softmax(-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(n, h)
        x = x + F.linear(o, wproj, bproj)
        y = F.layer_norm(x, (h,), n2w, n2b, 1e-6)
        return x + F.linear(F.gelu(F.linear(y, w1, b1), approximate="tanh"), w2, b2)

    flop = 2.0 * n * (h * 3 * h + h * h + 2 * h * f) + 2.0 * 2 * imgs * seg * seg * h
    with torch.no_grad():
        best, med, cpu = timed(lambda: block(x0), args.reps, 2, args.threads)
    report("vit_block", best, med, cpu, flop)


def llm(args):
    S, h, nh, nkv, hd, f, eps = 469, 2048, 16, 8, 128, 6144, 1e-6
    x0 = torch.randn(S, h)
    inw, postw = 1 + 0.1 * torch.randn(h), 1 + 0.1 * torch.randn(h)
    qn, kn = 1 + 0.1 * torch.randn(hd), 1 + 0.1 * torch.randn(hd)
    wq, wk, wv, wo = w(nh * hd, h), w(nkv * hd, h), w(nkv * hd, h), w(h, nh * hd)
    wg, wu, wd = w(f, h), w(f, h), w(h, f)
    inv = 1.0 / (5e6 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = torch.arange(S).float()[:, None] * inv
    emb = torch.cat([ang, ang], dim=1)
    cos, sin = emb.cos()[None], emb.sin()[None]  # [1, S, hd]
    causal = torch.full((S, S), float("-inf")).triu(1)
    scale = 1 / math.sqrt(hd)

    def rms(t, wt):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps) * wt

    def rot(t):
        a, b = t[..., : hd // 2], t[..., hd // 2:]
        return t * cos + torch.cat([-b, a], dim=-1) * sin

    def layer(x):
        y = rms(x, inw)
        q = rms(F.linear(y, wq).view(S, nh, hd), qn).transpose(0, 1)
        k = rms(F.linear(y, wk).view(S, nkv, hd), kn).transpose(0, 1)
        v = F.linear(y, wv).view(S, nkv, hd).transpose(0, 1)
        q, k = rot(q), rot(k)
        k = k.repeat_interleave(nh // nkv, dim=0)
        v = v.repeat_interleave(nh // nkv, dim=0)
        p = (torch.matmul(q, k.transpose(-1, -2)) * scale + causal).softmax(-1)
        o = torch.matmul(p, v).transpose(0, 1).reshape(S, nh * hd)
        x = x + F.linear(o, wo)
        y = rms(x, postw)
        return x + F.linear(F.silu(F.linear(y, wg)) * F.linear(y, wu), wd)

    flop = 2.0 * S * (h * nh * hd + 2 * h * nkv * hd + nh * hd * h + 3 * h * f) + 2.0 * 2 * S * (S + 1) / 2 * nh * hd
    with torch.no_grad():
        best, med, cpu = timed(lambda: layer(x0), args.reps, 2, args.threads)
    report("llm_layer", best, med, cpu, flop)


def dit(args):
    W, H, Hd, FF, L, Bd, T, S, IMG, OUT = 1536, 32, 48, 6144, 32, 2048, 41, 469, 448, 1024
    every = 2
    t0 = time.perf_counter()
    kinds = []
    for i in range(L):
        if i % 2 == 1:
            kinds.append("self")
        elif i % (2 * every) == 0:
            kinds.append("text")
        else:
            kinds.append("image")
    blocks = []
    for i in range(L):
        kv = W if kinds[i] == "self" else Bd
        blocks.append(dict(
            ada=w(2 * W, W), adab=0.01 * torch.randn(2 * W),
            q=w(W, W), qb=0.01 * torch.randn(W), k=w(W, kv), kb=0.01 * torch.randn(W),
            v=w(W, kv), vb=0.01 * torch.randn(W), o=w(W, W), ob=0.01 * torch.randn(W),
            f1=w(FF, W), f1b=0.01 * torch.randn(FF), f2=w(W, FF), f2b=0.01 * torch.randn(W)))
    out1, out1b = w(2 * W, W), 0.01 * torch.randn(2 * W)
    out2, out2b = w(OUT, W), 0.01 * torch.randn(OUT)
    print(f"# torch dit: built {L} blocks in {time.perf_counter() - t0:.1f} s", flush=True)
    vl = torch.randn(S, Bd)
    img = torch.zeros(S, dtype=torch.bool)
    img[10:10 + IMG] = True
    temb = torch.randn(W)
    z0 = torch.randn(T, W)
    scale = 1 / math.sqrt(Hd)

    def attend(q, k, v, mask=None):
        q = q.view(T, H, Hd).transpose(0, 1)
        k = k.view(-1, H, Hd).transpose(0, 1)
        v = v.view(-1, H, Hd).transpose(0, 1)
        s = torch.matmul(q, k.transpose(-1, -2)) * scale
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.matmul(s.softmax(-1), v).transpose(0, 1).reshape(T, W)

    st = torch.nn.functional.silu(temb)
    ada_rows = [F.linear(st, b["ada"], b["adab"]).chunk(2) for b in blocks]  # (scale, shift)
    out_shift, out_scale = F.linear(st, out1, out1b).chunk(2)
    cache = {}

    def cross_kv():
        rows = {"text": vl[~img], "image": vl[img]}
        for i, b in enumerate(blocks):
            if kinds[i] != "self":
                r = rows[kinds[i]]
                cache[i] = (F.linear(r, b["k"], b["kb"]), F.linear(r, b["v"], b["vb"]))

    def tail(z):
        n = F.layer_norm(z, (W,), eps=1e-6) * (1 + out_scale) + out_shift
        return F.linear(n, out2, out2b)

    def ff(z, b):
        n = F.layer_norm(z, (W,), eps=1e-5)
        return z + F.linear(F.gelu(F.linear(n, b["f1"], b["f1b"]), approximate="tanh"), b["f2"], b["f2b"])

    def step_hoisted():
        z = z0
        for i, b in enumerate(blocks):
            sc, sh = ada_rows[i]
            n = F.layer_norm(z, (W,), eps=1e-5) * (1 + sc) + sh
            q = F.linear(n, b["q"], b["qb"])
            if kinds[i] == "self":
                k, v = F.linear(n, b["k"], b["kb"]), F.linear(n, b["v"], b["vb"])
            else:
                k, v = cache[i]
            z = z + F.linear(attend(q, k, v), b["o"], b["ob"])
            z = ff(z, b)
        return tail(z)

    masks = {"text": ~img, "image": img}

    def step_upstream():
        z = z0
        for i, b in enumerate(blocks):
            sc, sh = F.linear(st, b["ada"], b["adab"]).chunk(2)
            n = F.layer_norm(z, (W,), eps=1e-5) * (1 + sc) + sh
            q = F.linear(n, b["q"], b["qb"])
            if kinds[i] == "self":
                a = attend(q, F.linear(n, b["k"], b["kb"]), F.linear(n, b["v"], b["vb"]))
            else:
                a = attend(q, F.linear(vl, b["k"], b["kb"]), F.linear(vl, b["v"], b["vb"]), masks[kinds[i]])
            z = z + F.linear(a, b["o"], b["ob"])
            z = ff(z, b)
        _, _ = F.linear(st, out1, out1b).chunk(2)
        return tail(z)

    flop = 0.0
    for i in range(L):
        keys = {"self": T, "text": S - IMG, "image": IMG}[kinds[i]]
        flop += 2 * T * (2 * W * W + 2 * W * FF) + 2 * 2 * T * keys * W
        if kinds[i] == "self":
            flop += 2 * T * 2 * W * W
    flop += 2 * T * W * OUT
    with torch.no_grad():
        best, med, cpu = timed(cross_kv, args.reps, 1, args.threads)
        report("dit_crosskv", best, med, cpu, 0)
        best, med, cpu = timed(step_hoisted, args.reps, 1, args.threads)
        report("dit_step", best, med, cpu, flop)
        best, med, cpu = timed(step_upstream, max(2, args.reps // 2), 1, args.threads)
        report("dit_step_upstream", best, med, cpu, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=int(os.environ["OMP_NUM_THREADS"]))
    ap.add_argument("--only", default="", help="comma-separated items: vit, llm, dit (default all)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    torchinfo.report()
    only = set(filter(None, args.only.split(",")))
    if not only or "vit" in only:
        vit(args)
    if not only or "llm" in only:
        llm(args)
    if not only or "dit" in only:
        dit(args)


if __name__ == "__main__":
    main()
