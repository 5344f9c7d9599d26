"""The runner side of the protocol (device/RUNNER.md): HELLO, then ATTACH, PREDICT (batch 1),
CANCEL, PING and CLOSE until CLOSE or end of file.

The read loop runs on the calling thread and answers PING while a prediction runs on a worker
thread; CANCEL and the request's timeout_ms stop it between blocks, layers and steps (ERROR
cancelled). Python exceptions become ERROR device with their type and message; CUDA out-of-memory
says so with the device's figures. The server owns its segments; the engine is borrowed.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import wire
from .model import RTC, Cancelled, InputError, Inputs
from .shm import Segment, SpanError

log = logging.getLogger("gr00t_torchrunner")

PredictFn = Callable[[Inputs, Callable[[], None]], Tuple[torch.Tensor, List[Tuple[str, int]]]]


def _oom_message(e: BaseException, device: Optional[torch.device]) -> Optional[str]:
    """A CUDA out-of-memory error described with the device's figures; None for other errors."""
    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    if not ((oom and isinstance(e, oom)) or (isinstance(e, RuntimeError) and "out of memory" in str(e))):
        return None
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if device is None or device.type != "cuda":
        return f"out of memory: {first}"
    mib = 1 << 20
    try:
        total = torch.cuda.get_device_properties(device).total_memory // mib
        alloc = torch.cuda.memory_allocated(device) // mib
        reserved = torch.cuda.memory_reserved(device) // mib
        peak = torch.cuda.max_memory_allocated(device) // mib
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 — the figures are best effort
        return f"CUDA out of memory on {device}: {first}"
    return (f"CUDA out of memory on {device} ({torch.cuda.get_device_name(device)}): allocated {alloc} MiB, "
            f"reserved {reserved} MiB, peak {peak} MiB of {total} MiB: {first}")


class Server:
    """Serves one connection for one engine (predict) with the layout announced in HELLO."""

    def __init__(self, conn: wire.Conn, predict: PredictFn, hello: Dict[str, Any],
                 device: Optional[torch.device] = None,
                 changed_facts: Callable[[], Optional[Dict[str, Any]]] = lambda: None,
                 fatal: Callable[[BaseException], bool] = lambda e: False,
                 exit: Callable[[int], None] = os._exit) -> None:
        """changed_facts, called after each prediction, returns the HELLO facts.extra keys that
        changed since it was last called (sent as RESULT's extra), or None. fatal(e) says whether
        a prediction's exception leaves the device unusable (a sticky CUDA error): the request is
        answered ERROR device, then the process exits(1) so that the gateway starts a new runner."""
        self.conn, self.predict_fn, self.hello, self.device = conn, predict, hello, device
        self.changed_facts, self.fatal, self.exit = changed_facts, fatal, exit
        self.layout: Dict[str, int] = hello["layout"]
        self.segs: Dict[int, Segment] = {}
        self._mu = threading.Lock()
        self._busy = False
        self._cur = 0
        self._cancel = threading.Event()
        self._worker: Optional[threading.Thread] = None

    # ---- replies ----

    def _error(self, mid: int, kind: str, message: str) -> None:
        self.conn.send(wire.ERROR, mid, {"kind": kind, "message": message})

    # ---- the loop ----

    def serve(self) -> int:
        """Runs until CLOSE (returns 0) or until the client goes away or breaks the transport
        (returns 1). The prediction in flight is stopped and awaited before it returns."""
        try:
            self.conn.send(wire.HELLO, 0, self.hello)
            while True:
                try:
                    m = self.conn.recv()
                except wire.Closed:
                    log.info("client went away (end of file)")
                    return 1
                except wire.ProtocolError as e:
                    log.error("protocol error: %s", e)
                    return 1
                except OSError as e:
                    log.info("client went away: %s", e)
                    return 1
                if m.typ == wire.PING:
                    wire.close_fd(m.fd)
                    self.conn.send(wire.PONG, m.id)
                elif m.typ == wire.ATTACH:
                    self._attach(m)
                elif m.typ == wire.PREDICT:
                    wire.close_fd(m.fd)
                    self._predict(m)
                elif m.typ == wire.CANCEL:
                    wire.close_fd(m.fd)
                    with self._mu:
                        if self._busy and self._cur == m.id:
                            self._cancel.set()
                elif m.typ == wire.CLOSE:
                    wire.close_fd(m.fd)
                    self._stop()
                    self.conn.send(wire.CLOSED, m.id)
                    return 0
                else:
                    wire.close_fd(m.fd)
                    self._error(m.id, wire.KIND_PROTOCOL, f"unknown message type {m.typ}")
        except OSError as e:  # a reply that cannot be sent: the client is gone
            log.info("client went away: %s", e)
            return 1
        finally:
            self._stop()
            for s in self.segs.values():
                s.close()
            self.segs.clear()

    def _stop(self) -> None:
        with self._mu:
            worker = self._worker
            if self._busy:
                self._cancel.set()
        if worker is not None:
            worker.join()

    def _attach(self, m: wire.Message) -> None:
        try:
            body = m.json()
            sid, size = body["segment"], body["size"]
            if not isinstance(sid, int) or not isinstance(size, int):
                raise TypeError("segment and size must be integers")
        except Exception as e:  # noqa: BLE001 — any malformed body (deep nesting included) is the client's
            wire.close_fd(m.fd)
            self._error(m.id, wire.KIND_PROTOCOL, f"runner: ATTACH body: {e}")
            return
        if m.fd < 0:
            self._error(m.id, wire.KIND_PROTOCOL, f"runner: ATTACH segment[{sid}] without a descriptor")
            return
        with self._mu:
            busy = self._busy
        if busy:  # the prediction in flight may use the segment being replaced
            wire.close_fd(m.fd)
            self._error(m.id, wire.KIND_PROTOCOL, f"runner: ATTACH segment[{sid}] while a prediction runs")
            return
        try:
            seg = Segment(sid, m.fd, size)
        except (SpanError, OSError, ValueError) as e:
            self._error(m.id, wire.KIND_INPUT, f"runner: {e}")
            return
        old = self.segs.pop(sid, None)
        if old is not None:
            old.close()
        self.segs[sid] = seg
        self.conn.send(wire.ATTACHED, m.id, {"segment": sid, "size": size})

    def _inputs(self, p: Dict[str, Any]) -> Tuple[Inputs, Segment, Dict[str, int]]:
        """The request's tensors as views of its segment, checked against the layout."""
        L = self.layout
        sid = p.get("segment")
        seg = self.segs.get(sid) if isinstance(sid, int) else None
        if seg is None:
            raise InputError(f"segment[{sid}] is not attached")
        rows, cols = p.get("pixel_rows"), p.get("pixel_cols")
        pv = p.get("pixel_values")
        if not isinstance(rows, int) or not isinstance(cols, int) or rows < 0 or cols < 0 \
                or not isinstance(pv, dict) or pv.get("count") != rows * cols:
            raise InputError(f"pixel_values has {pv.get('count') if isinstance(pv, dict) else pv} elements, "
                             f"want pixel_rows {rows} × pixel_cols {cols}")
        for name in ("pixel_values", "input_ids", "position_ids", "state", "output"):
            seg.check(name, p.get(name))
        for name in ("attention_mask", "noise"):
            if p.get(name) is not None:
                seg.check(name, p[name])
        rtc = p.get("rtc")
        if rtc is not None:
            if not isinstance(rtc, dict):
                raise InputError(f"rtc is not an object: {rtc!r}")
            seg.check("rtc.prev", rtc.get("prev"))
            for k in ("prev_rows", "action_horizon", "rtc_overlap_steps", "rtc_frozen_steps"):
                if not isinstance(rtc.get(k), int):
                    raise InputError(f"rtc.{k} {rtc.get(k)!r}: want an integer")
            if not isinstance(rtc.get("rtc_ramp_rate"), (int, float)):
                raise InputError(f"rtc.rtc_ramp_rate {rtc.get('rtc_ramp_rate')!r}: want a number")
            if rtc["prev"]["count"] != rtc["prev_rows"] * L["action_dim"] or rtc["prev_rows"] < 1:
                raise InputError(f"rtc.prev has {rtc['prev']['count']} values, want prev_rows {rtc['prev_rows']} × {L['action_dim']}")
        grids = p.get("image_grid_thw")
        if not isinstance(grids, list) or not all(isinstance(g, list) and len(g) == 3 and all(isinstance(v, int) for v in g)
                                                  for g in grids):
            raise InputError(f"image_grid_thw is not a list of [t, h, w]: {grids!r}")
        S = p["input_ids"]["count"]
        out_n = L["action_horizon"] * L["action_dim"]
        if cols != L["pixel_cols"]:
            raise InputError(f"pixel_cols {cols}, the layout's is {L['pixel_cols']}")
        if rows > L["max_patches"] or len(grids) > L["max_images"] or S > L["max_seq"]:
            raise InputError(f"request ({rows} patches, {len(grids)} images, {S} tokens) is outside the layout "
                             f"({L['max_patches']}, {L['max_images']}, {L['max_seq']})")
        if p["output"]["count"] != out_n:
            raise InputError(f"output span holds {p['output']['count']} values, action_pred has {out_n}")
        if p["position_ids"]["count"] != 3 * S:
            raise InputError(f"position_ids has {p['position_ids']['count']} values, want 3·{S}")
        seed, emb = p.get("seed", 0), p.get("embodiment_id")
        if not isinstance(seed, int) or not isinstance(emb, int):
            raise InputError(f"seed {seed!r} and embodiment_id {emb!r} must be integers")
        f32, i32 = torch.float32, torch.int32
        inp = Inputs(
            pixel_values=seg.view(pv, f32).view(rows, cols), grids=[tuple(g) for g in grids],
            input_ids=seg.view(p["input_ids"], i32), position_ids=seg.view(p["position_ids"], i32).view(3, S),
            state=seg.view(p["state"], f32), embodiment_id=emb, seed=seed,
            attention_mask=None if p.get("attention_mask") is None else seg.view(p["attention_mask"], i32),
            noise=None if p.get("noise") is None else seg.view(p["noise"], f32))
        if rtc is not None:
            inp.rtc = RTC(prev=seg.view(rtc["prev"], f32).view(rtc["prev_rows"], L["action_dim"]),
                          horizon=rtc["action_horizon"], overlap=rtc["rtc_overlap_steps"], frozen=rtc["rtc_frozen_steps"],
                          ramp_rate=float(rtc["rtc_ramp_rate"]))
        return inp, seg, p["output"]

    def _predict(self, m: wire.Message) -> None:
        try:
            p = m.json()
            if not isinstance(p, dict):
                raise ValueError("body is not a JSON object")
        except Exception as e:  # noqa: BLE001 — any malformed body (deep nesting included) is the client's
            self._error(m.id, wire.KIND_PROTOCOL, f"runner: PREDICT body: {type(e).__name__}: {e}"[:1000])
            return
        try:
            inp, seg, out_span = self._inputs(p)
        except Exception as e:  # noqa: BLE001 — spans, types, overflows: all the request's
            self._error(m.id, wire.KIND_INPUT, f"device: input outside the served layout: {e}")
            return
        with self._mu:
            if self._busy:
                cur = self._cur
                busy = True
            else:
                busy = False
                self._busy, self._cur = True, m.id
                self._cancel.clear()
        if busy:
            self._error(m.id, wire.KIND_PROTOCOL, f"runner: PREDICT {m.id} while PREDICT {cur} runs (batch 1)")
            return
        timeout = p.get("timeout_ms") or 0
        deadline = None
        if isinstance(timeout, int) and timeout > 0:
            deadline = time.monotonic() + min(timeout, 10 ** 9) / 1000
        if self._worker is not None:
            self._worker.join()
        self._worker = threading.Thread(target=self._run, args=(m.id, inp, seg, out_span, deadline),
                                        name=f"predict-{m.id}", daemon=True)
        self._worker.start()

    def _run(self, mid: int, inp: Inputs, seg: Segment, out_span: Dict[str, int], deadline: Optional[float]) -> None:
        def check() -> None:
            if self._cancel.is_set():
                raise Cancelled("cancelled by the client")
            if deadline is not None and time.monotonic() > deadline:
                raise Cancelled("past the request's timeout_ms")

        typ, body = wire.RESULT, None
        try:
            out, stages = self.predict_fn(inp, check)
            flat = out.reshape(-1)
            if flat.numel() != out_span["count"]:
                raise InputError(f"action_pred has {flat.numel()} values, output span {out_span['count']}")
            seg.view(out_span, torch.float32).copy_(flat)
            body = {"horizon": int(out.shape[0]), "action_dim": int(out.shape[1]),
                    "stages": [{"name": n, "ns": int(ns)} for n, ns in stages]}
            extra = self.changed_facts()
            if extra:
                body["extra"] = extra
        except Cancelled as e:
            typ, body = wire.ERROR, {"kind": wire.KIND_CANCELLED, "message": f"runner: predict cancelled: {e}"}
        except InputError as e:
            typ, body = wire.ERROR, {"kind": wire.KIND_INPUT, "message": f"device: input outside the served layout: {e}"}
        except BaseException as e:  # noqa: BLE001 — any failure costs this request only
            msg = _oom_message(e, self.device) or f"torch runner: {type(e).__name__}: {e}"
            log.error("predict %d failed: %s", mid, msg, exc_info=not isinstance(e, RuntimeError))
            typ, body = wire.ERROR, {"kind": wire.KIND_DEVICE, "message": msg[:4000]}
            if self.fatal(e):
                self._send(typ, mid, body)
                log.error("the device is unusable after this error: exiting for a new runner")
                self.exit(1)
                return
        with self._mu:  # idle before the answer: the client may send the next request at once
            self._busy = False
        self._send(typ, mid, body)

    def _send(self, typ: int, mid: int, body: Optional[Dict[str, Any]]) -> None:
        """Sends an answer; one too large for the socket is sent again without its extra."""
        try:
            self.conn.send(typ, mid, body)
        except OSError as e:
            if body and body.pop("extra", None) is not None:
                log.warning("answer to %d with its extra not sent (%s): sending it without", mid, e)
                self._send(typ, mid, body)
                return
            log.info("answer to %d not sent: %s", mid, e)
