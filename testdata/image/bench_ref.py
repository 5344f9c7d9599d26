#!/usr/bin/python3
"""Times the Python reference host image pipeline on the case-A frames.

One "request" = the 4 case-A PNGs (2 cameras x 2 frames, 320x180):
decode -> GR00T eval chain (cv2 INTER_AREA SmallestMaxSize -> crop 0.95 ->
SmallestMaxSize) -> Qwen smart_resize bicubic (256x455 -> 256x448) ->
(x - 127.5) / 127.5 -> temporal duplication + 2x2-merge patch flattening
-> pixel_values [1792, 1536] float32.

Bicubic: upstream runs torch >= 2.1's uint8 kernel; Debian's torch 1.13 has
only the float path (F.interpolate(antialias=True) on float32, then round),
which is what is timed here (PIL BICUBIC is timed as the alternative).

Usage:  /usr/bin/python3 testdata/image/bench_ref.py [--iters N] [--dir testdata/n17-tiny/caseA]
Prints per-stage medians and a final line "REQUEST_MS <median ms per request>"
(the Go counterpart is BenchmarkEncodeRequest4Frames in core/image).
"""
import argparse
import glob
import os
import statistics
import time

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
import io


def sms(im, m=256):
    h, w = im.shape[:2]
    s = m / float(min(h, w))
    if s == 1.0:
        return im
    nh, nw = round(h * s), round(w * s)
    if (nh, nw) == (h, w):
        return im
    return cv2.resize(im, (nw, nh), interpolation=cv2.INTER_AREA)


def fcc(im, f=0.95):
    h, w = im.shape[:2]
    ch, cw = max(1, int(h * f)), max(1, int(w * f))
    y, x = (h - ch) // 2, (w - cw) // 2
    return im[y:y + ch, x:x + cw]


def smart_resize(h, w, factor=32, mn=65536, mx=16777216):
    import math
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > mx:
        b = math.sqrt(h * w / mx)
        hb, wb = max(factor, math.floor(h / b / factor) * factor), max(factor, math.floor(w / b / factor) * factor)
    elif hb * wb < mn:
        b = math.sqrt(mn / (h * w))
        hb, wb = math.ceil(h * b / factor) * factor, math.ceil(w * b / factor) * factor
    return hb, wb


def bicubic_torch(im):
    h, w = im.shape[:2]
    nh, nw = smart_resize(h, w)
    if (nh, nw) == (h, w):
        return im
    t = torch.from_numpy(np.ascontiguousarray(im)).permute(2, 0, 1)[None].float()
    r = F.interpolate(t, size=(nh, nw), mode="bicubic", antialias=True, align_corners=False)
    return r.clamp_(0, 255).round_().to(torch.uint8)[0].permute(1, 2, 0).numpy()


def bicubic_pil(im):
    h, w = im.shape[:2]
    nh, nw = smart_resize(h, w)
    if (nh, nw) == (h, w):
        return im
    return np.asarray(Image.fromarray(im).resize((nw, nh), Image.BICUBIC))


def patchify(frames):
    out = []
    for im in frames:
        x = (im.astype(np.float32) - np.float32(127.5)) / np.float32(127.5)
        f = np.stack([x.transpose(2, 0, 1)] * 2)
        T, C, H, W = f.shape
        p, m = 16, 2
        out.append(f.reshape(1, 2, C, H // p // m, m, p, W // p // m, m, p)
                   .transpose(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(-1, C * 2 * p * p))
    return np.concatenate(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "..", "n17-tiny", "caseA"))
    a = ap.parse_args()
    pngs = [open(p, "rb").read() for p in sorted(glob.glob(os.path.join(a.dir, "frame_*.png")))]
    assert len(pngs) == 4, "want 4 case-A PNGs"
    want = os.path.join(a.dir, "pixel_values.npy")

    stages = {
        "decode_cv2": lambda: [cv2.cvtColor(cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB) for b in pngs],
        "decode_pil": lambda: [np.asarray(Image.open(io.BytesIO(b)).convert("RGB")) for b in pngs],
    }
    frames = stages["decode_cv2"]()
    evals = [sms(fcc(sms(f))) for f in frames]
    resized = [bicubic_torch(e) for e in evals]
    stages["eval_chain_cv2"] = lambda: [sms(fcc(sms(f))) for f in frames]
    stages["bicubic_torch_float"] = lambda: [bicubic_torch(e) for e in evals]
    stages["bicubic_pil"] = lambda: [bicubic_pil(e) for e in evals]
    stages["normalize_patchify_numpy"] = lambda: patchify(resized)

    def request():
        fr = stages["decode_cv2"]()
        return patchify([bicubic_torch(sms(fcc(sms(f)))) for f in fr])

    pv = request()
    if os.path.exists(want):
        ref = np.load(want)
        print("check: pixel_values shape %s, %d values differ from the golden (float bicubic path)" % (pv.shape, int((pv != ref).sum())))
    stages["request"] = request
    res = {}
    for name, fn in stages.items():
        fn()
        ts = []
        for _ in range(a.iters):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        res[name] = statistics.median(ts)
        print("%-26s %8.3f ms (median of %d, 4 frames)" % (name, res[name], a.iters))
    print("versions: cv2 %s, torch %s (threads %d), numpy %s, PIL %s" % (cv2.__version__, torch.__version__, torch.get_num_threads(), np.__version__, Image.__version__))
    print("REQUEST_MS %.3f" % res["request"])


if __name__ == "__main__":
    main()
