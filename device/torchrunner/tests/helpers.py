"""Shared pieces of the runner's unittests: paths, case-A inputs, a protocol client."""
from __future__ import annotations

import json
import mmap
import os
import socket
import struct
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)  # holds gr00t_torchrunner/
REPO = os.path.abspath(os.path.join(PKG_ROOT, "..", ".."))
TINY = os.path.join(REPO, "testdata", "n17-tiny")
CASE_A = os.path.join(TINY, "caseA")

if PKG_ROOT not in sys.path:
    sys.path.insert(0, PKG_ROOT)


def case_a() -> Dict[str, np.ndarray]:
    names = ["pixel_values", "image_grid_thw", "input_ids", "attention_mask", "position_ids", "state_normalized",
             "noise", "action_pred"]
    return {n: np.load(os.path.join(CASE_A, n + ".npy")) for n in names}


def pcc(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel())[0, 1])


HDR = struct.Struct("<4sIQ")


class Client:
    """A minimal client of the runner protocol over a socketpair, for tests: it starts the runner
    as `python3 -B -m gr00t_torchrunner --fd 3 ...` and lays out one segment as the Go client does."""

    def __init__(self, *flags: str) -> None:
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        os.set_inheritable(child.fileno(), True)
        env = dict(os.environ, PYTHONPATH=PKG_ROOT)
        fd = child.fileno()
        self.proc = subprocess.Popen(
            [sys.executable, "-B", "-m", "gr00t_torchrunner", "--fd", str(fd), "--device", "cpu", *flags],
            env=env, pass_fds=(fd,), stderr=subprocess.PIPE)
        child.close()
        self.next_id = 1
        self.seg: Optional[mmap.mmap] = None
        self.sock.settimeout(120)

    def send(self, typ: int, body: Any = None, mid: Optional[int] = None, fd: int = -1) -> int:
        if mid is None:
            mid, self.next_id = self.next_id, self.next_id + 1
        data = HDR.pack(b"GRNR", typ, mid) + (b"" if body is None else json.dumps(body).encode())
        anc = [] if fd < 0 else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))]
        self.sock.sendmsg([data], anc)
        return mid

    def recv(self) -> Tuple[int, int, Any]:
        data = self.sock.recv(1 << 21)
        if not data:
            raise EOFError("runner closed its socket")
        magic, typ, mid = HDR.unpack_from(data)
        assert magic == b"GRNR", magic
        body = data[HDR.size:]
        return typ, mid, json.loads(body) if body else None

    def attach(self, size: int, sid: int = 0) -> Tuple[int, int, Any]:
        fd = os.memfd_create("seg", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        self.seg = mmap.mmap(fd, size)
        self.send(2, {"segment": sid, "size": size}, fd=fd)
        os.close(fd)
        return self.recv()

    def put(self, offset: int, arr: np.ndarray) -> Dict[str, int]:
        b = np.ascontiguousarray(arr).tobytes()
        assert self.seg is not None
        self.seg[offset:offset + len(b)] = b
        return {"offset": offset, "count": arr.size}

    def predict_body(self, c: Dict[str, np.ndarray], noise: bool = True, slot: int = 24) -> Dict[str, Any]:
        """Lays case A out in the segment (64-byte aligned, pixel_values first) and returns the body."""
        off = 0
        spans: Dict[str, Any] = {}
        for name, arr in (("pixel_values", c["pixel_values"].astype(np.float32)),
                          ("input_ids", c["input_ids"].astype(np.int32).ravel()),
                          ("attention_mask", c["attention_mask"].astype(np.int32).ravel()),
                          ("position_ids", c["position_ids"].astype(np.int32).reshape(3, -1)),
                          ("state", c["state_normalized"].astype(np.float32).ravel()),
                          ("noise", c["noise"].astype(np.float32).ravel()),
                          ("output", np.zeros(c["action_pred"].size, np.float32))):
            spans[name] = self.put(off, arr)
            off += (arr.size * 4 + 63) & ~63
        rows, cols = c["pixel_values"].shape
        body = dict(spans, segment=0, pixel_rows=rows, pixel_cols=cols,
                    image_grid_thw=[[int(v) for v in g] for g in c["image_grid_thw"]], seed=42, embodiment_id=slot)
        if not noise:
            body["noise"] = None
        return body

    @staticmethod
    def segment_size(c: Dict[str, np.ndarray]) -> int:
        n = sum(((c[k].size * 4 + 63) & ~63) for k in ("pixel_values", "input_ids", "attention_mask", "position_ids",
                                                       "state_normalized", "noise", "action_pred"))
        return (n + 4095) & ~4095

    def output(self, body: Dict[str, Any]) -> np.ndarray:
        o = body["output"]
        assert self.seg is not None
        return np.frombuffer(self.seg, np.float32, o["count"], o["offset"]).copy()

    def close(self) -> List[str]:
        try:
            self.sock.close()
        finally:
            try:
                _, err = self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, err = self.proc.communicate()
        return (err or b"").decode(errors="replace").splitlines()
