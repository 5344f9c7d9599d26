"""CUDA graphs per stage and layout, with an eager fallback that never fails a request.

A stage function f(*inputs) -> tuple of tensors is captured per key (the stage and the shapes that
fix its kernels: the image grids, the sequence length, the projector slot, ...). A key runs eagerly
the first time it is seen; the second time, that eager run (on a side stream: the warm-up capture
needs) answers the request, and f is captured on the runner's device and replayed once on the same
inputs: a replay that is not bit-identical to the eager run leaves the key eager for good, as does
a capture that fails (both logged, and listed in facts()). Later calls copy the inputs into the
graph's static buffers and replay it. Tensors a graph reads that are not its inputs (cached tables)
are kept alive with it. At most max_keys keys are kept per stage, the least recently used released
first; at most max_keys failures are remembered per stage.

Not safe for concurrent use: the runner serves one prediction at a time, from one worker thread
(which must have made the device current: torch.cuda.set_device).
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
    def __init__(self, graph: "torch.cuda.CUDAGraph", inputs: List[torch.Tensor], outputs: Tuple[torch.Tensor, ...],
                 keep: Sequence[torch.Tensor]):
        self.graph, self.inputs, self.outputs, self.keep = graph, inputs, outputs, list(keep)


class Graphs:
    """Captured stage graphs on one CUDA device (see the module doc). enabled=False (or a CPU
    device) runs every stage eagerly."""

    def __init__(self, device: torch.device, enabled: bool = True, max_keys: int = 16) -> None:
        self.device = device
        self.enabled = enabled and device.type == "cuda"
        self.max_keys = max_keys
        self.captured: "OrderedDict[Key, _Captured]" = OrderedDict()
        self.failed: "OrderedDict[Key, str]" = OrderedDict()
        self.seen: "OrderedDict[Key, None]" = OrderedDict()

    def facts(self) -> Dict[str, object]:
        """What /info shows: whether graphs are on, the keys captured and those left eager (bounded)."""
        return {"enabled": self.enabled, "captured": [repr(k) for k in self.captured],
                "eager": {repr(k): v for k, v in self.failed.items()}}

    def run(self, key: Key, fn: Fn, inputs: Sequence[torch.Tensor],
            keep: Sequence[torch.Tensor] = ()) -> Tuple[torch.Tensor, ...]:
        """fn(*inputs), from a captured graph when one exists for key. keep: tensors fn reads besides
        its inputs (kept alive as long as the graph)."""
        if not self.enabled or key in self.failed:
            return tuple(fn(*inputs))
        c = self.captured.get(key)
        if c is not None:
            self.captured.move_to_end(key)
            for dst, src in zip(c.inputs, inputs):
                dst.copy_(src)
            c.graph.replay()
            return c.outputs
        if key not in self.seen:  # first sight: eager; a layout seen once is not worth a capture
            self.seen[key] = None
            _trim(self.seen, key[0], 4 * self.max_keys)
            return tuple(fn(*inputs))
        del self.seen[key]
        # Second sight: the eager run on a side stream answers and warms up, then capture.
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            out = tuple(fn(*inputs))
        torch.cuda.current_stream(self.device).wait_stream(side)
        try:
            static = [t.clone() for t in inputs]
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=torch.cuda.Stream(device=self.device)):
                outs = tuple(fn(*static))
            g.replay()
            torch.cuda.synchronize(self.device)
            if len(outs) != len(out) or not all(torch.equal(a, b) for a, b in zip(outs, out)):
                raise RuntimeError("the captured graph's replay differs from the eager run")
        except Exception as e:  # noqa: BLE001 — any capture failure: stay eager for this key
            self.failed[key] = f"{type(e).__name__}: {e}"[:200]
            _trim(self.failed, key[0], self.max_keys)
            log.warning("cuda graph of %r left eager: %s", key, self.failed.get(key, ""))
            torch.cuda.synchronize(self.device)
            return out
        self.captured[key] = _Captured(g, static, outs, keep)
        _trim(self.captured, key[0], self.max_keys)
        return out


def _trim(d: "OrderedDict", stage: object, n: int) -> None:
    """Drops the oldest entries of d whose key is of stage until n remain."""
    keys = [k for k in d if k[0] == stage]
    for k in keys[: max(0, len(keys) - n)]:
        del d[k]
