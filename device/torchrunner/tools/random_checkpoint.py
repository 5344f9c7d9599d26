"""A real-size GR00T N1.7-3B checkpoint with random weights, written in Python.

The Python twin of the Go writer `tools/benchmodel` (`make bench-model`
writes `build/n17-real` with it), for hosts that have Python but no Go —
the GPU check (`scripts/gpu-check.sh`) generates its checkpoint on the
device host with this module instead of carrying 6.3 GB there:

    python3 -B device/torchrunner/tools/random_checkpoint.py --out DIR [--tiny-dir testdata/n17-tiny]

writes the same files the Go writer does, with the same tensor names,
shapes, dtype (BF16), shard split, index and side files:

- ``model-0000{1,2}-of-00002.safetensors``: every tensor of the weights
  plan (``core/model/plan.go``, mirrored by :func:`plan`) except
  ``lm_head.weight``, in plan order, as consecutive runs of about half the
  bytes each; headers byte-identical to the Go writer's;
- ``model.safetensors.index.json`` (written last, so an interrupted run
  leaves no complete-looking checkpoint);
- ``config.json``: the tiny checkpoint's with the N1.7-3B dimensions (no
  ``backbone_config.json``: the built-in Qwen3-VL architecture applies, as
  for the real snapshot);
- ``embodiment_id.json``, ``statistics.json``, ``processor_config.json``
  copied from the tiny checkpoint (every shipped plugin's embodiment).

``--scale tiny`` writes the tiny checkpoint's plan instead (its
config.json as is, plus its backbone_config.json): a few MB, for tests.
``--describe`` prints the plan, config and shard map as JSON and writes
nothing (the Go test ``tools/benchmodel`` compares it with
``model.Plan``).

Values mirror the Go writer's init, not its random stream: uniform with
variance 1/fan_in (fan_in: the product of a matrix's trailing axes, the
input axis of a [E, in, out] category weight, 64 x length for biases), norm
gains uniform in 1 +- 0.1*sqrt(3), rounded to bf16 (round to nearest even)
— activations stay finite through the whole model. Each tensor has its own
seed (FNV-1a 64 of its name), so a run is deterministic for a given
generator backend. The safetensors format is written directly (8-byte
little-endian header length, JSON header padded to 8 bytes, raw
little-endian data): no safetensors package is needed. numpy is required;
torch, when importable, generates the values (on CUDA when available:
about 3.1 G values in seconds) — ``--rng numpy`` forces the numpy path.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
import time
from typing import Any, Iterable, Sequence

#: Number of safetensors shards (the public N1.7-3B snapshot has two);
#: benchmodel.CheckpointShards.
CHECKPOINT_SHARDS = 2
INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"
BACKBONE_CONFIG_FILE = "backbone_config.json"
#: Side files copied from the tiny checkpoint (benchmodel.sideFiles).
SIDE_FILES = ("embodiment_id.json", "statistics.json", "processor_config.json")
LM_HEAD = "lm_head.weight"
VISION_PREFIX = "backbone.model.model.visual."
LLM_PREFIX = "backbone.model.model.language_model."
ACTION_HEAD_PREFIX = "action_head."
#: Bytes of the real-size checkpoint's tensors (TestRealConfigJSON).
REAL_TOTAL_BYTES = 6_288_032_000

# model.DefaultConfig(): the N1.7-3B keys the plan reads.
DEFAULT_CONFIG: dict[str, Any] = {
    "select_layer": 16,
    "backbone_embedding_dim": 2048,
    "hidden_size": 1024,
    "input_embedding_dim": 1536,
    "max_state_dim": 132,
    "max_action_dim": 132,
    "max_num_embodiments": 32,
    "max_seq_len": 1024,
    "diffusion_model_cfg": {"num_layers": 32, "num_attention_heads": 32, "attention_head_dim": 48, "output_dim": 1024},
    "vl_self_attention_cfg": {"num_layers": 4, "num_attention_heads": 32, "attention_head_dim": 64},
}

# model.DefaultBackbone(): Cosmos-Reason2-2B (Qwen3-VL-2B).
DEFAULT_VISION: dict[str, Any] = {
    "depth": 24,
    "hidden_size": 1024,
    "num_heads": 16,
    "intermediate_size": 4096,
    "patch_size": 16,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "in_channels": 3,
    "num_position_embeddings": 2304,
    "out_hidden_size": 2048,
    "deepstack_visual_indexes": [5, 11, 17],
}
DEFAULT_TEXT: dict[str, Any] = {
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 6144,
    "vocab_size": 151936,
}


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One tensor of a checkpoint (core/model.TensorSpec)."""

    name: str
    shape: tuple[int, ...]
    #: False for tensors inference never reads (final text norm, lm_head).
    used: bool = True

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return 2 * self.numel


@dataclasses.dataclass(frozen=True)
class ModelDims:
    """What the plan needs of config.json and the backbone architecture."""

    config: dict[str, Any]
    vision: dict[str, Any]
    text: dict[str, Any]


def _merge(defaults: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """defaults with over's keys (one level into nested dicts, as Go's
    json.Unmarshal into a struct over defaults)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in defaults.items()}
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k].update(v)
        else:
            out[k] = v
    return out


def load_dims(config: dict[str, Any], backbone: dict[str, Any] | None) -> ModelDims:
    """The dimensions of config.json (over DEFAULT_CONFIG) and an optional
    Hugging Face Qwen3VLConfig backbone_config.json (over the built-in)."""
    backbone = backbone or {}
    return ModelDims(
        config=_merge(DEFAULT_CONFIG, config),
        vision=_merge(DEFAULT_VISION, backbone.get("vision_config") or {}),
        text=_merge(DEFAULT_TEXT, backbone.get("text_config") or {}),
    )


def real_config(tiny_config: dict[str, Any]) -> dict[str, Any]:
    """The tiny config.json with the N1.7-3B dimensions (benchmodel.realConfigJSON)."""
    c = json.loads(json.dumps(tiny_config))
    d = DEFAULT_CONFIG
    for k in ("backbone_embedding_dim", "select_layer", "hidden_size", "input_embedding_dim", "max_seq_len"):
        c[k] = d[k]
    dit, vl = c.get("diffusion_model_cfg"), c.get("vl_self_attention_cfg")
    if not isinstance(dit, dict) or not isinstance(vl, dict):
        raise ValueError("random_checkpoint: config.json: no diffusion_model_cfg / vl_self_attention_cfg")
    for k in ("num_layers", "num_attention_heads", "attention_head_dim", "output_dim"):
        dit[k] = d["diffusion_model_cfg"][k]
    for k in ("num_layers", "num_attention_heads", "attention_head_dim"):
        vl[k] = d["vl_self_attention_cfg"][k]
    return c


def plan(dims: ModelDims) -> list[TensorSpec]:
    """Every tensor of a checkpoint for dims, in core/model.Plan's order:
    vision tower, the select_layer kept LLM layers, the unused final norm,
    the action head, lm_head."""
    p: list[TensorSpec] = []

    def add(name: str, *shape: int) -> None:
        p.append(TensorSpec(name, tuple(shape)))

    def lin(name: str, out: int, inp: int) -> None:
        add(name + ".weight", out, inp)
        add(name + ".bias", out)

    def ln(name: str, d: int) -> None:
        add(name + ".weight", d)
        add(name + ".bias", d)

    v, t, c = dims.vision, dims.text, dims.config
    vp, hid = VISION_PREFIX, v["hidden_size"]
    add(vp + "patch_embed.proj.weight", hid, v["in_channels"], v["temporal_patch_size"], v["patch_size"], v["patch_size"])
    add(vp + "patch_embed.proj.bias", hid)
    add(vp + "pos_embed.weight", v["num_position_embeddings"], hid)
    for i in range(v["depth"]):
        b = f"{vp}blocks.{i}."
        ln(b + "norm1", hid)
        ln(b + "norm2", hid)
        lin(b + "attn.qkv", 3 * hid, hid)
        lin(b + "attn.proj", hid, hid)
        lin(b + "mlp.linear_fc1", v["intermediate_size"], hid)
        lin(b + "mlp.linear_fc2", hid, v["intermediate_size"])
    md = hid * v["spatial_merge_size"] ** 2
    ln(vp + "merger.norm", hid)
    lin(vp + "merger.linear_fc1", md, md)
    lin(vp + "merger.linear_fc2", v["out_hidden_size"], md)
    for k in range(len(v["deepstack_visual_indexes"])):
        b = f"{vp}deepstack_merger_list.{k}."
        ln(b + "norm", md)
        lin(b + "linear_fc1", md, md)
        lin(b + "linear_fc2", v["out_hidden_size"], md)

    lp, th, hd = LLM_PREFIX, t["hidden_size"], t["head_dim"]
    add(lp + "embed_tokens.weight", t["vocab_size"], th)
    for i in range(c["select_layer"]):
        b = f"{lp}layers.{i}."
        add(b + "input_layernorm.weight", th)
        add(b + "post_attention_layernorm.weight", th)
        add(b + "self_attn.q_proj.weight", t["num_attention_heads"] * hd, th)
        add(b + "self_attn.k_proj.weight", t["num_key_value_heads"] * hd, th)
        add(b + "self_attn.v_proj.weight", t["num_key_value_heads"] * hd, th)
        add(b + "self_attn.o_proj.weight", th, t["num_attention_heads"] * hd)
        add(b + "self_attn.q_norm.weight", hd)
        add(b + "self_attn.k_norm.weight", hd)
        add(b + "mlp.gate_proj.weight", t["intermediate_size"], th)
        add(b + "mlp.up_proj.weight", t["intermediate_size"], th)
        add(b + "mlp.down_proj.weight", th, t["intermediate_size"])
    p.append(TensorSpec(lp + "norm.weight", (th,), used=False))

    ap, bd = ACTION_HEAD_PREFIX, c["backbone_embedding_dim"]
    ln(ap + "vlln", bd)
    sa = c["vl_self_attention_cfg"]
    sad = sa["num_attention_heads"] * sa["attention_head_dim"]
    for i in range(sa["num_layers"]):
        b = f"{ap}vl_self_attention.transformer_blocks.{i}."
        ln(b + "norm1", bd)
        ln(b + "norm3", bd)
        lin(b + "attn1.to_q", sad, bd)
        lin(b + "attn1.to_k", sad, bd)
        lin(b + "attn1.to_v", sad, bd)
        lin(b + "attn1.to_out.0", bd, sad)
        lin(b + "ff.net.0.proj", 4 * bd, bd)
        lin(b + "ff.net.2", bd, 4 * bd)
    d = c["input_embedding_dim"]
    lin(ap + "model.timestep_encoder.timestep_embedder.linear_1", d, 256)
    lin(ap + "model.timestep_encoder.timestep_embedder.linear_2", d, d)
    for i in range(c["diffusion_model_cfg"]["num_layers"]):
        b = f"{ap}model.transformer_blocks.{i}."
        kv = bd if i % 2 == 0 else d  # even blocks cross-attend to the VL features
        lin(b + "norm1.linear", 2 * d, d)
        lin(b + "attn1.to_q", d, d)
        lin(b + "attn1.to_k", d, kv)
        lin(b + "attn1.to_v", d, kv)
        lin(b + "attn1.to_out.0", d, d)
        lin(b + "ff.net.0.proj", 4 * d, d)
        lin(b + "ff.net.2", d, 4 * d)
    lin(ap + "model.proj_out_1", 2 * d, d)
    lin(ap + "model.proj_out_2", c["diffusion_model_cfg"]["output_dim"], d)
    e, h = c["max_num_embodiments"], c["hidden_size"]

    def cat(name: str, inp: int, out: int) -> None:
        add(name + ".W", e, inp, out)
        add(name + ".b", e, out)

    cat(ap + "state_encoder.layer1", c["max_state_dim"], h)
    cat(ap + "state_encoder.layer2", h, d)
    cat(ap + "action_encoder.W1", c["max_action_dim"], d)
    cat(ap + "action_encoder.W2", 2 * d, d)
    cat(ap + "action_encoder.W3", d, d)
    cat(ap + "action_decoder.layer1", h, h)
    cat(ap + "action_decoder.layer2", h, c["max_action_dim"])
    add(ap + "position_embedding.weight", c["max_seq_len"], d)

    p.append(TensorSpec(LM_HEAD, (t["vocab_size"], th), used=False))
    return p


def is_norm(name: str) -> bool:
    """A 1-D norm gain (synthesised around 1): benchmodel.isNorm."""
    return ("norm" in name and name.endswith(".weight")) or name.endswith("vlln.weight")


def fan_in(name: str, shape: Sequence[int]) -> int:
    """benchmodel.fanIn: 0 for norm gains, 64 x length for biases, the input
    axis of a [E, in, out] category weight, else the trailing axes' product."""
    if len(shape) == 1:
        return 0 if is_norm(name) else max(shape[0], 1) * 64
    if len(shape) == 3 and name.endswith(".W"):
        return shape[1]
    return math.prod(shape[1:])


def init_range(name: str, shape: Sequence[int]) -> tuple[float, float]:
    """(centre, half-width) of the uniform init: variance 1/fan_in, or 1 +- 0.1*sqrt(3)."""
    fi = fan_in(name, shape)
    if fi > 0:
        return 0.0, math.sqrt(3.0 / fi)
    return 1.0, 0.1 * math.sqrt(3.0)


def fnv1a64(name: str) -> int:
    """FNV-1a 64 of name's UTF-8 bytes (the Go writer's per-tensor seed)."""
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def shard_split(specs: Sequence[TensorSpec], shards: int = CHECKPOINT_SHARDS) -> list[list[TensorSpec]]:
    """Consecutive runs of specs of about total/shards bytes (the Go writer's split)."""
    total = sum(s.nbytes for s in specs)
    out: list[list[TensorSpec]] = []
    cur = 0
    for s in specs:
        if not out or (cur >= total // shards * len(out) and len(out) < shards):
            out.append([])
        out[-1].append(s)
        cur += s.nbytes
    return out


def shard_name(i: int, n: int) -> str:
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def shard_header(specs: Sequence[TensorSpec]) -> bytes:
    """The safetensors header (JSON, keys sorted, padded with spaces to a
    multiple of 8) of specs stored back to back as BF16 — byte-identical
    to the Go writer's."""
    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    off = 0
    for s in specs:
        entries[s.name] = {"dtype": "BF16", "shape": list(s.shape), "data_offsets": [off, off + s.nbytes]}
        off += s.nbytes
    hdr = json.dumps({k: entries[k] for k in sorted(entries)}, separators=(",", ":")).encode()
    return hdr + b" " * (-len(hdr) % 8)


class Filler:
    """Random bf16 values, deterministic per tensor name, written to a file."""

    #: Values per numpy chunk (bounds memory: 64 MiB of float32).
    CHUNK = 1 << 24

    def __init__(self, rng: str = "auto", device: str = "auto") -> None:
        import numpy  # required: the writer's buffers

        self.np = numpy
        self.torch: Any = None
        self.device = "cpu"
        if rng in ("auto", "torch"):
            try:
                import torch  # optional: faster, and on the GPU when present

                self.torch = torch
            except ImportError:
                if rng == "torch":
                    raise
        if self.torch is not None:
            if device == "auto":
                device = "cuda" if self.torch.cuda.is_available() else "cpu"
            self.device = device
        self.kind = f"torch {self.torch.__version__} on {self.device}" if self.torch is not None else f"numpy {numpy.__version__}"

    def write(self, f: Any, spec: TensorSpec) -> None:
        """Writes spec's values as little-endian bf16 to f."""
        c, a = init_range(spec.name, spec.shape)
        seed = fnv1a64(spec.name)
        if self.torch is not None:
            self._write_torch(f, spec.numel, c, a, seed)
        else:
            self._write_numpy(f, spec.numel, c, a, seed)

    def _write_torch(self, f: Any, n: int, c: float, a: float, seed: int) -> None:
        torch = self.torch
        g = torch.Generator(device=self.device)
        g.manual_seed(seed & 0x7FFFFFFFFFFFFFFF)
        step = self.CHUNK * (8 if self.device != "cpu" else 1)
        for lo in range(0, n, step):
            m = min(step, n - lo)
            x = torch.empty(m, dtype=torch.float32, device=self.device).uniform_(-a, a, generator=g)
            if c:
                x.add_(c)
            bits = x.to(torch.bfloat16).view(torch.int16).cpu().numpy()
            f.write(memoryview(bits).cast("B"))

    def _write_numpy(self, f: Any, n: int, c: float, a: float, seed: int) -> None:
        np = self.np
        rng = np.random.Generator(np.random.PCG64(seed))
        for lo in range(0, n, self.CHUNK):
            m = min(self.CHUNK, n - lo)
            x = rng.random(m, dtype=np.float32)
            x *= np.float32(2 * a)
            x += np.float32(c - a)
            b = x.view(np.uint32)
            b += np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))  # round to nearest even
            f.write(memoryview((b >> np.uint32(16)).astype("<u2")).cast("B"))


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def checkpoint_layout(tiny_dir: str, scale: str) -> tuple[dict[str, Any], dict[str, Any] | None, list[TensorSpec]]:
    """(config.json, backbone_config.json or None, plan less lm_head) of a
    checkpoint at scale ("real": N1.7-3B; "tiny": tiny_dir's own)."""
    tiny_cfg = _read_json(os.path.join(tiny_dir, CONFIG_FILE))
    if scale == "real":
        cfg, backbone = real_config(tiny_cfg), None
    elif scale == "tiny":
        cfg, backbone = tiny_cfg, _read_json(os.path.join(tiny_dir, BACKBONE_CONFIG_FILE))
    else:
        raise ValueError(f"random_checkpoint: scale[{scale}]: want real or tiny")
    specs = [s for s in plan(load_dims(cfg, backbone)) if s.name != LM_HEAD]
    return cfg, backbone, specs


def describe(tiny_dir: str, scale: str = "real") -> dict[str, Any]:
    """What write_checkpoint would write, as JSON-able data (no values)."""
    cfg, backbone, specs = checkpoint_layout(tiny_dir, scale)
    shards = shard_split(specs)
    return {
        "config": cfg,
        "backbone_config": backbone,
        "tensors": [{"name": s.name, "shape": list(s.shape), "dtype": "BF16"} for s in specs],
        "total_size": sum(s.nbytes for s in specs),
        "weight_map": {s.name: shard_name(i, len(shards)) for i, sh in enumerate(shards) for s in sh},
    }


def write_checkpoint(out: str, tiny_dir: str, scale: str = "real", filler: Filler | None = None,
                     log: Any = None) -> int:
    """Writes the checkpoint to out (absent or empty) and returns its tensor
    bytes. Shards go under a .partial name and are renamed; the index is
    written last."""
    if os.path.isdir(out) and os.listdir(out):
        raise FileExistsError(f"random_checkpoint: {out} is not empty: refusing to write a checkpoint into it")
    os.makedirs(out, exist_ok=True)
    filler = filler or Filler()
    cfg, backbone, specs = checkpoint_layout(tiny_dir, scale)
    shards = shard_split(specs)
    total = sum(s.nbytes for s in specs)
    weight_map: dict[str, str] = {}
    for i, sh in enumerate(shards):
        name = shard_name(i, len(shards))
        path = os.path.join(out, name)
        t0 = time.monotonic()
        hdr = shard_header(sh)
        with open(path + ".partial", "wb", buffering=8 << 20) as f:
            f.write(len(hdr).to_bytes(8, "little"))
            f.write(hdr)
            for s in sh:
                filler.write(f, s)
                weight_map[s.name] = name
        os.replace(path + ".partial", path)
        if log:
            mb = sum(s.nbytes for s in sh) / 1e6
            dt = time.monotonic() - t0
            log(f"random_checkpoint: {name}: {len(sh)} tensors, {mb:.0f} MB in {dt:.1f} s ({mb / max(dt, 1e-9):.0f} MB/s)")
    for f in SIDE_FILES:
        shutil.copyfile(os.path.join(tiny_dir, f), os.path.join(out, f))
    with open(os.path.join(out, CONFIG_FILE), "w", encoding="utf-8") as fh:
        json.dump(cfg, fh, indent=2)
    if backbone is not None:
        with open(os.path.join(out, BACKBONE_CONFIG_FILE), "w", encoding="utf-8") as fh:
            json.dump(backbone, fh, indent=2)
    idx = {"metadata": {"total_size": total}, "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
    with open(os.path.join(out, INDEX_FILE), "w", encoding="utf-8") as fh:
        fh.write(json.dumps(idx, indent=2))
    return total


def read_header(path: str) -> dict[str, Any]:
    """The JSON header of a safetensors file."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))


def _default_tiny_dir() -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return os.path.join(root, "testdata", "n17-tiny")


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="checkpoint directory to write (absent or empty)")
    ap.add_argument("--tiny-dir", default=_default_tiny_dir(), help="source of config.json and the side files (default: %(default)s)")
    ap.add_argument("--scale", choices=("real", "tiny"), default="real", help="real: N1.7-3B (~6.3 GB); tiny: the tiny checkpoint's plan")
    ap.add_argument("--rng", choices=("auto", "torch", "numpy"), default="auto", help="value generator (auto: torch when importable)")
    ap.add_argument("--device", default="auto", help="torch device for the values (auto: cuda when available)")
    ap.add_argument("--describe", action="store_true", help="print the plan, config and shard map as JSON; write nothing")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.describe:
        json.dump(describe(args.tiny_dir, args.scale), sys.stdout)
        sys.stdout.write("\n")
        return 0
    if not args.out:
        ap.error("--out is required (or --describe)")
    t0 = time.monotonic()
    filler = Filler(args.rng, args.device)
    total = write_checkpoint(args.out, args.tiny_dir, args.scale, filler, log=lambda s: print(s, file=sys.stderr, flush=True))
    dt = time.monotonic() - t0
    print(f"random_checkpoint: wrote {args.out}: {total / 1e9:.3f} GB of BF16 ({args.scale}) with {filler.kind} in {dt:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
