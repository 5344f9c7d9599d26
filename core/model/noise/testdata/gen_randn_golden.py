#!/usr/bin/python3
"""Golden values for core/model/noise: torch.randn on CPU, float32.

For every (seed, n): x = torch.randn([n], generator=torch.Generator().manual_seed(seed))
(the shape does not matter, only the element count; [1, 40, 132] is n = 5280),
recorded as the first and last 4 values (exact decimal of the float32) and the
sha256 of the little-endian float32 bytes.

Regenerate:  /usr/bin/python3 core/model/noise/testdata/gen_randn_golden.py > core/model/noise/testdata/randn_golden.json
Extra cases: gen_randn_golden.py --seeds 7,8 --sizes 16,5280   (used by VERIFY_TORCH=1 go test)
"""
import argparse
import hashlib
import json
import sys

import torch

SEEDS = [0, 1, 42, 1234, 2**32 + 7, 2**63 - 1]
SIZES = [5280, 16, 17, 31, 33, 100, 1, 2, 3, 15]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    a = ap.parse_args()
    cases = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        for n in [int(s) for s in a.sizes.split(",")]:
            x = torch.randn([n], generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
            v = x.numpy().astype("<f4")
            cases.append({
                "seed": seed,
                "n": n,
                "first": [float(f) for f in v[:4]],
                "last": [float(f) for f in v[-4:]],
                "sha256": hashlib.sha256(v.tobytes()).hexdigest(),
            })
    json.dump({"torch": torch.__version__, "cases": cases}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
