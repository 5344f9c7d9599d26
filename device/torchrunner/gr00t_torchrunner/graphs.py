"""CUDA graphs per stage and layout, with an eager fallback that never fails a request.

A stage function f(*inputs) -> tuple of tensors is captured once per key (the stage and the shapes
that fix its kernels: the image grids, the sequence length, the projector slot, ...). The first call
of a key runs f eagerly on a side stream — that run answers the request and is the warm-up that
capture needs — and then captures it; later calls copy the inputs into the graph's static buffers
and replay it. A capture that fails leaves that key eager for good (logged once). Keys are kept
up to max_keys per stage, the oldest released first.

Not safe for concurrent use: the runner serves one prediction at a time.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Callable, Dict, List, Sequence, Tuple

import torch

log = logging.getLogger("gr00t_torchrunner")

Key = Tuple
Fn = Callable[..., Tuple[torch.Tensor, ...]]


class _Captured:
    def __init__(self, graph: "torch.cuda.CUDAGraph", inputs: List[torch.Tensor], outputs: Tuple[torch.Tensor, ...]):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs


class Graphs:
    """Captured stage graphs on one CUDA device (see the module doc). enabled=False (or a CPU
    device) runs every stage eagerly."""

    def __init__(self, device: torch.device, enabled: bool = True, max_keys: int = 16) -> None:
        self.device = device
        self.enabled = enabled and device.type == "cuda"
        self.max_keys = max_keys
        self.captured: "OrderedDict[Key, _Captured]" = OrderedDict()
        self.failed: Dict[Key, str] = {}
        self.replays = 0

    def facts(self) -> Dict[str, object]:
        """What /info shows: whether graphs are on, the keys captured and those left eager."""
        return {"enabled": self.enabled, "captured": [repr(k) for k in self.captured],
                "eager": {repr(k): v for k, v in self.failed.items()}}

    def run(self, key: Key, fn: Fn, inputs: Sequence[torch.Tensor]) -> Tuple[torch.Tensor, ...]:
        """fn(*inputs), from a captured graph when one exists for key."""
        if not self.enabled or key in self.failed:
            return tuple(fn(*inputs))
        c = self.captured.get(key)
        if c is not None:
            self.captured.move_to_end(key)
            for dst, src in zip(c.inputs, inputs):
                dst.copy_(src)
            c.graph.replay()
            self.replays += 1
            return c.outputs
        # First sight: the eager run on a side stream answers and warms up, then capture.
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            out = tuple(fn(*inputs))
        torch.cuda.current_stream(self.device).wait_stream(side)
        try:
            static = [t.clone() for t in inputs]
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                outs = tuple(fn(*static))
            torch.cuda.synchronize(self.device)
        except Exception as e:  # noqa: BLE001 — any capture failure: stay eager for this key
            self.failed[key] = f"{type(e).__name__}: {e}"[:300]
            log.warning("cuda graph capture failed, running eagerly", extra={"key": repr(key), "err": self.failed[key]})
            torch.cuda.synchronize(self.device)
            return out
        self.captured[key] = _Captured(g, static, outs)
        while len([k for k in self.captured if k[0] == key[0]]) > self.max_keys:
            oldest = next(k for k in self.captured if k[0] == key[0])
            del self.captured[oldest]
        return out
