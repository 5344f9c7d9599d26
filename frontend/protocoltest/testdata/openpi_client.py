#!/usr/bin/env python3
"""An openpi websocket policy client written from the protocol's wire facts.

It speaks what openpi_client.WebsocketClientPolicy speaks: connect with
compression=None and max_size=None (optionally "Authorization: Api-Key <key>"),
read one binary msgpack metadata frame, then send one observation per binary
frame and read one binary reply; a text frame is the server's error, after
which the server closes with 1011. Arrays use openpi_client.msgpack_numpy's
bin-keyed {b"__ndarray__", b"data", b"dtype", b"shape"}.

The observation is the DROID demo of a /predict request.json (base64 PNG
frames decoded to raw uint8 RGB by gr00t_zmq_client.decode_png):
observation/<camera> uint8 (T, H, W, 3), observation/<group> float32 (D,),
prompt.

  openpi_client.py --port 8000 metadata
  openpi_client.py --port 8000 --request testdata/n17-tiny/caseA/request.json infer
  openpi_client.py --port 8000 --request ... errors

Debian: apt-get install python3-websockets python3-msgpack python3-numpy
(websockets 10.4's asyncio API). Output: one JSON document on stdout.
"""

import argparse
import asyncio
import json
import os
import sys

import msgpack
import numpy as np
import websockets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gr00t_zmq_client import load_demo  # noqa: E402  (the PNG decoder)


def pack_array(obj):
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in ("V", "O", "c"):
        raise ValueError(f"Unsupported dtype: {obj.dtype}")
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def unpack_array(obj):
    if b"__ndarray__" in obj:
        return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]), shape=obj[b"shape"])
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def packb(x):
    return msgpack.packb(x, default=pack_array)


def unpackb(b):
    return msgpack.unpackb(b, object_hook=unpack_array)


class Client:
    def __init__(self, uri, api_key=None):
        self.uri, self.api_key = uri, api_key

    async def __aenter__(self):
        headers = {"Authorization": f"Api-Key {self.api_key}"} if self.api_key else None
        self.ws = await websockets.connect(self.uri, compression=None, max_size=None, extra_headers=headers)
        self.metadata = unpackb(await self.ws.recv())
        return self

    async def __aexit__(self, *exc):
        await self.ws.close()

    async def infer(self, obs):
        await self.ws.send(packb(obs))
        response = await self.ws.recv()
        if isinstance(response, str):
            raise RuntimeError(f"Error in inference server:\n{response}")
        return unpackb(response)

    async def send_raw(self, data):
        await self.ws.send(data)
        response = await self.ws.recv()
        if isinstance(response, str):
            raise RuntimeError(f"Error in inference server:\n{response}")
        return response


def observation(video, state, text):
    obs = {f"observation/{k}": a for k, a in video.items()}
    obs.update({f"observation/{k}": a for k, a in state.items()})
    obs["prompt"] = text
    return obs


async def run(args):
    uri = f"ws://{args.host}:{args.port}"
    if args.command == "metadata":
        async with Client(uri, args.api_key) as c:
            return c.metadata
    video, state, text = load_demo(args.request)
    if args.command == "infer":
        async with Client(uri, args.api_key) as c:
            obs = observation(video, state, text)
            if args.seed is not None:
                obs["seed"] = args.seed
            out = []
            for _ in range(args.repeat):
                r = await c.infer(obs)
                assert isinstance(r["actions"], np.ndarray) and r["actions"].dtype == np.float32
                out.append({
                    "actions": {"shape": list(r["actions"].shape), "values": r["actions"].astype(np.float64).ravel().tolist()},
                    "action_groups": {k: {"shape": list(a.shape), "values": a.astype(np.float64).ravel().tolist()} for k, a in r["action_groups"].items()},
                    "server_timing": r["server_timing"],
                    "request_id": r["request_id"],
                })
            return out
    # errors: each bad observation on a fresh connection gets a text frame naming the
    # field, then close 1011.
    good = observation(video, state, text)
    bad_cases = {
        "wrong dtype": {**good, "observation/wrist_image_left": video["wrist_image_left"].astype(np.float32)},
        "wrong rank": {**good, "observation/wrist_image_left": video["wrist_image_left"][0]},
        "missing camera": {k: v for k, v in good.items() if k != "observation/wrist_image_left"},
        "NaN state": {**good, "observation/joint_position": np.full(7, np.nan, dtype=np.float32)},
        "missing prompt": {k: v for k, v in good.items() if k != "prompt"},
    }
    cases = []
    for name, obs in list(bad_cases.items()) + [("garbage bytes", b"\xc1garbage"), ("truncated msgpack", packb(good)[:1000])]:
        async with Client(uri, args.api_key) as c:
            try:
                if isinstance(obs, bytes):
                    await c.send_raw(obs)
                else:
                    await c.infer(obs)
                cases.append({"case": name, "error": None})
                continue
            except RuntimeError as e:
                err = str(e)
            try:
                await c.ws.recv()
                code = None
            except websockets.ConnectionClosed as cc:
                code = cc.code
            cases.append({"case": name, "error": err, "close_code": code})
    try:
        async with Client(uri, "wrong-key") as c:
            cases.append({"case": "bad key", "error": None})
    except websockets.exceptions.InvalidStatusCode as e:
        cases.append({"case": "bad key", "error": f"HTTP {e.status_code}", "close_code": None})
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--request", help="a /predict request.json with the demo observation")
    ap.add_argument("--seed", type=int, default=None, help="the observation's seed (gr00tgw)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("command", choices=["metadata", "infer", "errors"])
    args = ap.parse_args()
    out = asyncio.run(run(args))

    def default(o):
        if isinstance(o, bytes):
            return o.decode("utf-8", "replace")
        if isinstance(o, np.generic):
            return o.item()
        raise TypeError(type(o))
    json.dump(out, sys.stdout, default=default)


if __name__ == "__main__":
    main()
