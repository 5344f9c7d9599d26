"""GR00T N1.7 inference in PyTorch: vision -> llm -> adapter -> denoise.

Functional style, written from the public architecture (Hugging Face transformers' Qwen3-VL for
vision and llm, Isaac-GR00T's N1.7 action head for adapter and denoise) and checked against the
fp32 goldens of testdata/n17-tiny/caseA. It runs on any torch device in fp32 or bf16:

* fp32 reproduces the Go CPU backend (device/cpu) to ~1e-6 of the magnitudes.
* bf16 stores the matrices and runs the matmuls in bf16; norms, softmax and the Euler state
  stay in fp32 (as upstream's Qwen3 RMSNorm and flow-matching loop do).

What does not depend on a request is computed once at load: the DiT's AdaLN rows and output
modulation per timestep, the action-encoder sinusoids, the position rows. What depends only on
the image layout (the vision position embedding and rotary tables) is cached per layout. Each stage
is a pure function of tensors with no host synchronisation, so it can be captured as a CUDA graph
per layout (graphs.py) or compiled.

Model owns its weights; it is not safe for concurrent use (the runner serves batch 1).
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from . import config as configmod
from .safetensors import Checkpoint

VP = "backbone.model.model.visual."
LP = "backbone.model.model.language_model."
AP = "action_head."

Grid = Tuple[int, int, int]
Taps = Optional[Dict[str, torch.Tensor]]

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class InputError(ValueError):
    """Inputs outside what the model serves (the runner answers ERROR input)."""


class Cancelled(Exception):
    """The call was cancelled between two steps (the runner answers ERROR cancelled)."""


@dataclass
class Inputs:
    """One encoded observation, as the gateway sends it (tensors on the CPU, possibly views of
    shared memory: the model copies them to its device and never writes them)."""
    pixel_values: torch.Tensor  # [rows, cols] float32
    grids: List[Grid]  # one (t, h, w) patch grid per image
    input_ids: torch.Tensor  # [S] int32/int64
    position_ids: torch.Tensor  # [3, S] int32/int64
    state: torch.Tensor  # [state_dim] float32, normalised
    embodiment_id: int
    attention_mask: Optional[torch.Tensor] = None  # [S], None: all ones
    noise: Optional[torch.Tensor] = None  # [horizon * action_dim] float32, None: drawn from seed
    seed: int = 0
    rtc: Optional["RTC"] = None  # real-time chunking, None: the plain sampler


@dataclass
class RTC:
    """Real-time chunking by inpainting, upstream N1.7's (shared/spec/rtc.md §1): rows 0..O-1 of the
    initial x are prev's rows H-O..H-1; row i moves by (dt·v)·s_i, s = 0 below F, a ramp on F..O-1,
    1 from O on. O = F = 0 is the plain sampler."""
    prev: torch.Tensor  # [prev_rows, action_dim] float32, normalised action_pred of the previous chunk
    horizon: int  # H: prev's unpadded horizon (action_horizon)
    overlap: int  # O (rtc_overlap_steps)
    frozen: int  # F (rtc_frozen_steps)
    ramp_rate: float  # r (rtc_ramp_rate)

    def check(self, horizon: int, action_dim: int) -> None:
        rows = int(self.prev.shape[0]) if self.prev.dim() == 2 else -1
        if self.prev.dim() != 2 or self.prev.shape[1] != action_dim or not 1 <= rows <= horizon:
            raise InputError(f"rtc_prev_action is {list(self.prev.shape)}, want [1..{horizon}, {action_dim}]")
        if not 1 <= self.horizon <= rows:
            raise InputError(f"action_horizon {self.horizon} is outside 1..{rows} (the previous chunk's rows)")
        if not 0 <= self.overlap <= self.horizon:
            raise InputError(f"rtc_overlap_steps {self.overlap} is outside 0..action_horizon {self.horizon}")
        if not 0 <= self.frozen <= self.overlap:
            raise InputError(f"rtc_frozen_steps {self.frozen} is outside 0..rtc_overlap_steps {self.overlap}")
        if not (math.isfinite(self.ramp_rate) and self.ramp_rate > 0):
            raise InputError(f"rtc_ramp_rate {self.ramp_rate}: want a finite number > 0")
        if not bool(torch.isfinite(self.prev).all()):
            raise InputError("rtc_prev_action has non-finite values")

    def strengths(self, rows: int) -> torch.Tensor:
        """Each row's update strength [rows] (float32, CPU), with upstream's torch ops."""
        s = torch.ones(rows)
        s[: self.frozen] = 0
        n = self.overlap - self.frozen + 2
        if n > 2:
            t = torch.linspace(0, 1, n)
            g = (1 - torch.exp(-self.ramp_rate * t)) / torch.clamp(1 - torch.exp(-self.ramp_rate * t[-1]), min=1e-8)
            s[self.frozen:self.overlap] = g[1:-1]
        return s


def randn(n: int, seed: int) -> torch.Tensor:
    """torch.randn(n) from a CPU generator seeded with seed: the Go backend's noise (core/model/noise
    reproduces this bit for bit on x86-64 torch's AVX2 kernel)."""
    g = torch.Generator().manual_seed(seed & 0xFFFFFFFFFFFFFFFF)
    return torch.randn(n, generator=g, dtype=torch.float32)


def _keep_fp32(name: str) -> bool:
    """Norm weights and biases stay fp32: norms are computed in fp32 whatever the dtype."""
    return bool(re.search(r"(norm\d?|layernorm|vlln|q_norm|k_norm)\.(weight|bias)$", name))


def _used(name: str, cfg: configmod.Config) -> bool:
    if name == "lm_head.weight" or name == LP + "norm.weight":
        return False
    m = re.match(re.escape(LP) + r"layers\.(\d+)\.", name)
    return not (m and int(m.group(1)) >= cfg.select)  # only the kept decoder layers


class Model:
    """The whole model on one device in one dtype. See the module doc."""

    def __init__(self, cfg: configmod.Config, w: Dict[str, torch.Tensor], device: torch.device,
                 dtype: torch.dtype, digest: str = "") -> None:
        self.cfg, self.w, self.device, self.dtype, self.digest = cfg, w, device, dtype, digest
        self.params = sum(t.numel() for t in w.values())
        self.slots = int(w[AP + "state_encoder.layer1.W"].shape[0])
        self._vision_tables: Dict[Tuple[Grid, ...], tuple] = {}
        self._hoist()

    # ---- loading ----

    @classmethod
    def load(cls, weights_dir: str, device: str = "cpu", dtype: torch.dtype = torch.float32) -> "Model":
        """Reads the checkpoint in weights_dir and places every used tensor on device in dtype
        (norm parameters in fp32). The file mappings are released before it returns."""
        cfg = configmod.load(weights_dir)
        ck = Checkpoint(weights_dir)
        dev = torch.device(device)
        w: Dict[str, torch.Tensor] = {}
        try:
            for name in list(ck.names()):
                if not _used(name, cfg):
                    continue
                t = ck.tensor(name)
                want = torch.float32 if _keep_fp32(name) else dtype
                if dev.type == "cpu":
                    w[name] = t.to(dtype=want, copy=True)
                else:
                    w[name] = t.to(device=dev, dtype=want)
            digest = ck.digest()
        finally:
            ck.close()
        need = [VP + "patch_embed.proj.weight", LP + "embed_tokens.weight", AP + "state_encoder.layer1.W",
                AP + "position_embedding.weight"]
        missing = [n for n in need if n not in w]
        if missing:
            raise configmod.ConfigError(f"checkpoint[{weights_dir}]: missing tensors {missing}")
        return cls(cfg, w, dev, dtype, digest)

    def _hoist(self) -> None:
        """What no request changes: per-timestep AdaLN rows, output modulation, sinusoids."""
        cfg, W = self.cfg, self.cfg.width
        with torch.no_grad():
            self.pos_rows = self.w[AP + "position_embedding.weight"][: cfg.horizon]
            self.ada: List[List[Tuple[torch.Tensor, torch.Tensor]]] = []
            self.out_mod: List[Tuple[torch.Tensor, torch.Tensor]] = []
            self.sinus: List[torch.Tensor] = []
            for tau in cfg.taus:
                st = F.silu(self._temb(tau))
                self.ada.append([tuple(self._lin(f"model.transformer_blocks.{i}.norm1.linear", st).chunk(2))
                                 for i in range(cfg.layers)])
                self.out_mod.append(tuple(self._lin("model.proj_out_1", st).chunk(2)))
                self.sinus.append(_action_sinusoid(tau, W).to(self.device, self.dtype).expand(cfg.horizon, W))

    # ---- small pieces ----

    def _lin(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.w[AP + name + ".weight"], self.w[AP + name + ".bias"])

    def _cat(self, name: str, slot: int, x: torch.Tensor) -> torch.Tensor:
        """A category-specific linear: x @ W[slot] + b[slot]."""
        return x @ self.w[AP + name + ".W"][slot] + self.w[AP + name + ".b"][slot]

    def _temb(self, tau: int) -> torch.Tensor:
        p = "model.timestep_encoder.timestep_embedder."
        proj = _timestep_proj(tau).to(self.device, self.dtype)
        return self._lin(p + "linear_2", F.silu(self._lin(p + "linear_1", proj)))

    def _ln(self, x: torch.Tensor, n: int, w: Optional[torch.Tensor], b: Optional[torch.Tensor],
            eps: float) -> torch.Tensor:
        if x.dtype == torch.float32:
            return F.layer_norm(x, (n,), w, b, eps)
        return F.layer_norm(x.float(), (n,), w, b, eps).to(x.dtype)

    def _rms(self, x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w).to(x.dtype)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """softmax(q kᵀ / √d) v over [..., L, d]; mask (bool, True = attend) broadcasts to the scores.
        A query row with no key to attend to gets zeros (as the Go backend; softmax would give NaN)."""
        if HAS_SDPA and q.device.type == "cuda":
            # The fused kernels (which accumulate in fp32) want 4-D [batch, heads, L, d].
            extra = 4 - q.dim()
            q4, k4, v4 = (t.reshape((1,) * extra + tuple(t.shape)) for t in (q, k, v))
            m4 = None if mask is None else mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
            o = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=m4).reshape(q.shape[:-1] + v.shape[-1:])
        elif q.dtype != torch.float32:  # scores rounded to bf16 would cost ~1e-3 of PCC per block
            return self._attend(q.float(), k.float(), v.float(), mask).to(q.dtype)
        else:
            s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            o = s.softmax(-1) @ v
        if mask is not None:
            o = torch.where(mask.any(-1)[..., None], o, torch.zeros((), dtype=o.dtype, device=o.device))
        return o

    def _mha(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
        T, D = q.shape
        hd = D // heads
        q, k, v = (t.reshape(-1, heads, hd).transpose(0, 1) for t in (q, k, v))
        return self._attend(q, k, v).transpose(0, 1).reshape(T, D)

    # ---- vision ----

    def vision_tables(self, grids: Sequence[Grid]) -> tuple:
        """Position embedding, rotary cos/sin and segment lengths of an image layout (cached)."""
        key = tuple(tuple(int(v) for v in g) for g in grids)
        if key in self._vision_tables:
            return self._vision_tables[key]
        cfg, w = self.cfg, self.w
        h, ms, side = cfg.v_hidden, cfg.merge, cfg.v_side
        hd = h // cfg.v_heads
        tab = w[VP + "pos_embed.weight"].float()
        inv = 1.0 / (10000 ** (torch.arange(0, hd // 2, 2, dtype=torch.float32, device=self.device) / (hd // 2)))
        pos, angs, segs = [], [], []
        for t, gh, gw in key:
            hv = torch.linspace(0, side - 1, gh, dtype=torch.float32, device=self.device)
            wv = torch.linspace(0, side - 1, gw, dtype=torch.float32, device=self.device)
            hf, wf = hv.long(), wv.long()
            hc, wc = (hf + 1).clamp(max=side - 1), (wf + 1).clamp(max=side - 1)
            dh, dw = (hv - hf.float())[:, None, None], (wv - wf.float())[None, :, None]

            def rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
                return tab[(a[:, None] * side + b[None, :]).reshape(-1)].reshape(gh, gw, h)

            pe = (rows(hf, wf) * ((1 - dh) * (1 - dw)) + rows(hf, wc) * ((1 - dh) * dw)
                  + rows(hc, wf) * (dh * (1 - dw)) + rows(hc, wc) * (dh * dw))
            pe = pe.reshape(gh // ms, ms, gw // ms, ms, h).permute(0, 2, 1, 3, 4).reshape(gh * gw, h)
            r = torch.arange(gh, device=self.device).view(gh // ms, ms, 1, 1).expand(gh // ms, ms, gw // ms, ms)
            c = torch.arange(gw, device=self.device).view(1, 1, gw // ms, ms).expand(gh // ms, ms, gw // ms, ms)
            r = r.permute(0, 2, 1, 3).reshape(-1).float()
            c = c.permute(0, 2, 1, 3).reshape(-1).float()
            a = torch.cat([r[:, None] * inv, c[:, None] * inv], dim=1)
            for _ in range(t):
                pos.append(pe)
                angs.append(a)
                segs.append(gh * gw)
        emb = torch.cat(angs).repeat(1, 2)
        cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]  # fp32: the rotation runs in fp32
        out = (torch.cat(pos).to(self.dtype), cos, sin, tuple(segs))
        if len(self._vision_tables) >= 32:
            self._vision_tables.pop(next(iter(self._vision_tables)))
        self._vision_tables[key] = out
        return out

    def vision(self, pix: torch.Tensor, grids: Sequence[Grid], taps: Taps = None,
               check: Callable[[], None] = lambda: None) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """Patch rows [n, cols] -> merged image rows [n/merge², D] and the deepstack features."""
        cfg, w = self.cfg, self.w
        h, heads = cfg.v_hidden, cfg.v_heads
        hd = h // heads
        n = pix.shape[0]
        pos, cos, sin, segs = self.vision_tables(grids)
        x = F.linear(pix, w[VP + "patch_embed.proj.weight"].reshape(h, -1), w[VP + "patch_embed.proj.bias"])
        _tap(taps, "vision_patch_embed", x)
        _tap(taps, "vision_pos_embed", pos)
        x = x + pos
        same = len(set(segs)) == 1

        def rot(q: torch.Tensor) -> torch.Tensor:
            qf = q.float()
            a, b = qf[..., : hd // 2], qf[..., hd // 2:]
            return (qf * cos + torch.cat([-b, a], dim=-1) * sin).to(q.dtype)

        def attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if same:  # the frames batched (equivalent to upstream's per-frame loop)
                f, s = len(segs), segs[0]
                q, k, v = (t.reshape(f, s, heads, hd).transpose(1, 2) for t in (q, k, v))
                return self._attend(q, k, v).transpose(1, 2).reshape(n, h)
            outs, o = [], 0
            for s in segs:
                qq, kk, vv = (t[o:o + s].transpose(0, 1) for t in (q, k, v))
                outs.append(self._attend(qq, kk, vv).transpose(0, 1).reshape(s, h))
                o += s
            return torch.cat(outs)

        def merger(p: str, y: torch.Tensor, post_norm: bool) -> torch.Tensor:
            if post_norm:
                y = self._ln(y.reshape(-1, 4 * h), 4 * h, w[p + "norm.weight"], w[p + "norm.bias"], 1e-6)
            else:
                y = self._ln(y, h, w[p + "norm.weight"], w[p + "norm.bias"], 1e-6).reshape(-1, 4 * h)
            y = F.gelu(F.linear(y, w[p + "linear_fc1.weight"], w[p + "linear_fc1.bias"]))
            return F.linear(y, w[p + "linear_fc2.weight"], w[p + "linear_fc2.bias"])

        deep = []
        for i in range(cfg.v_depth):
            check()
            b = f"{VP}blocks.{i}."
            y = self._ln(x, h, w[b + "norm1.weight"], w[b + "norm1.bias"], 1e-6)
            q, k, v = F.linear(y, w[b + "attn.qkv.weight"], w[b + "attn.qkv.bias"]).view(n, 3, heads, hd).unbind(1)
            x = x + F.linear(attn(rot(q), rot(k), v), w[b + "attn.proj.weight"], w[b + "attn.proj.bias"])
            y = self._ln(x, h, w[b + "norm2.weight"], w[b + "norm2.bias"], 1e-6)
            y = F.gelu(F.linear(y, w[b + "mlp.linear_fc1.weight"], w[b + "mlp.linear_fc1.bias"]), approximate="tanh")
            x = x + F.linear(y, w[b + "mlp.linear_fc2.weight"], w[b + "mlp.linear_fc2.bias"])
            _tap(taps, f"vision_block_{i}", x)
            if i in cfg.v_deep:
                k_ = cfg.v_deep.index(i)
                deep.append(merger(f"{VP}deepstack_merger_list.{k_}.", x, True))
                _tap(taps, f"vision_deepstack_{k_}", deep[-1])
        out = merger(VP + "merger.", x, False)
        _tap(taps, "vision_merger", out)
        return out, deep

    # ---- llm ----

    def llm(self, ids: torch.Tensor, mask: Optional[torch.Tensor], pos: torch.Tensor, img_idx: torch.Tensor,
            img_emb: torch.Tensor, deep: List[torch.Tensor], taps: Taps = None,
            check: Callable[[], None] = lambda: None) -> torch.Tensor:
        """Token embeddings with the image rows at img_idx, interleaved mRoPE, the kept decoder
        layers with deepstack injection; the hidden states before the final norm [S, D]."""
        cfg, w = self.cfg, self.w
        S, nh, nkv, hd, eps = ids.shape[0], cfg.t_heads, cfg.t_kv, cfg.t_hd, cfg.t_eps
        x = w[LP + "embed_tokens.weight"].index_select(0, ids).index_copy(0, img_idx, img_emb)
        _tap(taps, "llm_inputs_embeds", x)
        inv = 1.0 / (cfg.theta ** (torch.arange(0, hd, 2, dtype=torch.float32, device=x.device) / hd))
        th = pos.float()[:, :, None] * inv  # [3, S, hd/2]
        ang = th[0].clone()
        for c, off in ((1, 1), (2, 2)):
            sl = slice(off, cfg.mrope[c] * 3, 3)
            ang[:, sl] = th[c][:, sl]
        emb = torch.cat([ang, ang], dim=-1)
        cos, sin = emb.cos()[None].to(x.dtype), emb.sin()[None].to(x.dtype)
        allowed = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()
        if mask is not None:
            allowed = allowed & (mask != 0)[None, :]

        def rot(t: torch.Tensor) -> torch.Tensor:
            a, b = t[..., : hd // 2], t[..., hd // 2:]
            return t * cos + torch.cat([-b, a], dim=-1) * sin

        for i in range(cfg.select):
            check()
            b = f"{LP}layers.{i}."
            y = self._rms(x, w[b + "input_layernorm.weight"], eps)
            q = self._rms(F.linear(y, w[b + "self_attn.q_proj.weight"]).view(S, nh, hd), w[b + "self_attn.q_norm.weight"], eps)
            k = self._rms(F.linear(y, w[b + "self_attn.k_proj.weight"]).view(S, nkv, hd), w[b + "self_attn.k_norm.weight"], eps)
            v = F.linear(y, w[b + "self_attn.v_proj.weight"]).view(S, nkv, hd)
            q, k, v = rot(q.transpose(0, 1)), rot(k.transpose(0, 1)), v.transpose(0, 1)
            k, v = k.repeat_interleave(nh // nkv, dim=0), v.repeat_interleave(nh // nkv, dim=0)
            o = self._attend(q, k, v, allowed)
            x = x + F.linear(o.transpose(0, 1).reshape(S, nh * hd), w[b + "self_attn.o_proj.weight"])
            y = self._rms(x, w[b + "post_attention_layernorm.weight"], eps)
            y = F.silu(F.linear(y, w[b + "mlp.gate_proj.weight"])) * F.linear(y, w[b + "mlp.up_proj.weight"])
            x = x + F.linear(y, w[b + "mlp.down_proj.weight"])
            if i < len(deep):
                x = x.index_add(0, img_idx, deep[i])
            _tap(taps, f"llm_layer_{i}", x)
        _tap(taps, "backbone_features", x)
        return x

    # ---- adapter ----

    def adapter(self, feats: torch.Tensor, taps: Taps = None) -> torch.Tensor:
        """vlln, then the VL self-attention blocks."""
        cfg, w = self.cfg, self.w
        D = feats.shape[1]
        x = self._ln(feats, D, w[AP + "vlln.weight"], w[AP + "vlln.bias"], 1e-5)
        _tap(taps, "vlln_out", x)
        for i in range(cfg.vl_layers):
            b = f"{AP}vl_self_attention.transformer_blocks.{i}."

            def lin(n: str, t: torch.Tensor) -> torch.Tensor:
                return F.linear(t, w[b + n + ".weight"], w[b + n + ".bias"])

            y = self._ln(x, D, w[b + "norm1.weight"], w[b + "norm1.bias"], 1e-5)
            x = x + lin("attn1.to_out.0", self._mha(lin("attn1.to_q", y), lin("attn1.to_k", y), lin("attn1.to_v", y),
                                                    cfg.vl_heads))
            y = self._ln(x, D, w[b + "norm3.weight"], w[b + "norm3.bias"], 1e-5)
            x = x + lin("ff.net.2", F.gelu(lin("ff.net.0.proj", y), approximate="tanh"))
        _tap(taps, "adapter_out", x)
        return x

    # ---- denoise ----

    def denoise(self, slot: int, text_rows: torch.Tensor, img_rows: torch.Tensor, state: torch.Tensor,
                noise: torch.Tensor, taps: Taps = None, check: Callable[[], None] = lambda: None,
                strength: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The flow-matching loop: state encoder, then num_inference_timesteps Euler steps of action
        encoder + DiT + decoder from noise [H, A] (fp32); the cross-attention K/V of the VL rows are
        projected once per request. strength [H] (RTC, fp32): row i moves by (dt·v)·strength_i.
        Returns action_pred [H, A] in fp32."""
        cfg, W, H = self.cfg, self.cfg.width, self.cfg.heads
        dt = self.dtype
        sf = self._cat("state_encoder.layer2", slot, F.relu(self._cat("state_encoder.layer1", slot, state.to(dt))))
        _tap(taps, "state_features", sf)
        rows = {"text": text_rows, "image": img_rows}
        kv: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = {}
        for i, kind in enumerate(cfg.kinds):
            if kind != "self":
                b = f"model.transformer_blocks.{i}."
                kv[i] = (self._lin(b + "attn1.to_k", rows[kind]), self._lin(b + "attn1.to_v", rows[kind]))
        x = noise
        step = 1.0 / cfg.steps
        for s in range(cfg.steps):
            check()
            a = self._cat("action_encoder.W1", slot, x.to(dt))
            hh = F.silu(self._cat("action_encoder.W2", slot, torch.cat([a, self.sinus[s]], dim=1)))
            z = torch.cat([sf, self._cat("action_encoder.W3", slot, hh) + self.pos_rows])
            for i, kind in enumerate(cfg.kinds):
                b = f"model.transformer_blocks.{i}."
                sc, sh = self.ada[s][i]
                n = self._ln(z, W, None, None, 1e-5) * (1 + sc) + sh
                q = self._lin(b + "attn1.to_q", n)
                if kind == "self":
                    o = self._mha(q, self._lin(b + "attn1.to_k", n), self._lin(b + "attn1.to_v", n), H)
                else:
                    o = self._mha(q, kv[i][0], kv[i][1], H)
                z = z + self._lin(b + "attn1.to_out.0", o)
                y = F.gelu(self._lin(b + "ff.net.0.proj", self._ln(z, W, None, None, 1e-5)), approximate="tanh")
                z = z + self._lin(b + "ff.net.2", y)
            shift, scale = self.out_mod[s]
            out = self._lin("model.proj_out_2", self._ln(z, W, None, None, 1e-6) * (1 + scale) + shift)
            v = self._cat("action_decoder.layer2", slot, F.relu(self._cat("action_decoder.layer1", slot, out[1:])))
            x = x + step * v.float() if strength is None else x + (step * v.float()) * strength[:, None]
        _tap(taps, "action_pred", x)
        return x

    # ---- one request ----

    def check_inputs(self, inp: Inputs) -> None:
        """Raises InputError for inputs the model cannot run (the gateway checks them first)."""
        cfg = self.cfg
        S = int(inp.input_ids.shape[0])
        rows = int(inp.pixel_values.shape[0])
        if inp.pixel_values.dim() != 2 or inp.pixel_values.shape[1] != cfg.pixel_cols:
            raise InputError(f"pixel_values is {list(inp.pixel_values.shape)}, want [rows, {cfg.pixel_cols}]")
        if not inp.grids:
            raise InputError("image_grid_thw is empty")
        total = 0
        for i, g in enumerate(inp.grids):
            if len(g) != 3 or min(g) < 1 or g[1] % cfg.merge or g[2] % cfg.merge:
                raise InputError(f"image_grid_thw[{i}] = {list(g)}: want positive [t, h, w] with h, w multiples of {cfg.merge}")
            total += g[0] * g[1] * g[2]
        if total != rows:
            raise InputError(f"image_grid_thw holds {total} patches, pixel_values {rows} rows")
        if S < 1:
            raise InputError("input_ids is empty")
        if tuple(inp.position_ids.shape) != (3, S):
            raise InputError(f"position_ids is {list(inp.position_ids.shape)}, want [3, {S}]")
        if inp.attention_mask is not None and int(inp.attention_mask.shape[0]) != S:
            raise InputError(f"attention_mask has {inp.attention_mask.shape[0]} values, input_ids {S}")
        if int(inp.state.numel()) != cfg.state_dim:
            raise InputError(f"state has {inp.state.numel()} values, want {cfg.state_dim}")
        if inp.noise is not None and int(inp.noise.numel()) != cfg.horizon * cfg.action_dim:
            raise InputError(f"noise has {inp.noise.numel()} values, want {cfg.horizon}·{cfg.action_dim}")
        if inp.rtc is not None:
            inp.rtc.check(cfg.horizon, cfg.action_dim)
        if not 0 <= inp.embodiment_id < self.slots:
            raise InputError(f"embodiment_id {inp.embodiment_id} is outside the checkpoint's {self.slots} projector slots")
        n_img = int((inp.input_ids == cfg.image_token).sum())
        if n_img * cfg.merge * cfg.merge != rows:
            raise InputError(f"input_ids hold {n_img} image tokens, pixel_values {rows} rows "
                             f"(want {rows // (cfg.merge * cfg.merge)})")
        vocab = self.w[LP + "embed_tokens.weight"].shape[0]
        if int(inp.input_ids.min()) < 0 or int(inp.input_ids.max()) >= vocab:
            raise InputError(f"input_ids outside the vocabulary [0, {vocab})")

    def predict(self, inp: Inputs, taps: Taps = None, check: Callable[[], None] = lambda: None,
                graphs: Optional["object"] = None) -> Tuple[torch.Tensor, List[Tuple[str, int]]]:
        """Runs the four stages on inp; returns action_pred [H, A] (fp32, CPU) and each stage's wall
        time in ns. check() is called between stages and inside them (between blocks, layers and
        steps) and may raise Cancelled. graphs (graphs.Graphs), when given, replays captured CUDA
        graphs per layout instead of running the stages eagerly."""
        self.check_inputs(inp)
        cfg, dev, dt = self.cfg, self.device, self.dtype
        cuda = dev.type == "cuda"
        stages: List[Tuple[str, int]] = []
        t = time.perf_counter_ns()

        def done(name: str) -> None:
            nonlocal t
            if cuda:
                torch.cuda.synchronize(dev)
            now = time.perf_counter_ns()
            stages.append((name, now - t))
            t = now

        with torch.no_grad():
            ids_cpu = inp.input_ids.long()
            img_cpu = ids_cpu == cfg.image_token
            valid_cpu = torch.ones_like(img_cpu) if inp.attention_mask is None else inp.attention_mask != 0
            img_idx = img_cpu.nonzero().flatten().to(dev)
            text_idx = (~img_cpu & valid_cpu).nonzero().flatten().to(dev)
            img_valid_idx = (img_cpu & valid_cpu).nonzero().flatten().to(dev)
            if text_idx.numel() == 0 or img_valid_idx.numel() == 0:  # upstream would produce NaN
                raise InputError(f"denoise: no valid {'text' if text_idx.numel() == 0 else 'image'} token to attend to")
            pix = inp.pixel_values.to(dev, dt, non_blocking=False)
            grids = [tuple(int(v) for v in g) for g in inp.grids]
            ids = ids_cpu.to(dev)
            mask = None if inp.attention_mask is None or bool((inp.attention_mask != 0).all()) else inp.attention_mask.to(dev)
            pos = inp.position_ids.long().to(dev)
            state = inp.state.reshape(1, -1).float().to(dev)
            noise = inp.noise if inp.noise is not None else randn(cfg.horizon * cfg.action_dim, inp.seed)
            noise = noise.reshape(cfg.horizon, cfg.action_dim).float()
            strength = None
            rtc = inp.rtc
            if rtc is not None and (rtc.overlap or rtc.frozen):
                noise = noise.clone()
                noise[: rtc.overlap] = rtc.prev[rtc.horizon - rtc.overlap:rtc.horizon]
                strength = rtc.strengths(cfg.horizon).to(dev)
            noise = noise.to(dev)
            slot = int(inp.embodiment_id)

            check()
            if graphs is not None and taps is None:
                outs = graphs.run(("vision", tuple(grids)), lambda p: self._vision_flat(p, grids), [pix],
                                  keep=self.vision_tables(grids)[:3])
                emb, deep = outs[0], list(outs[1:])
            else:
                emb, deep = self.vision(pix, grids, taps, check)
            done("vision")
            check()
            if graphs is not None and taps is None:
                (feats,) = graphs.run(("llm", ids.shape[0], img_idx.shape[0], mask is not None),
                                      lambda *a: (self.llm(a[0], a[1] if mask is not None else None, a[2], a[3], a[4],
                                                           list(a[5:])),),
                                      [ids, mask if mask is not None else ids, pos, img_idx, emb, *deep])
            else:
                feats = self.llm(ids, mask, pos, img_idx, emb, deep, taps, check)
            done("llm")
            check()
            if graphs is not None and taps is None:
                (vl,) = graphs.run(("adapter", feats.shape[0]), lambda f: (self.adapter(f),), [feats])
            else:
                vl = self.adapter(feats, taps)
            done("adapter")
            check()
            text_rows, img_rows = vl.index_select(0, text_idx), vl.index_select(0, img_valid_idx)
            if graphs is not None and taps is None and strength is None:
                (x,) = graphs.run(("denoise", slot, text_rows.shape[0], img_rows.shape[0]),
                                  lambda tr, ir, s, nz: (self.denoise(slot, tr, ir, s, nz),),
                                  [text_rows, img_rows, state, noise])
            elif graphs is not None and taps is None:
                (x,) = graphs.run(("denoise_rtc", slot, text_rows.shape[0], img_rows.shape[0]),
                                  lambda tr, ir, s, nz, g: (self.denoise(slot, tr, ir, s, nz, strength=g),),
                                  [text_rows, img_rows, state, noise, strength])
            else:
                x = self.denoise(slot, text_rows, img_rows, state, noise, taps, check, strength)
            out = x.float().cpu()
            done("denoise")
        return out, stages

    def _vision_flat(self, pix: torch.Tensor, grids: Sequence[Grid]) -> Tuple[torch.Tensor, ...]:
        emb, deep = self.vision(pix, grids)
        return (emb, *deep)


def _tap(taps: Taps, name: str, t: torch.Tensor) -> None:
    if taps is not None:
        taps[name] = t.detach().float().cpu()


def _timestep_proj(tau: int) -> torch.Tensor:
    half = 128
    e = torch.exp(torch.tensor(-math.log(10000), dtype=torch.float32) * torch.arange(half, dtype=torch.float32) / (half - 1))
    a = float(tau) * e
    return torch.cat([torch.cos(a), torch.sin(a)])


def _action_sinusoid(tau: int, W: int) -> torch.Tensor:
    half = W // 2
    e = torch.exp(-torch.arange(half, dtype=torch.float32) * (torch.tensor(math.log(10000), dtype=torch.float32) / half))
    a = float(tau) * e
    return torch.cat([torch.sin(a), torch.cos(a)])
