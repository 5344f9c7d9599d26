#!/usr/bin/python3
"""Reference outputs for core/image's resize tests (Debian python3-opencv 4.6, python3-pil).

Inputs are generated from a counter-based hash that core/image's tests
re-implement (pattern() below), so only output digests are committed.

Regenerate:   /usr/bin/python3 testdata/image/gen_goldens.py > testdata/image/goldens.json
Re-verify:    VERIFY_PYREF=1 go test -count=1 -run PyRef ./core/image/
"""
import hashlib
import json
import sys

import cv2
import numpy as np
from PIL import Image

M = np.uint32(0xFFFFFFFF)


def pattern(seed, w, h, cn, kind):
    """uint8 HWC image. noise: hash bytes; soft: a ramp plus a little noise."""
    n = w * h * cn
    i = np.arange(n, dtype=np.uint64)
    x = ((i * 0x9E3779B1 + (seed * 0x85EBCA77)) & 0xFFFFFFFF).astype(np.uint32)
    x ^= x >> np.uint32(15)
    x = (x.astype(np.uint64) * 0x2C1B3C6D & 0xFFFFFFFF).astype(np.uint32)
    x ^= x >> np.uint32(12)
    x = (x.astype(np.uint64) * 0x297A2D39 & 0xFFFFFFFF).astype(np.uint32)
    x ^= x >> np.uint32(15)
    b = (x >> np.uint32(24)).astype(np.int64).reshape(h, w, cn)
    if kind == "soft":
        yy, xx, cc = np.meshgrid(np.arange(h), np.arange(w), np.arange(cn), indexing="ij")
        b = (3 * xx + 5 * yy + 80 * cc + (b >> 4)) % 256
    return b.astype(np.uint8)


# (src_w, src_h, dst_w, dst_h): every INTER_AREA code path.
AREA_PAIRS = [
    (64, 48, 32, 24), (130, 90, 65, 45), (640, 480, 320, 240), (1024, 768, 512, 384),  # 2x2 fast
    (99, 66, 33, 22), (1920, 1080, 640, 360), (96, 96, 32, 32),  # 3x3
    (128, 64, 32, 32), (90, 40, 30, 40), (66, 64, 66, 32), (120, 120, 24, 24),  # 4x2, 3x1, 1x2, 5x5
    (640, 480, 256, 192), (100, 100, 30, 30), (64, 64, 21, 21), (333, 211, 97, 61),  # fractional shrink
    (320, 180, 100, 77), (1280, 720, 455, 256), (1920, 1080, 455, 256), (640, 480, 341, 256),
    (455, 256, 448, 256), (97, 89, 96, 88), (65, 67, 65, 33), (256, 256, 230, 230), (5, 7, 2, 3),
    (230, 230, 256, 256), (432, 243, 455, 256), (320, 180, 455, 256), (17, 13, 40, 29),  # enlarge
    (50, 30, 100, 60), (96, 88, 97, 89), (1, 1, 3, 2), (64, 64, 64, 128), (224, 224, 256, 256),
    (40, 100, 80, 50), (100, 40, 50, 80), (7, 64, 9, 32), (300, 20, 150, 61),  # mixed axes
    # deterministic "random" pairs between 2 and 120 px
    (83, 17, 29, 110), (2, 119, 61, 3), (45, 45, 44, 46), (118, 77, 13, 9), (31, 63, 62, 21),
    (71, 5, 70, 4), (12, 98, 12, 97), (57, 114, 91, 38),
]

# Sizes for the bicubic comparison (PIL BICUBIC).
BICUBIC_PAIRS = [
    (455, 256, 448, 256), (340, 256, 352, 256), (224, 224, 256, 256), (256, 256, 224, 224),
    (640, 480, 608, 480), (320, 180, 100, 77), (97, 89, 96, 88), (17, 13, 40, 29),
    (64, 64, 21, 21), (40, 100, 80, 50), (1280, 720, 448, 256), (83, 17, 29, 110),
    (2, 119, 61, 3), (45, 45, 44, 46), (256, 455, 256, 448), (100, 100, 300, 300),
]

# Inputs for the whole eval chain (w, h, letterbox, fixed). fixed: the
# shortest_image_edge=None recipe, Resize(256, 256) -> crop 230/256 -> Resize(256, 256).
CHAIN_INPUTS = [
    (320, 180, False, False), (1280, 720, False, False), (1920, 1080, False, False), (640, 480, False, False),
    (256, 256, False, False), (224, 224, False, False), (480, 848, False, False), (320, 180, True, False),
    (640, 480, True, False), (320, 180, False, True), (640, 480, True, True),
]


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


def resize_fixed(im, h=256, w=256):  # albumentations Resize(h, w, INTER_AREA)
    if im.shape[:2] == (h, w):
        return im
    return cv2.resize(im, (w, h), interpolation=cv2.INTER_AREA)


def letterbox(im):
    h, w = im.shape[:2]
    s = max(h, w)
    ph, pw = s - h, s - w
    return np.pad(im, ((ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))


def digest(a):
    a = np.ascontiguousarray(a)
    return {"sha256": hashlib.sha256(a.tobytes()).hexdigest(), "head": [int(v) for v in a.reshape(-1)[:8]]}


def main():
    out = {"opencv": cv2.__version__, "pil": Image.__version__, "area": [], "bicubic_pil": [], "chain": []}
    seed = 1
    for (sw, sh, dw, dh) in AREA_PAIRS:
        for cn in (1, 3):
            for kind in ("noise", "soft"):
                img = pattern(seed, sw, sh, cn, kind)
                src = img[:, :, 0] if cn == 1 else img
                if seed == 1:
                    out["pattern_head"] = [int(v) for v in img.reshape(-1)[:8]]
                r = cv2.resize(src, (dw, dh), interpolation=cv2.INTER_AREA)
                out["area"].append(dict(sw=sw, sh=sh, dw=dw, dh=dh, cn=cn, kind=kind, seed=seed, **digest(r)))
                seed += 1
    for (sw, sh, dw, dh) in BICUBIC_PAIRS:
        for cn in (1, 3):
            for kind in ("noise", "soft"):
                img = pattern(seed, sw, sh, cn, kind)
                pil = Image.fromarray(img[:, :, 0] if cn == 1 else img, "L" if cn == 1 else "RGB")
                r = np.asarray(pil.resize((dw, dh), Image.BICUBIC))
                out["bicubic_pil"].append(dict(sw=sw, sh=sh, dw=dw, dh=dh, cn=cn, kind=kind, seed=seed, **digest(r)))
                seed += 1
    for (w, h, lb, fixed) in CHAIN_INPUTS:
        for kind in ("noise", "soft"):
            img = pattern(seed, w, h, 3, kind)
            x = letterbox(img) if lb else img
            if fixed:
                r = resize_fixed(fcc(resize_fixed(x), 230 / 256))
            else:
                r = sms(fcc(sms(x)))
            out["chain"].append(dict(w=w, h=h, letterbox=lb, fixed=fixed, kind=kind, seed=seed, ew=r.shape[1], eh=r.shape[0], **digest(r)))
            seed += 1
    # One case per line keeps diffs readable.
    w = sys.stdout.write
    w('{"opencv": %s, "pil": %s, "pattern_head": %s,\n' % (json.dumps(out["opencv"]), json.dumps(out["pil"]), json.dumps(out["pattern_head"])))
    for i, key in enumerate(("area", "bicubic_pil", "chain")):
        w(' "%s": [\n' % key)
        w(",\n".join("  " + json.dumps(c) for c in out[key]))
        w("\n ]%s\n" % ("," if i < 2 else ""))
    w("}\n")


if __name__ == "__main__":
    main()
