#!/usr/bin/python3
"""Builds the n17-tiny-libero side files and demo request (not the golden).

statistics.json       = n17-tiny's DROID entry + embodiments/libero's synthetic libero_sim entry
processor_config.json = n17-tiny's processor_config + the libero_sim modality config
demo/request.json     = two 256x256 PNG frames cut from case A's t=0 frames (centre square,
                        PIL bicubic resize), a LIBERO-shaped state, an instruction, a seed.
The golden demo/actions.json is written by gr00tgw itself (see README.md).
Run from the repository root: /usr/bin/python3 testdata/n17-tiny-libero/gen.py
"""
import base64, io, json, os
from PIL import Image

root = os.path.dirname(os.path.abspath(__file__))
tiny = os.path.join(root, "..", "n17-tiny")
lib = os.path.join(root, "..", "..", "embodiments", "libero", "testdata")
TAG = "libero_sim"

def load(p):
    with open(p) as f:
        return json.load(f)

def dump(obj, p):
    with open(p, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")

stats = load(os.path.join(tiny, "statistics.json"))
stats[TAG] = load(os.path.join(lib, "statistics.json"))[TAG]
dump(stats, os.path.join(root, "statistics.json"))

pc = load(os.path.join(tiny, "processor_config.json"))
pc["processor_kwargs"]["modality_configs"][TAG] = load(os.path.join(lib, "processor_config.json"))["processor_kwargs"]["modality_configs"][TAG]
dump(pc, os.path.join(root, "processor_config.json"))

def frame(name, cam):
    im = Image.open(os.path.join(tiny, "caseA", name)).convert("RGB")
    w, h = im.size
    s = min(w, h)
    im = im.crop(((w - s) // 2, (h - s) // 2, (w - s) // 2 + s, (h - s) // 2 + s)).resize((256, 256), Image.BICUBIC)
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=False, compress_level=6)
    with open(os.path.join(root, "demo", "frame_" + cam + ".png"), "wb") as f:
        f.write(buf.getvalue())
    return base64.b64encode(buf.getvalue()).decode()

req = {
    "images": {
        "image": [frame("frame_2_exterior_image_1_left_t0.png", "image")],
        "wrist_image": [frame("frame_3_wrist_image_left_t0.png", "wrist_image")],
    },
    "state": {"x": [-0.05], "y": [0.02], "z": [1.07], "roll": [3.1], "pitch": [-0.1],
              "yaw": [0.2], "gripper": [0.03, -0.028]},
    "instruction": "put the bowl on the plate",
    "embodiment": TAG,
    "seed": 7,
}
dump(req, os.path.join(root, "demo", "request.json"))
