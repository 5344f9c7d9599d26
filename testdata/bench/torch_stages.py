#!/usr/bin/python3
"""PyTorch fp32 reference of one whole GR00T N1.7 predict, stage by stage.

    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 testdata/bench/torch_stages.py \\
        --weights-dir DIR --inputs testdata/n17-tiny/caseA [--reps 2] [--out OUTDIR] [--check]

A test tool for `make bench-model` (internal/benchmodel/cmd/benchmodel
-stages), not project code. It loads a checkpoint directory (safetensors,
single or sharded; BF16/F16/F32) into fp32 torch tensors, then runs the
model on the encoded inputs of --inputs (pixel_values, image_grid_thw,
input_ids, attention_mask, position_ids, state_normalized, noise .npy: the
caseA inputs fit the tiny and the real-size checkpoint alike) in eager fp32,
functional style, written from the public architecture (Hugging Face
transformers' Qwen3-VL for vision and llm, upstream Isaac-GR00T's N1.7
action head for adapter and denoise):

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

    torch_load s=<open -> every tensor fp32> cpu_s=... rss_mib=... tensors=N
    torch_stage name=<stage> ms=... median_ms=... cpu_ms=...
    torch_rss peak_mib=...

--out writes action_pred.npy [H, A] (and backbone_features, adapter_out,
vision_merger) for the Go side to compare against. --check compares every
stage with the fp32 goldens in --inputs (the tiny checkpoint's caseA) and
exits 1 if one is off by more than 1e-4 of its max magnitude.
"""
import argparse
import json
import math
import mmap
import os
import resource
import statistics
import struct
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchinfo  # noqa: E402

VP = "backbone.model.model.visual."
LP = "backbone.model.model.language_model."
AP = "action_head."


def rss_mib(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def load_weights(d):
    """Every tensor of the checkpoint as an fp32 torch tensor (state dict)."""
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    state = {}
    for name in files:
        with open(os.path.join(d, name), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            hdr = json.loads(fh.read(n))
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        base = 8 + n
        for key, e in hdr.items():
            if key == "__metadata__" or key == "lm_head.weight":
                continue
            dt = dtypes[e["dtype"]]
            b, en = e["data_offsets"]
            count = (en - b) // torch.tensor([], dtype=dt).element_size()
            t = torch.frombuffer(mm, dtype=dt, count=count, offset=base + b).reshape(e["shape"])
            state[key] = t.float()  # a copy: the mapping can go
        del mm
    return state


class Cfg:
    """config.json (+ backbone_config.json when present, else the real Qwen3-VL sizes)."""

    def __init__(self, d):
        with open(os.path.join(d, "config.json")) as f:
            c = json.load(f)
        bb = {"vision_config": {"depth": 24, "hidden_size": 1024, "num_heads": 16, "intermediate_size": 4096,
                                "deepstack_visual_indexes": [5, 11, 17], "num_position_embeddings": 2304,
                                "spatial_merge_size": 2, "out_hidden_size": 2048},
              "text_config": {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 8,
                              "head_dim": 128, "rms_norm_eps": 1e-6, "rope_theta": 5000000,
                              "rope_scaling": {"mrope_section": [24, 20, 20]}},
              "image_token_id": 151655}
        p = os.path.join(d, "backbone_config.json")
        if os.path.exists(p):
            with open(p) as f:
                bb = json.load(f)
        v, t = bb["vision_config"], bb["text_config"]
        self.v_depth, self.v_hidden, self.v_heads = v["depth"], v["hidden_size"], v["num_heads"]
        self.v_deep = list(v["deepstack_visual_indexes"])
        self.v_side = int(round(math.sqrt(v["num_position_embeddings"])))
        self.merge = v.get("spatial_merge_size", 2)
        self.t_hidden, self.t_heads, self.t_kv = t["hidden_size"], t["num_attention_heads"], t["num_key_value_heads"]
        self.t_hd, self.t_eps, self.theta = t["head_dim"], t.get("rms_norm_eps", 1e-6), float(t["rope_theta"])
        self.mrope = list(t["rope_scaling"]["mrope_section"])
        self.image_token = bb.get("image_token_id", 151655)
        self.select = c["select_layer"]
        dit, vl = c["diffusion_model_cfg"], c["vl_self_attention_cfg"]
        self.layers, self.heads, self.hd = dit["num_layers"], dit["num_attention_heads"], dit["attention_head_dim"]
        self.W = self.heads * self.hd
        self.vl_layers, self.vl_heads = vl["num_layers"], vl["num_attention_heads"]
        self.every = c.get("attend_text_every_n_blocks", 2)
        self.steps, self.buckets = c.get("num_inference_timesteps", 4), c.get("num_timestep_buckets", 1000)
        self.horizon = c["action_horizon"]


def linspace(n, end):
    return torch.linspace(0, end, n, dtype=torch.float32)


def vision(cfg, w, pix, grids, taps):
    h, heads, ms = cfg.v_hidden, cfg.v_heads, cfg.merge
    hd = h // heads
    n = pix.shape[0]
    pw = w[VP + "patch_embed.proj.weight"].reshape(h, -1)
    x = F.linear(pix, pw, w[VP + "patch_embed.proj.bias"])
    taps["vision_patch_embed"] = x
    # Bilinear position embedding per image, merge-block order; rotary angles.
    side, tab = cfg.v_side, w[VP + "pos_embed.weight"]
    inv = 1.0 / (10000 ** (torch.arange(0, hd // 2, 2, dtype=torch.float32) / (hd // 2)))
    pos, angs, segs = [], [], []
    for t, gh, gw in grids:
        hv, wv = linspace(gh, side - 1), linspace(gw, side - 1)
        hf, wf = hv.long(), wv.long()
        hc, wc = (hf + 1).clamp(max=side - 1), (wf + 1).clamp(max=side - 1)
        dh, dw = (hv - hf.float())[:, None, None], (wv - wf.float())[None, :, None]
        r = lambda a, b: tab[(a[:, None] * side + b[None, :]).reshape(-1)].reshape(gh, gw, h)  # noqa: E731
        pe = (r(hf, wf) * ((1 - dh) * (1 - dw)) + r(hf, wc) * ((1 - dh) * dw)
              + r(hc, wf) * (dh * (1 - dw)) + r(hc, wc) * (dh * dw))
        pe = pe.reshape(gh // ms, ms, gw // ms, ms, h).permute(0, 2, 1, 3, 4).reshape(gh * gw, h)
        rows = torch.arange(gh).view(gh // ms, ms, 1, 1).expand(gh // ms, ms, gw // ms, ms)
        cols = torch.arange(gw).view(1, 1, gw // ms, ms).expand(gh // ms, ms, gw // ms, ms)
        rows = rows.permute(0, 2, 1, 3).reshape(-1).float()
        cols = cols.permute(0, 2, 1, 3).reshape(-1).float()
        a = torch.cat([rows[:, None] * inv, cols[:, None] * inv], dim=1)
        for _ in range(t):
            pos.append(pe)
            angs.append(a)
            segs.append(gh * gw)
    pos = torch.cat(pos)
    taps["vision_pos_embed"] = pos
    x = x + pos
    emb = torch.cat(angs).repeat(1, 2)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    same = len(set(segs)) == 1

    def rot(q):
        a, b = q[..., : hd // 2], q[..., hd // 2:]
        return q * cos + torch.cat([-b, a], dim=-1) * sin

    def attn(q, k, v):
        if same:  # the frames batched (equivalent to upstream's per-frame loop)
            f, s = len(segs), segs[0]
            q, k, v = (t.reshape(f, s, heads, hd).transpose(1, 2) for t in (q, k, v))
            p = (q @ k.transpose(-1, -2) / math.sqrt(hd)).softmax(-1)
            return (p @ v).transpose(1, 2).reshape(n, h)
        outs, o = [], 0
        for s in segs:
            qq, kk, vv = (t[o:o + s].transpose(0, 1) for t in (q, k, v))
            outs.append(((qq @ kk.transpose(-1, -2) / math.sqrt(hd)).softmax(-1) @ vv).transpose(0, 1).reshape(s, h))
            o += s
        return torch.cat(outs)

    def merger(p, y, post_norm):
        if post_norm:
            y = F.layer_norm(y.reshape(-1, 4 * h), (4 * h,), w[p + "norm.weight"], w[p + "norm.bias"], 1e-6)
        else:
            y = F.layer_norm(y, (h,), w[p + "norm.weight"], w[p + "norm.bias"], 1e-6).reshape(-1, 4 * h)
        y = F.gelu(F.linear(y, w[p + "linear_fc1.weight"], w[p + "linear_fc1.bias"]))
        return F.linear(y, w[p + "linear_fc2.weight"], w[p + "linear_fc2.bias"])

    deep = []
    for i in range(cfg.v_depth):
        b = f"{VP}blocks.{i}."
        y = F.layer_norm(x, (h,), w[b + "norm1.weight"], w[b + "norm1.bias"], 1e-6)
        q, k, v = F.linear(y, w[b + "attn.qkv.weight"], w[b + "attn.qkv.bias"]).view(n, 3, heads, hd).unbind(1)
        x = x + F.linear(attn(rot(q), rot(k), v), w[b + "attn.proj.weight"], w[b + "attn.proj.bias"])
        y = F.layer_norm(x, (h,), w[b + "norm2.weight"], w[b + "norm2.bias"], 1e-6)
        y = F.gelu(F.linear(y, w[b + "mlp.linear_fc1.weight"], w[b + "mlp.linear_fc1.bias"]), approximate="tanh")
        x = x + F.linear(y, w[b + "mlp.linear_fc2.weight"], w[b + "mlp.linear_fc2.bias"])
        taps[f"vision_block_{i}"] = x
        if i in cfg.v_deep:
            k = cfg.v_deep.index(i)
            deep.append(merger(f"{VP}deepstack_merger_list.{k}.", x, True))
            taps[f"vision_deepstack_{k}"] = deep[-1]
    out = merger(VP + "merger.", x, False)
    taps["vision_merger"] = out
    return out, deep


def rms(x, wt, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * wt


def llm(cfg, w, ids, mask, pos, img_emb, deep, taps):
    S, h, nh, nkv, hd, eps = ids.shape[0], cfg.t_hidden, cfg.t_heads, cfg.t_kv, cfg.t_hd, cfg.t_eps
    x = w[LP + "embed_tokens.weight"][ids]
    img = ids == cfg.image_token
    x[img] = img_emb
    taps["llm_inputs_embeds"] = x
    inv = 1.0 / (cfg.theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    th = pos.float()[:, :, None] * inv  # [3, S, hd/2]
    ang = th[0].clone()
    for c, off in ((1, 1), (2, 2)):
        sl = slice(off, cfg.mrope[c] * 3, 3)
        ang[:, sl] = th[c][:, sl]
    emb = torch.cat([ang, ang], dim=-1)
    cos, sin = emb.cos()[None], emb.sin()[None]
    bias = torch.full((S, S), float("-inf")).triu(1)
    if mask is not None and not bool(mask.all()):
        bias = bias.masked_fill(~mask.bool()[None, :], float("-inf"))

    def rot(t):
        a, b = t[..., : hd // 2], t[..., hd // 2:]
        return t * cos + torch.cat([-b, a], dim=-1) * sin

    for i in range(cfg.select):
        b = f"{LP}layers.{i}."
        y = rms(x, w[b + "input_layernorm.weight"], eps)
        q = rms(F.linear(y, w[b + "self_attn.q_proj.weight"]).view(S, nh, hd), w[b + "self_attn.q_norm.weight"], eps)
        k = rms(F.linear(y, w[b + "self_attn.k_proj.weight"]).view(S, nkv, hd), w[b + "self_attn.k_norm.weight"], eps)
        v = F.linear(y, w[b + "self_attn.v_proj.weight"]).view(S, nkv, hd)
        q, k, v = rot(q.transpose(0, 1)), rot(k.transpose(0, 1)), v.transpose(0, 1)
        k, v = k.repeat_interleave(nh // nkv, dim=0), v.repeat_interleave(nh // nkv, dim=0)
        p = (q @ k.transpose(-1, -2) / math.sqrt(hd) + bias).softmax(-1)
        x = x + F.linear((p @ v).transpose(0, 1).reshape(S, nh * hd), w[b + "self_attn.o_proj.weight"])
        y = rms(x, w[b + "post_attention_layernorm.weight"], eps)
        y = F.silu(F.linear(y, w[b + "mlp.gate_proj.weight"])) * F.linear(y, w[b + "mlp.up_proj.weight"])
        x = x + F.linear(y, w[b + "mlp.down_proj.weight"])
        if i < len(deep):
            x = x.clone()
            x[img] += deep[i]
        taps[f"llm_layer_{i}"] = x
    taps["backbone_features"] = x
    return x


def mha(q, k, v, heads, mask=None):
    T, D = q.shape
    hd = D // heads
    q, k, v = (t.reshape(-1, heads, hd).transpose(0, 1) for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    if mask is not None:
        s = s.masked_fill(~mask[None, None, :], float("-inf"))
    return (s.softmax(-1) @ v).transpose(0, 1).reshape(T, D)


def adapter(cfg, w, feats, taps):
    D = feats.shape[1]
    x = F.layer_norm(feats, (D,), w[AP + "vlln.weight"], w[AP + "vlln.bias"], 1e-5)
    taps["vlln_out"] = x
    for i in range(cfg.vl_layers):
        b = f"{AP}vl_self_attention.transformer_blocks.{i}."
        L = lambda n, t: F.linear(t, w[b + n + ".weight"], w[b + n + ".bias"])  # noqa: E731
        y = F.layer_norm(x, (D,), w[b + "norm1.weight"], w[b + "norm1.bias"], 1e-5)
        x = x + L("attn1.to_out.0", mha(L("attn1.to_q", y), L("attn1.to_k", y), L("attn1.to_v", y), cfg.vl_heads))
        y = F.layer_norm(x, (D,), w[b + "norm3.weight"], w[b + "norm3.bias"], 1e-5)
        x = x + L("ff.net.2", F.gelu(L("ff.net.0.proj", y), approximate="tanh"))
    taps["adapter_out"] = x
    return x


def timestep_proj(tau):
    half = 128
    e = torch.exp(torch.tensor(-math.log(10000), dtype=torch.float32) * torch.arange(half, dtype=torch.float32) / (half - 1))
    a = float(tau) * e
    return torch.cat([torch.cos(a), torch.sin(a)])


def action_sinusoid(tau, W):
    half = W // 2
    e = torch.exp(-torch.arange(half, dtype=torch.float32) * (torch.tensor(math.log(10000), dtype=torch.float32) / half))
    a = float(tau) * e
    return torch.cat([torch.sin(a), torch.cos(a)])


class Head:
    """The action head's per-embodiment weights and the DiT block kinds."""

    def __init__(self, cfg, w, slot):
        self.cfg, self.w, self.slot = cfg, w, slot
        self.kinds = []
        for i in range(cfg.layers):
            if i % 2 == 1:
                self.kinds.append("self")
            elif i % (2 * cfg.every) == 0:
                self.kinds.append("text")
            else:
                self.kinds.append("image")

    def cat(self, name, x):
        return x @ self.w[AP + name + ".W"][self.slot] + self.w[AP + name + ".b"][self.slot]

    def lin(self, name, x):
        return F.linear(x, self.w[AP + name + ".weight"], self.w[AP + name + ".bias"])

    def temb(self, tau):
        p = "model.timestep_encoder.timestep_embedder."
        return self.lin(p + "linear_2", F.silu(self.lin(p + "linear_1", timestep_proj(tau))))


def denoise(cfg, w, head, vl, img, valid, state, noise, hoisted, taps):
    W, H, T = cfg.W, cfg.heads, cfg.horizon
    pos = w[AP + "position_embedding.weight"][:T]
    sf = head.cat("state_encoder.layer2", F.relu(head.cat("state_encoder.layer1", state)))
    taps["state_features"] = sf
    keys = {"text": ~img & valid, "image": img & valid}
    rows = {k: vl[m] for k, m in keys.items()}
    taus = [int(k / cfg.steps * cfg.buckets) for k in range(cfg.steps)]
    pre = {}
    if hoisted:  # what does not depend on the step's input, once
        for i, kind in enumerate(head.kinds):
            if kind != "self":
                b = f"model.transformer_blocks.{i}."
                pre[i] = (head.lin(b + "attn1.to_k", rows[kind]), head.lin(b + "attn1.to_v", rows[kind]))
        ada = {}
        for tau in taus:
            st = F.silu(head.temb(tau))
            ada[tau] = ([head.lin(f"model.transformer_blocks.{i}.norm1.linear", st).chunk(2) for i in range(cfg.layers)],
                        head.lin("model.proj_out_1", st).chunk(2))
    x = noise
    dt = 1.0 / cfg.steps
    for tau in taus:
        a = head.cat("action_encoder.W1", x)
        e = action_sinusoid(tau, W).expand(T, W)
        hh = F.silu(head.cat("action_encoder.W2", torch.cat([a, e], dim=1)))
        z = torch.cat([sf, head.cat("action_encoder.W3", hh) + pos])
        st = None if hoisted else F.silu(head.temb(tau))
        for i, kind in enumerate(head.kinds):
            b = f"model.transformer_blocks.{i}."
            sc, sh = ada[tau][0][i] if hoisted else head.lin(b + "norm1.linear", st).chunk(2)
            n = F.layer_norm(z, (W,), eps=1e-5) * (1 + sc) + sh
            q = head.lin(b + "attn1.to_q", n)
            if kind == "self":
                o = mha(q, head.lin(b + "attn1.to_k", n), head.lin(b + "attn1.to_v", n), H)
            elif hoisted:
                o = mha(q, pre[i][0], pre[i][1], H)
            else:
                o = mha(q, head.lin(b + "attn1.to_k", vl), head.lin(b + "attn1.to_v", vl), H, keys[kind])
            z = z + head.lin(b + "attn1.to_out.0", o)
            y = F.gelu(head.lin(b + "ff.net.0.proj", F.layer_norm(z, (W,), eps=1e-5)), approximate="tanh")
            z = z + head.lin(b + "ff.net.2", y)
        shift, scale = ada[tau][1] if hoisted else head.lin("model.proj_out_1", st).chunk(2)
        out = head.lin("model.proj_out_2", F.layer_norm(z, (W,), eps=1e-6) * (1 + scale) + shift)
        v = head.cat("action_decoder.layer2", F.relu(head.cat("action_decoder.layer1", out[1:])))
        x = x + dt * v
    taps["action_pred"] = x
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
    ap.add_argument("--out", default="")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--threads", type=int, default=int(os.environ["OMP_NUM_THREADS"]))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torchinfo.report()

    c0, t0 = time.process_time(), time.perf_counter()
    cfg = Cfg(args.weights_dir)
    w = load_weights(args.weights_dir)
    print(f"torch_load s={time.perf_counter() - t0:.3f} cpu_s={time.process_time() - c0:.3f} "
          f"rss_mib={rss_mib():.0f} tensors={len(w)}", flush=True)
    if args.load_only:
        return

    ld = lambda n: np.load(os.path.join(args.inputs, n + ".npy"))  # noqa: E731
    pix = torch.from_numpy(ld("pixel_values")).float()
    grids = [tuple(int(v) for v in g) for g in ld("image_grid_thw")]
    ids = torch.from_numpy(ld("input_ids").reshape(-1)).long()
    mask = torch.from_numpy(ld("attention_mask").reshape(-1)).long()
    pos = torch.from_numpy(ld("position_ids").reshape(3, -1)).long()
    state = torch.from_numpy(ld("state_normalized").reshape(1, -1)).float()
    noise = torch.from_numpy(ld("noise").reshape(cfg.horizon, -1)).float()
    img, valid = ids == cfg.image_token, mask != 0
    head = Head(cfg, w, args.slot)

    taps = {}
    res = {}
    with torch.no_grad():
        r = timed(lambda: res.__setitem__("vision", vision(cfg, w, pix, grids, taps)), args.reps, args.threads)
        print(f"torch_stage name=vision ms={r[0] * 1e3:.1f} median_ms={r[1] * 1e3:.1f} cpu_ms={r[2] * 1e3:.1f}", flush=True)
        emb, deep = res["vision"]
        r = timed(lambda: res.__setitem__("llm", llm(cfg, w, ids, mask, pos, emb, deep, taps)), args.reps, args.threads)
        print(f"torch_stage name=llm ms={r[0] * 1e3:.1f} median_ms={r[1] * 1e3:.1f} cpu_ms={r[2] * 1e3:.1f}", flush=True)
        r = timed(lambda: res.__setitem__("adapter", adapter(cfg, w, res["llm"], taps)), args.reps, args.threads)
        print(f"torch_stage name=adapter ms={r[0] * 1e3:.1f} median_ms={r[1] * 1e3:.1f} cpu_ms={r[2] * 1e3:.1f}", flush=True)
        for name, hoisted in (("denoise", False), ("denoise_hoisted", True)):
            r = timed(lambda: res.__setitem__(name, denoise(cfg, w, head, res["adapter"], img, valid, state, noise,
                                                            hoisted, taps)), args.reps, args.threads)
            print(f"torch_stage name={name} ms={r[0] * 1e3:.1f} median_ms={r[1] * 1e3:.1f} cpu_ms={r[2] * 1e3:.1f}",
                  flush=True)
    print(f"torch_rss peak_mib={rss_mib('VmHWM'):.0f}", flush=True)
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
