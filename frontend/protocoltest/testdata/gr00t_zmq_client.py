#!/usr/bin/env python3
"""An Isaac-GR00T ZeroMQ policy client written from the protocol's wire facts.

It speaks what gr00t/policy/server_client.py's PolicyClient speaks (a pyzmq
REQ socket, msgpack requests {"endpoint", "data", "api_token"}) with either
array serializer found in the field:

  npy            N1.5-N1.7 release MsgSerializer: {"__ndarray_class__": True,
                 "as_npy": <np.save bytes>}
  msgpack_numpy  upstream since 2026-05: msgpack_numpy 0.4.8's bin-keyed
                 {b"nd", b"type", b"kind", b"shape", b"data"} (the
                 msgpack_numpy package when installed, else the same wire
                 form written here)

It reads the DROID demo observation of a /predict request.json (base64 PNG
frames, decoded here to raw uint8 RGB: no PIL needed), so a robot-side
client can be tried against gr00tgw (or upstream's PolicyServer) with:

  gr00t_zmq_client.py --port 5555 ping
  gr00t_zmq_client.py --port 5555 modality
  gr00t_zmq_client.py --port 5555 --request testdata/n17-tiny/caseA/request.json action
  gr00t_zmq_client.py --port 5555 --request ... errors

Debian: apt-get install python3-zmq python3-msgpack python3-numpy
Output: one JSON document on stdout.
"""

import argparse
import base64
import io
import json
import sys
import zlib
from dataclasses import dataclass
from enum import Enum

import msgpack
import numpy as np
import zmq

try:
    import msgpack_numpy as mnp  # python3-msgpack-numpy, what upstream HEAD uses
except ImportError:  # the same wire form, written from the facts
    mnp = None


# --- upstream's ModalityConfig, as gr00t/data/types.py defines it --------

class ActionRepresentation(Enum):
    RELATIVE = "relative"
    DELTA = "delta"
    ABSOLUTE = "absolute"


class ActionType(Enum):
    EEF = "eef"
    NON_EEF = "non_eef"


class ActionFormat(Enum):
    DEFAULT = "default"
    XYZ_ROT6D = "xyz+rot6d"
    XYZ_ROTVEC = "xyz+rotvec"


@dataclass
class ActionConfig:
    rep: ActionRepresentation
    type: ActionType
    format: ActionFormat
    state_key: str = None


@dataclass
class ModalityConfig:
    delta_indices: list
    modality_keys: list
    sin_cos_embedding_keys: list = None
    mean_std_embedding_keys: list = None
    action_configs: list = None

    def __post_init__(self):
        if not isinstance(self.delta_indices, list):
            raise ValueError(f"delta_indices must be a list, got {self.delta_indices!r}")
        if not isinstance(self.modality_keys, list) or not self.modality_keys:
            raise ValueError(f"modality_keys must be a non-empty list, got {self.modality_keys!r}")
        if self.action_configs is not None:
            assert len(self.action_configs) == len(self.modality_keys)
            self.action_configs = [
                ActionConfig(ActionRepresentation[a["rep"]], ActionType[a["type"]], ActionFormat[a["format"]], a.get("state_key"))
                if isinstance(a, dict) else a
                for a in self.action_configs
            ]


# --- the two serializers ---------------------------------------------------

class ReleaseSerializer:
    """N1.7 release MsgSerializer (str keys, .npy bytes)."""

    @staticmethod
    def to_bytes(data):
        def enc(obj):
            if isinstance(obj, np.ndarray):
                b = io.BytesIO()
                np.save(b, obj, allow_pickle=False)
                return {"__ndarray_class__": True, "as_npy": b.getvalue()}
            return obj
        return msgpack.packb(data, default=enc)

    @staticmethod
    def from_bytes(data):
        def dec(obj):
            if "__ModalityConfig_class__" in obj:
                return ModalityConfig(**obj["as_json"])
            if "__ndarray_class__" in obj:
                return np.load(io.BytesIO(obj["as_npy"]), allow_pickle=False)
            return obj
        return msgpack.unpackb(data, object_hook=dec)


def _mnp_encode(obj):
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "O":
            raise TypeError("refusing an object-dtype ndarray")
        if mnp is not None:
            return mnp.encode(obj)
        return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": obj.shape, b"data": obj.tobytes()}
    return obj


def _mnp_decode(obj):
    if mnp is not None:
        return mnp.decode(obj)
    if b"nd" in obj and obj[b"nd"] is True:
        return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"type"]), shape=obj[b"shape"])
    return obj


class HeadSerializer:
    """Upstream HEAD MsgSerializer (msgpack_numpy, marker __ModalityConfig__)."""

    @staticmethod
    def to_bytes(data):
        return msgpack.packb(data, default=_mnp_encode)

    @staticmethod
    def from_bytes(data):
        def dec(obj):
            if isinstance(obj, dict) and (obj.get(b"kind") in (b"O", "O")):
                raise ValueError("refusing an object-dtype ndarray payload")
            obj = _mnp_decode(obj)
            if isinstance(obj, dict) and "__ModalityConfig__" in obj:
                return ModalityConfig(**obj["as_json"])
            return obj
        return msgpack.unpackb(data, object_hook=dec, raw=False)


# --- PolicyClient ------------------------------------------------------------

class PolicyClient:
    def __init__(self, host, port, serializer, api_token=None, timeout_ms=15000):
        self.ctx = zmq.Context()
        self.addr = f"tcp://{host}:{port}"
        self.ser = serializer
        self.api_token = api_token
        self.timeout_ms = timeout_ms
        self._init_socket()

    def _init_socket(self):
        self.socket = self.ctx.socket(zmq.REQ)
        self.socket.setsockopt(zmq.RCVTIMEO, self.timeout_ms)
        self.socket.setsockopt(zmq.SNDTIMEO, self.timeout_ms)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(self.addr)

    def call_raw(self, payload):
        try:
            self.socket.send(payload)
            return self.socket.recv()
        except zmq.error.Again:
            self.socket.close()
            self._init_socket()
            raise

    def call_endpoint(self, endpoint, data=None, requires_input=True):
        request = {"endpoint": endpoint}
        if requires_input:
            request["data"] = data
        if self.api_token:
            request["api_token"] = self.api_token
        message = self.call_raw(self.ser.to_bytes(request))
        if message == b"ERROR":
            raise RuntimeError("Server error. Make sure we are running the correct policy server.")
        response = self.ser.from_bytes(message)
        if isinstance(response, dict) and "error" in response:
            raise RuntimeError(f"Server error: {response['error']}")
        return response

    def ping(self):
        return self.call_endpoint("ping", requires_input=False)

    def get_modality_config(self):
        return self.call_endpoint("get_modality_config", requires_input=False)

    def get_action(self, observation, options=None):
        return tuple(self.call_endpoint("get_action", {"observation": observation, "options": options}))

    def reset(self, options=None):
        return self.call_endpoint("reset", {"options": options})


# --- the demo observation ----------------------------------------------------

def decode_png(data):
    """Decodes an 8-bit RGB, non-interlaced PNG to uint8 (H, W, 3)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h = int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big")
            depth, ctype, interlace = body[8], body[9], body[12]
            if (depth, ctype, interlace) != (8, 2, 0):
                raise ValueError(f"PNG depth {depth} color type {ctype} interlace {interlace}: only 8-bit RGB, non-interlaced")
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride, bpp = w * 3, 3
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif f == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif f != 0:
            raise ValueError(f"PNG filter {f}")
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return np.frombuffer(bytes(out), dtype=np.uint8).reshape(h, w, 3)


def load_demo(path):
    """The /predict body's frames as uint8 (T, H, W, 3) per camera, state as float32."""
    req = json.load(open(path))
    video = {}
    for cam, frames in req["images"].items():
        video[cam] = np.stack([decode_png(base64.b64decode(s.split(",")[-1])) for s in frames])
    state = {g: np.asarray(v, dtype=np.float32) for g, v in req["state"].items()}
    text = req.get("instruction") or req.get("language") or req.get("prompt")
    return video, state, text


LANG_KEY = "annotation.language.language_instruction"


def observation(video, state, text, form, batch):
    """The batched observation in the nested (N1.6/N1.7) or flat (sim wrapper) form."""
    v = {k: np.repeat(a[None], batch, axis=0) for k, a in video.items()}  # (B, T, H, W, 3)
    s = {k: np.repeat(a[None, None], batch, axis=0) for k, a in state.items()}  # (B, 1, D)
    if form == "nested":
        return {"video": v, "state": s, "language": {LANG_KEY: [[text]] * batch}}
    obs = {f"video.{k}": a for k, a in v.items()}
    obs.update({f"state.{k}": a for k, a in s.items()})
    obs[LANG_KEY] = [text] * batch
    return obs


def as_json(action):
    return {k: {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.astype(np.float64).ravel().tolist()} for k, a in action.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5555)
    ap.add_argument("--token", default=None, help="api_token")
    ap.add_argument("--encoding", choices=["npy", "msgpack_numpy"], default="npy")
    ap.add_argument("--request", help="a /predict request.json with the demo observation")
    ap.add_argument("--form", choices=["nested", "flat", "legacy"], default="nested")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=None, help="options.seed (gr00tgw; ignored upstream)")
    ap.add_argument("--session", default="py-robot", help="options.session_id for the session command")
    ap.add_argument("command", choices=["ping", "modality", "action", "errors", "reset", "session"])
    args = ap.parse_args()
    ser = ReleaseSerializer if args.encoding == "npy" else HeadSerializer
    client = PolicyClient(args.host, args.port, ser, api_token=args.token)

    if args.command == "ping":
        json.dump(client.ping(), sys.stdout)
    elif args.command == "reset":
        json.dump(client.reset(), sys.stdout)
    elif args.command == "modality":
        mc = client.get_modality_config()
        out = {}
        for name, cfg in mc.items():
            assert isinstance(cfg, ModalityConfig), (name, type(cfg))
            out[name] = {
                "delta_indices": cfg.delta_indices,
                "modality_keys": cfg.modality_keys,
                "sin_cos_embedding_keys": cfg.sin_cos_embedding_keys,
                "mean_std_embedding_keys": cfg.mean_std_embedding_keys,
                "action_configs": None if cfg.action_configs is None else [
                    [a.rep.name, a.type.name, a.format.name, a.state_key] for a in cfg.action_configs],
            }
        json.dump(out, sys.stdout)
    elif args.command == "action":
        video, state, text = load_demo(args.request)
        options = {"seed": args.seed} if args.seed is not None else None
        if args.form == "legacy":  # N1.5: data is the flat observation itself
            obs = observation(video, state, text, "flat", args.batch)
            action = client.call_endpoint("get_action", obs)
        else:
            action, info = client.get_action(observation(video, state, text, args.form, args.batch), options)
            assert info == {}, info
        for k, a in action.items():
            assert isinstance(a, np.ndarray) and a.dtype == np.float32, (k, type(a))
        json.dump(as_json(action), sys.stdout)
    elif args.command == "session":
        # Two get_action calls in one session with real-time chunking, the
        # options as upstream's PolicyClient.get_action(observation, options)
        # sends them, then reset: [{action, info}, {action, info}, reset].
        video, state, text = load_demo(args.request)
        obs = observation(video, state, text, "nested", 1)
        out = []
        for i in range(2):
            options = {"seed": args.seed + i, "session_id": args.session, "action_horizon": 40,
                       "rtc_overlap_steps": 12, "rtc_frozen_steps": 4, "rtc_ramp_rate": 6.0}
            action, info = client.get_action(obs, options)
            out.append({"action": as_json(action), "info": info})
        out.append(client.reset({"session_id": args.session}))
        json.dump(out, sys.stdout)
    elif args.command == "errors":
        video, state, text = load_demo(args.request)
        good = observation(video, state, text, "nested", 1)
        cases = []

        def case(name, fn):
            try:
                fn()
                cases.append({"case": name, "error": None})
            except RuntimeError as e:
                cases.append({"case": name, "error": str(e)})
            # The same socket goes on after every error.
            assert client.ping()["status"] == "ok"

        def with_video(cam, arr):
            o = observation(video, state, text, "nested", 1)
            o["video"][cam] = arr
            return o

        case("wrong dtype", lambda: client.get_action(with_video("wrist_image_left", good["video"]["wrist_image_left"][:, :1].astype(np.float32))))
        case("wrong rank", lambda: client.get_action(with_video("wrist_image_left", good["video"]["wrist_image_left"][0])))
        case("missing camera", lambda: client.get_action({**good, "video": {"exterior_image_1_left": good["video"]["exterior_image_1_left"]}}))
        nan_state = {**good["state"], "joint_position": np.full((1, 1, 7), np.nan, dtype=np.float32)}
        case("NaN state", lambda: client.get_action({**good, "state": nan_state}))
        case("unknown endpoint", lambda: client.call_endpoint("teleport", requires_input=False))
        def raw(payload):
            response = ReleaseSerializer.from_bytes(client.call_raw(payload))
            if isinstance(response, dict) and "error" in response:
                raise RuntimeError(f"Server error: {response['error']}")

        case("garbage bytes", lambda: raw(b"\xc1garbage"))
        tok = {"api_token": args.token} if args.token else {}
        whole = ReleaseSerializer.to_bytes({"endpoint": "get_action", "data": {"observation": good, "options": None}, **tok})
        case("truncated msgpack", lambda: raw(whole[:len(whole) // 2]))
        npy = io.BytesIO()
        np.save(npy, np.zeros((1, 1), np.float32))
        broken = npy.getvalue().replace(b"'descr': '<f4'", b"'descr': '|O4'")
        case("npy bad header", lambda: raw(msgpack.packb({"endpoint": "get_action", "data": {"observation": {
            "video": {"exterior_image_1_left": {"__ndarray_class__": True, "as_npy": broken}}}}, **tok})))
        case("kill refused", lambda: client.call_endpoint("kill", requires_input=False))
        json.dump(cases, sys.stdout)


if __name__ == "__main__":
    main()
