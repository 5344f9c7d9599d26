"""The read loop in process with test doubles for the engine: how failures of the engine are
answered (ERROR device with the exception, out-of-memory named as such), and the transport's
refusals (no magic -> the connection is broken).

    cd device/torchrunner && /usr/bin/python3 -m unittest discover -s tests -v
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time
import unittest

import torch

import helpers  # noqa: F401 — puts the package on sys.path
from gr00t_torchrunner import wire
from gr00t_torchrunner.model import Cancelled, InputError
from gr00t_torchrunner.server import Server

LAYOUT = {"max_patches": 64, "max_images": 4, "max_seq": 32, "pixel_cols": 4, "state_dim": 2, "action_horizon": 2,
          "action_dim": 3}
HDR = struct.Struct("<4sIQ")


def hello() -> dict:
    return {"protocol": 1, "runner": "test", "pid": 1, "facts": {"backend": "torch"}, "layout": LAYOUT}


class InProcess(unittest.TestCase):
    def start(self, predict, **kw):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        srv = Server(wire.Conn(b), predict, hello(), **kw)
        self.code = None

        def run():
            self.code = srv.serve()
            b.close()

        th = threading.Thread(target=run, daemon=True)
        th.start()

        def stop():
            a.close()  # end of file: the server returns
            th.join(5)

        self.addCleanup(stop)
        a.settimeout(10)
        self.assertEqual(HDR.unpack_from(a.recv(1 << 21))[1], wire.HELLO)
        return a, th

    def attach_and_predict(self, a) -> dict:
        import mmap
        import os
        fd = os.memfd_create("seg")
        os.ftruncate(fd, 4096)
        a.sendmsg([HDR.pack(b"GRNR", wire.ATTACH, 1) + json.dumps({"segment": 0, "size": 4096}).encode()],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
        os.close(fd)
        self.assertEqual(HDR.unpack_from(a.recv(1 << 21))[1], wire.ATTACHED)
        sp = lambda off, n: {"offset": off, "count": n}  # noqa: E731
        body = {"segment": 0, "pixel_values": sp(0, 16), "pixel_rows": 4, "pixel_cols": 4, "image_grid_thw": [[1, 2, 2]],
                "input_ids": sp(128, 5), "attention_mask": None, "position_ids": sp(256, 15), "state": sp(384, 2),
                "noise": None, "seed": 1, "embodiment_id": 0, "output": sp(512, 6)}
        a.send(HDR.pack(b"GRNR", wire.PREDICT, 2) + json.dumps(body).encode())
        data = a.recv(1 << 21)
        typ, mid = HDR.unpack_from(data)[1:]
        self.assertEqual(mid, 2)
        return {"type": typ, **json.loads(data[HDR.size:] or b"{}")}

    def test_engine_failures(self) -> None:
        cases = [
            (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "device", "out of memory: CUDA out of memory"),
            (ValueError("boom"), "device", "torch runner: ValueError: boom"),
            (InputError("embodiment_id 40 is outside"), "input", "embodiment_id 40"),
            (Cancelled("cancelled by the client"), "cancelled", "cancelled by the client"),
        ]
        for exc, kind, text in cases:
            with self.subTest(type(exc).__name__):
                def fail(inp, check, exc=exc):
                    raise exc
                a, _ = self.start(fail)
                got = self.attach_and_predict(a)
                self.assertEqual((got["type"], got["kind"]), (wire.ERROR, kind), got)
                self.assertIn(text, got["message"])
                a.send(HDR.pack(b"GRNR", wire.PING, 3))  # still serving
                self.assertEqual(HDR.unpack_from(a.recv(1 << 21))[1:], (wire.PONG, 3))

    def test_fatal_device_error_exits_after_answering(self) -> None:
        exits = []

        def fail(inp, check):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        a, _ = self.start(fail, fatal=lambda e: "CUDA error" in str(e), exit=exits.append)
        got = self.attach_and_predict(a)
        self.assertEqual((got["type"], got["kind"]), (wire.ERROR, "device"))
        self.assertIn("illegal memory access", got["message"])
        for _ in range(500):  # the worker exits just after answering
            if exits:
                break
            time.sleep(0.01)
        self.assertEqual(exits, [1], "the runner exits so that the gateway starts a new one")

    def test_malformed_bodies(self) -> None:
        a, _ = self.start(lambda inp, check: None)
        deep = b"[" * 100000 + b"]" * 100000
        a.send(HDR.pack(b"GRNR", wire.PREDICT, 5) + deep)
        data = a.recv(1 << 21)
        self.assertEqual(HDR.unpack_from(data)[1:], (wire.ERROR, 5))
        self.assertEqual(json.loads(data[HDR.size:])["kind"], "protocol")
        a.send(HDR.pack(b"GRNR", wire.PING, 6))  # still serving
        self.assertEqual(HDR.unpack_from(a.recv(1 << 21))[1:], (wire.PONG, 6))

    def test_result_written_at_output(self) -> None:
        def ok(inp, check):
            self.assertEqual(tuple(inp.pixel_values.shape), (4, 4))
            return torch.arange(6, dtype=torch.float32).reshape(2, 3), [("vision", 5)]
        a, _ = self.start(ok)
        got = self.attach_and_predict(a)
        self.assertEqual(got["type"], wire.RESULT, got)
        self.assertEqual((got["horizon"], got["action_dim"], got["stages"]), (2, 3, [{"name": "vision", "ns": 5}]))

    def test_no_magic_breaks_the_connection(self) -> None:
        a, th = self.start(lambda inp, check: None)
        a.send(b"XXXX" + bytes(12))
        th.join(5)
        self.assertEqual(self.code, 1)

    def test_close(self) -> None:
        a, th = self.start(lambda inp, check: None)
        a.send(HDR.pack(b"GRNR", wire.CLOSE, 9))
        self.assertEqual(HDR.unpack_from(a.recv(1 << 21))[1:], (wire.CLOSED, 9))
        th.join(5)
        self.assertEqual(self.code, 0)


if __name__ == "__main__":
    unittest.main()
