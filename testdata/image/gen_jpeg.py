#!/usr/bin/python3
"""JPEG fixtures for core/image's JPEG test: a 161x97 crop of case-A frame 0
encoded by Pillow at 4:2:0 / 4:2:2 / 4:4:4, and Pillow's own decode of each
(lossless PNG), which core/image must match within +-3 levels.

Regenerate:  /usr/bin/python3 testdata/image/gen_jpeg.py
"""
import os

from PIL import Image

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(here, "..", "n17-tiny", "caseA", "frame_0_exterior_image_1_left_t-15.png")
im = Image.open(src).convert("RGB").crop((40, 30, 40 + 161, 30 + 97))
for name, q, ss in (("420", 90, 2), ("422", 90, 1), ("444", 95, 0)):
    jp = os.path.join(here, "jpeg_%s.jpg" % name)
    im.save(jp, quality=q, subsampling=ss)
    Image.open(jp).convert("RGB").save(os.path.join(here, "jpeg_%s_pil.png" % name))
