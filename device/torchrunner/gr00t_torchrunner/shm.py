"""Shared-memory segments (device/RUNNER.md "Shared memory").

The client creates each segment with memfd_create, seals its size and passes it once with ATTACH;
the runner maps it MAP_SHARED read-write and reads the request's tensors as views of the mapping
(no copy: pixel_values go from the mapping to the device in one transfer) and writes action_pred
at the request's output span. A Segment is owned by the runner's read loop; the prediction in
flight only reads its inputs and writes its output span.
"""
from __future__ import annotations

import mmap
import os
from typing import Any, Dict

import torch


class SpanError(ValueError):
    """A span outside its segment, misaligned or negative (ERROR input)."""


class Segment:
    def __init__(self, sid: int, fd: int, size: int) -> None:
        """Maps size bytes of fd; the descriptor is closed whatever happens."""
        try:
            if not isinstance(size, int) or size <= 0:
                raise SpanError(f"segment[{sid}]: size {size!r} is not a positive byte count")
            have = os.fstat(fd).st_size
            if size > have:
                raise SpanError(f"segment[{sid}]: size {size} is beyond the memfd's {have} bytes")
            self.mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.id, self.size = sid, size

    def check(self, name: str, sp: Any) -> None:
        if not isinstance(sp, dict) or not isinstance(sp.get("offset"), int) or not isinstance(sp.get("count"), int):
            raise SpanError(f"{name}: not a span {{offset, count}}: {sp!r}")
        off, n = sp["offset"], sp["count"]
        if off < 0 or n < 0 or off % 4 or off + 4 * n > self.size:
            raise SpanError(f"{name}: span {{offset {off}, count {n}}} is outside segment[{self.id}] of {self.size} bytes "
                            "(or not 4-byte aligned)")

    def view(self, sp: Dict[str, int], dtype: torch.dtype) -> torch.Tensor:
        """The span as a 1-D tensor sharing the mapping (float32 or int32)."""
        if sp["count"] == 0:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer(self.mm, dtype=dtype, count=sp["count"], offset=sp["offset"])

    def close(self) -> None:
        """Unmaps the segment. Views made by view() must be gone: torch.frombuffer keeps only a
        reference, so a view touched after close faults. The server closes a segment only when no
        prediction uses it (ATTACH while busy is refused; serve joins the worker first)."""
        try:
            self.mm.close()
        except BufferError:
            pass
