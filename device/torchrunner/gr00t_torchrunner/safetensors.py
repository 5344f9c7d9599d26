"""A small safetensors reader: single files and sharded sets, BF16/F16/F32.

Debian 12 has no `safetensors` package, so the format is read directly: an 8-byte little-endian
header length, a JSON header {name: {dtype, shape, data_offsets}}, then the raw little-endian
data. Tensors are views of a read-only mapping until the caller converts them.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
import warnings
from dataclasses import dataclass
from typing import Dict, Iterator, List, Tuple

import torch

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_HEADER = 100 << 20

DTYPES: Dict[str, torch.dtype] = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
SIZES: Dict[str, int] = {"BF16": 2, "F16": 2, "F32": 4}


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: names the file and the tensor."""


@dataclass
class Entry:
    dtype: str
    shape: Tuple[int, ...]
    begin: int
    end: int


class File:
    """One .safetensors file, mapped read-only; entries by name."""

    def __init__(self, path: str) -> None:
        self.path = path
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise CheckpointError(f"safetensors file[{path}]: shorter than its 8-byte header length")
            (n,) = struct.unpack("<Q", raw)
            if n > MAX_HEADER:
                raise CheckpointError(f"safetensors file[{path}]: header of {n} bytes (limit {MAX_HEADER})")
            head = fh.read(n)
            if len(head) != n:
                raise CheckpointError(f"safetensors file[{path}]: header truncated ({len(head)} of {n} bytes)")
            size = os.fstat(fh.fileno()).st_size
            self.mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size > 0 else None
        self.data_start = 8 + n
        try:
            hdr = json.loads(head)
        except ValueError as e:
            raise CheckpointError(f"safetensors file[{path}]: header is not JSON: {e}") from e
        if not isinstance(hdr, dict):
            raise CheckpointError(f"safetensors file[{path}]: header is not a JSON object")
        self.entries: Dict[str, Entry] = {}
        for name, e in hdr.items():
            if name == "__metadata__":
                continue
            try:
                dt, shape, (b, en) = e["dtype"], tuple(int(d) for d in e["shape"]), e["data_offsets"]
            except (KeyError, TypeError, ValueError) as err:
                raise CheckpointError(f"safetensors file[{path}] tensor[{name}]: malformed entry: {err}") from err
            count = 1
            for d in shape:
                count *= d
            if dt in SIZES and (en - b != count * SIZES[dt] or b < 0 or self.data_start + en > size):
                raise CheckpointError(f"safetensors file[{path}] tensor[{name}]: data_offsets [{b}, {en}) do not hold "
                                      f"{dt}{list(shape)} inside the file")
            self.entries[name] = Entry(dt, shape, int(b), int(en))

    def tensor(self, name: str) -> torch.Tensor:
        """The tensor as stored (a read-only view of the mapping: convert before writing to it)."""
        e = self.entries[name]
        if e.dtype not in DTYPES:
            raise CheckpointError(f"safetensors file[{self.path}] tensor[{name}]: dtype {e.dtype} (want BF16, F16 or F32)")
        dt = DTYPES[e.dtype]
        count = (e.end - e.begin) // SIZES[e.dtype]
        if count == 0:
            return torch.empty(e.shape, dtype=dt)
        with warnings.catch_warnings():  # the mapping is read-only; callers copy
            warnings.simplefilter("ignore", UserWarning)
            t = torch.frombuffer(self.mm, dtype=dt, count=count, offset=self.data_start + e.begin)
        return t.reshape(e.shape)


class Checkpoint:
    """A checkpoint directory: model.safetensors, or the shards of model.safetensors.index.json."""

    def __init__(self, d: str) -> None:
        self.dir = d
        idx = os.path.join(d, INDEX_FILE)
        self.index_bytes = b""
        if os.path.exists(idx):
            with open(idx, "rb") as f:
                self.index_bytes = f.read()
            try:
                wm = json.loads(self.index_bytes)["weight_map"]
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(f"safetensors index[{idx}]: {e}") from e
            names = sorted(set(wm.values()))
        elif os.path.exists(os.path.join(d, SINGLE_FILE)):
            names = [SINGLE_FILE]
        else:
            raise CheckpointError(f"checkpoint[{d}]: neither {SINGLE_FILE} nor {INDEX_FILE}")
        self.files: List[File] = [File(os.path.join(d, n)) for n in names]
        self.where: Dict[str, File] = {}
        for f in self.files:
            for n in f.entries:
                self.where[n] = f

    def names(self) -> Iterator[str]:
        return iter(self.where)

    def shape(self, name: str) -> Tuple[int, ...]:
        return self.where[name].entries[name].shape

    def tensor(self, name: str) -> torch.Tensor:
        if name not in self.where:
            raise CheckpointError(f"checkpoint[{self.dir}]: tensor[{name}] is missing")
        return self.where[name].tensor(name)

    def digest(self) -> str:
        """sha256 of the index (if any) and every file's header bytes, in file order (as the Go loader)."""
        h = hashlib.sha256(self.index_bytes)
        for f in self.files:
            with open(f.path, "rb") as fh:
                h.update(fh.read(f.data_start))
        return h.hexdigest()

    def close(self) -> None:
        for f in self.files:
            if f.mm is not None:
                try:  # tensors from tensor() must have been converted (copied) by now
                    f.mm.close()
                except BufferError:
                    pass
