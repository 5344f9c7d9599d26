"""The engine: one Model on one device, with its options (dtype, CUDA graphs, torch.compile), its
start-up warm-up and the facts and layout the runner announces in HELLO.
"""
from __future__ import annotations

import logging
import platform
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import __version__
from .graphs import Graphs
from .model import Inputs, Model

log = logging.getLogger("gr00t_torchrunner")

# The Go CPU backend's layout (device/cpu.DefaultLayout): every runner of one gateway reports the same.
MAX_PATCHES, MAX_IMAGES, MAX_SEQ = 1792, 4, 512


class SetupError(Exception):
    """The requested device, dtype or option cannot be had here; names the flag."""


@dataclass
class Options:
    weights_dir: str
    device: str = "cpu"  # cpu, cuda, cuda:N
    dtype: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU), bf16, fp32
    cuda_graphs: bool = True
    compile: bool = False
    threads: int = 0
    index: int = 0


def resolve_device(spec: str, index: int) -> torch.device:
    """cpu, cuda:N, or cuda (runner index modulo the visible devices)."""
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "cuda" or spec.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise SetupError(f"--device {spec}: torch {torch.__version__} sees no CUDA device")
        n = torch.cuda.device_count()
        i = index % n if spec == "cuda" else int(spec.split(":", 1)[1]) if spec[5:].isdigit() else -1
        if not 0 <= i < n:
            raise SetupError(f"--device {spec}: {n} CUDA device(s) visible")
        return torch.device("cuda", i)
    raise SetupError(f"--device {spec!r}: want cpu, cuda or cuda:N")


def resolve_dtype(spec: str, dev: torch.device) -> torch.dtype:
    if spec == "auto":
        return torch.bfloat16 if dev.type == "cuda" else torch.float32
    if spec == "fp32":
        return torch.float32
    if spec == "bf16":
        if dev.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise SetupError(f"--dtype bf16: {torch.cuda.get_device_name(dev)} has no bf16 support")
        return torch.bfloat16
    raise SetupError(f"--dtype {spec!r}: want auto, bf16 or fp32")


class Engine:
    """Loads the model and serves predictions; facts() and layout() describe it for HELLO."""

    def __init__(self, o: Options) -> None:
        self.o = o
        if o.threads > 0:
            torch.set_num_threads(o.threads)
        self.device = resolve_device(o.device, o.index)
        self.dtype = resolve_dtype(o.dtype, self.device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
            torch.backends.cudnn.allow_tf32 = False
        t0 = time.perf_counter()
        self.model = Model.load(o.weights_dir, str(self.device), self.dtype)
        self.load_s = time.perf_counter() - t0
        self.compiled = False
        if o.compile:
            self._compile()
        self.graphs = Graphs(self.device, enabled=o.cuda_graphs and not self.compiled)
        t0 = time.perf_counter()
        self._warmup()
        self.warmup_s = time.perf_counter() - t0
        self.changed_facts()  # HELLO reports the graphs as they are now

    def _compile(self) -> None:
        """torch.compile the denoise loop without its per-request arguments (the cancellation check,
        taps): a closure that changes every call would fail the guards and recompile each time.
        Shapes that vary with the prompt are compiled dynamically after their first change."""
        if not hasattr(torch, "compile"):
            raise SetupError(f"--compile: torch {torch.__version__} has no torch.compile (needs torch ≥ 2.0)")
        m = self.model
        eager = m.denoise

        def core(slot: int, text: torch.Tensor, img: torch.Tensor, state: torch.Tensor, noise: torch.Tensor,
                 strength: Optional[torch.Tensor]) -> torch.Tensor:
            return eager(slot, text, img, state, noise, strength=strength)

        compiled = torch.compile(core)

        def denoise(slot, text, img, state, noise, taps=None, check=lambda: None, strength=None):  # type: ignore[no-untyped-def]
            if taps is not None:
                return eager(slot, text, img, state, noise, taps, check, strength)
            check()
            return compiled(slot, text, img, state, noise, strength)

        m.denoise = denoise  # type: ignore[method-assign]
        self.compiled = True

    def _warmup(self) -> None:
        """One small synthetic prediction through every stage (one image of one merge window,
        8 tokens): allocators, kernels and libraries are initialised and a broken checkpoint fails
        at start, not on the first request."""
        cfg = self.model.cfg
        ms = cfg.merge
        per = ms * ms
        S = 8
        ids = torch.arange(S, dtype=torch.int32) % 1000
        ids[1] = cfg.image_token
        pix = (torch.arange(per * cfg.pixel_cols, dtype=torch.float32) % 511 / 255 - 1).reshape(per, cfg.pixel_cols)
        inp = Inputs(pixel_values=pix, grids=[(1, ms, ms)], input_ids=ids,
                     position_ids=torch.arange(S, dtype=torch.int32).repeat(3, 1),
                     state=torch.zeros(cfg.state_dim), embodiment_id=0, seed=0)
        out, _ = self.model.predict(inp)
        if not bool(torch.isfinite(out).all()):
            raise SetupError("warm-up: action_pred is not finite (a broken checkpoint?)")

    def predict(self, inp: Inputs, check: Callable[[], None]) -> Tuple[torch.Tensor, List[Tuple[str, int]]]:
        if self.device.type == "cuda":  # the current device is per thread: the worker's is cuda:0
            torch.cuda.set_device(self.device)
        return self.model.predict(inp, check=check, graphs=self.graphs if self.graphs.enabled else None)

    def fatal(self, e: BaseException) -> bool:
        """A CUDA error that leaves the context unusable (not out of memory): every later call would
        fail too, so the runner exits and the gateway starts a new one."""
        if self.device.type != "cuda":
            return False
        text = str(e)
        if "out of memory" in text:
            return False
        return type(e).__name__ == "AcceleratorError" or "CUDA error" in text or "device-side assert" in text

    def changed_facts(self) -> Optional[Dict[str, Any]]:
        """The facts that changed since the last call (the CUDA graphs captured or left eager),
        for RESULT's extra; None when nothing did."""
        g = self.graphs.facts()
        key = (tuple(g["captured"]), tuple(g["eager"]))
        if key == getattr(self, "_reported", None):  # set by the first call, at the end of __init__
            return None
        self._reported = key
        return {"cuda_graphs": g}

    def layout(self) -> Dict[str, int]:
        cfg = self.model.cfg
        return {"max_patches": MAX_PATCHES, "max_images": MAX_IMAGES, "max_seq": MAX_SEQ,
                "pixel_cols": cfg.pixel_cols, "state_dim": cfg.state_dim,
                "action_horizon": cfg.horizon, "action_dim": cfg.action_dim}

    def facts(self) -> Dict[str, Any]:
        m, dev = self.model, self.device
        dtype = "bf16" if self.dtype == torch.bfloat16 else "fp32"
        extra: Dict[str, Any] = {
            "runner": f"gr00t_torchrunner {__version__}", "torch": torch.__version__,
            "python": platform.python_version(), "device": str(dev), "dtype": dtype,
            "cuda_graphs": self.graphs.facts(), "compile": self.compiled,
            "threads": torch.get_num_threads(), "checkpoint_sha256": m.digest, "parameters": m.params,
            "weights_dir": self.o.weights_dir, "embodiment_slots": list(range(m.slots)),
            "load_ms": round(self.load_s * 1e3, 1), "warmup_ms": round(self.warmup_s * 1e3, 1),
            "layout": {"max_patches": MAX_PATCHES, "max_images": MAX_IMAGES, "max_seq": MAX_SEQ},
        }
        if dev.type == "cuda":
            p = torch.cuda.get_device_properties(dev)
            extra.update({"device_name": p.name, "cuda": torch.version.cuda,
                          "capability": f"{p.major}.{p.minor}", "memory_total_mib": p.total_memory >> 20,
                          "memory_allocated_mib": torch.cuda.memory_allocated(dev) >> 20})
        else:
            extra["device_name"] = cpu_name() or platform.machine()
        return {"backend": "torch", "policy": dtype, "stages": ["vision", "llm", "adapter", "denoise"],
                "max_seq_len": MAX_SEQ, "max_images": MAX_IMAGES, "max_patches": MAX_PATCHES, "extra": extra}


def hello(engine: Engine, pid: int) -> Dict[str, Any]:
    return {"protocol": 1, "runner": f"gr00t_torchrunner {__version__} (torch {torch.__version__}, "
                                     f"python {platform.python_version()})",
            "pid": pid, "facts": engine.facts(), "layout": engine.layout(), "features": ["rtc"]}


def cpu_name() -> Optional[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
