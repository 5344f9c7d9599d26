#!/usr/bin/python3
"""Adds the libero_sim embodiment to the n17-tiny checkpoint and writes its demo request.

statistics.json       : n17-tiny's entries + embodiments/libero's synthetic libero_sim entry
processor_config.json : n17-tiny's processor config + the libero_sim modality config
                        (upstream's shape: every field, action_configs null = all ABSOLUTE)
demo/libero_sim/request.json : two 256x256 PNG frames cut from case A's t=0 frames (centre
                        square, PIL bicubic resize), a LIBERO-shaped state, an instruction, a seed.
Idempotent: the libero_sim entries are replaced, every other entry is kept as it is (the
DROID entries stay those of ../shared/goldens/n17-tiny/). The golden demo/libero_sim/actions.json
is written by gr00tgw itself (see demo/libero_sim/README.md).
Run from the repository root: /usr/bin/python3 testdata/n17-tiny/gen_libero.py
"""
import base64, io, json, os
from PIL import Image

root = os.path.dirname(os.path.abspath(__file__))
lib = os.path.join(root, "..", "..", "embodiments", "libero", "testdata")
demo = os.path.join(root, "demo", "libero_sim")
TAG = "libero_sim"

def load(p):
    with open(p) as f:
        return json.load(f)

def dump(obj, p, indent):
    with open(p, "w") as f:
        json.dump(obj, f, indent=indent)
        f.write("\n")

stats = load(os.path.join(root, "statistics.json"))
stats[TAG] = load(os.path.join(lib, "statistics.json"))[TAG]
dump(stats, os.path.join(root, "statistics.json"), 1)

pc = load(os.path.join(root, "processor_config.json"))
pc["processor_kwargs"]["modality_configs"][TAG] = load(os.path.join(lib, "processor_config.json"))["processor_kwargs"]["modality_configs"][TAG]
dump(pc, os.path.join(root, "processor_config.json"), 2)

def frame(name, cam):
    im = Image.open(os.path.join(root, "caseA", name)).convert("RGB")
    w, h = im.size
    s = min(w, h)
    im = im.crop(((w - s) // 2, (h - s) // 2, (w - s) // 2 + s, (h - s) // 2 + s)).resize((256, 256), Image.BICUBIC)
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=False, compress_level=6)
    with open(os.path.join(demo, "frame_" + cam + ".png"), "wb") as f:
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
dump(req, os.path.join(demo, "request.json"), 1)
