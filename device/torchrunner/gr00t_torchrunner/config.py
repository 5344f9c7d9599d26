"""The model configuration the runner needs, read from a checkpoint directory.

config.json holds the action head; backbone_config.json (when present) the Qwen3-VL backbone;
without it the real Qwen3-VL-2B sizes apply (as in the Go loader).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import List

# The real Cosmos-Reason2-2B / Qwen3-VL sizes, used when backbone_config.json is absent.
DEFAULT_BACKBONE = {
    "vision_config": {"depth": 24, "hidden_size": 1024, "num_heads": 16, "intermediate_size": 4096,
                      "deepstack_visual_indexes": [5, 11, 17], "num_position_embeddings": 2304,
                      "spatial_merge_size": 2, "out_hidden_size": 2048, "patch_size": 16,
                      "temporal_patch_size": 2, "in_channels": 3},
    "text_config": {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 8,
                    "head_dim": 128, "rms_norm_eps": 1e-6, "rope_theta": 5000000,
                    "rope_scaling": {"mrope_section": [24, 20, 20]}},
    "image_token_id": 151655,
}


class ConfigError(ValueError):
    """A configuration file that is missing or lacks a key: names the file and the key."""


@dataclass
class Config:
    # Vision (Qwen3-VL ViT).
    v_depth: int
    v_hidden: int
    v_heads: int
    v_deep: List[int]
    v_side: int
    merge: int
    pixel_cols: int
    # Text (Qwen3 decoder, the kept layers).
    t_hidden: int
    t_heads: int
    t_kv: int
    t_hd: int
    t_eps: float
    theta: float
    mrope: List[int]
    image_token: int
    select: int
    # Action head.
    layers: int
    heads: int
    hd: int
    vl_layers: int
    vl_heads: int
    every: int
    steps: int
    buckets: int
    horizon: int
    state_dim: int
    action_dim: int
    max_embodiments: int
    kinds: List[str] = field(default_factory=list)

    @property
    def width(self) -> int:
        """The DiT width (heads x head dim)."""
        return self.heads * self.hd

    @property
    def taus(self) -> List[int]:
        """The timestep buckets of the Euler steps."""
        return [int(k / self.steps * self.buckets) for k in range(self.steps)]


def load(d: str) -> Config:
    """Reads d/config.json and d/backbone_config.json (optional)."""
    path = os.path.join(d, "config.json")
    try:
        with open(path) as f:
            c = json.load(f)
    except (OSError, ValueError) as e:
        raise ConfigError(f"config[{path}]: {e}") from e
    bb = DEFAULT_BACKBONE
    p = os.path.join(d, "backbone_config.json")
    if os.path.exists(p):
        try:
            with open(p) as f:
                bb = json.load(f)
        except (OSError, ValueError) as e:
            raise ConfigError(f"config[{p}]: {e}") from e
    try:
        v, t = bb["vision_config"], bb["text_config"]
        dit, vl = c["diffusion_model_cfg"], c["vl_self_attention_cfg"]
        cfg = Config(
            v_depth=v["depth"], v_hidden=v["hidden_size"], v_heads=v["num_heads"],
            v_deep=list(v["deepstack_visual_indexes"]),
            v_side=int(round(math.sqrt(v["num_position_embeddings"]))),
            merge=v.get("spatial_merge_size", 2),
            pixel_cols=v.get("in_channels", 3) * v.get("temporal_patch_size", 2) * v.get("patch_size", 16) ** 2,
            t_hidden=t["hidden_size"], t_heads=t["num_attention_heads"], t_kv=t["num_key_value_heads"],
            t_hd=t["head_dim"], t_eps=t.get("rms_norm_eps", 1e-6), theta=float(t["rope_theta"]),
            mrope=list(t["rope_scaling"]["mrope_section"]), image_token=bb.get("image_token_id", 151655),
            select=c["select_layer"],
            layers=dit["num_layers"], heads=dit["num_attention_heads"], hd=dit["attention_head_dim"],
            vl_layers=vl["num_layers"], vl_heads=vl["num_attention_heads"],
            every=c.get("attend_text_every_n_blocks", 2),
            steps=c.get("num_inference_timesteps", 4), buckets=c.get("num_timestep_buckets", 1000),
            horizon=c["action_horizon"], state_dim=c["max_state_dim"], action_dim=c["max_action_dim"],
            max_embodiments=c.get("max_num_embodiments", 32),
        )
    except (KeyError, TypeError) as e:
        raise ConfigError(f"config[{d}]: missing or malformed key {e}") from e
    # Interleaved DiT: odd blocks self-attend; even blocks cross-attend to text every
    # `every`-th pair and to the image rows otherwise.
    for i in range(cfg.layers):
        if i % 2 == 1:
            cfg.kinds.append("self")
        elif i % (2 * cfg.every) == 0:
            cfg.kinds.append("text")
        else:
            cfg.kinds.append("image")
    return cfg
