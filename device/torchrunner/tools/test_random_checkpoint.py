"""Tests of random_checkpoint (needs numpy; torch optional).

    python3 -B -m unittest discover -s device/torchrunner/tools -p 'test_*.py'

The Go test tools/benchmodel TestPythonCheckpoint runs this and compares
the Python writer with the Go one (headers and index byte for byte).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import random_checkpoint as rc  # noqa: E402

TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "testdata", "n17-tiny")


def bf16_values(path: str, name: str) -> list[float]:
    """The values of one BF16 tensor of a safetensors file, widened to float."""
    import numpy as np

    hdr = rc.read_header(path)
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        lo, hi = hdr[name]["data_offsets"]
        f.seek(8 + n + lo)
        raw = np.frombuffer(f.read(hi - lo), dtype="<u2")
    return (raw.astype(np.uint32) << 16).view(np.float32).tolist()


class PlanTest(unittest.TestCase):
    def test_tiny_plan_matches_tiny_checkpoint(self) -> None:
        """The plan of the tiny config is exactly the tiny checkpoint's tensors."""
        hdr = rc.read_header(os.path.join(TINY, "model.safetensors"))
        hdr.pop("__metadata__", None)
        d = rc.describe(TINY, "tiny")
        got = {t["name"]: t["shape"] for t in d["tensors"]}
        want = {k: v["shape"] for k, v in hdr.items()}
        self.assertEqual(want, got)

    def test_real_plan(self) -> None:
        """N1.7-3B: 6,288,032,000 bytes of BF16 in 1,030 tensors, two shards."""
        d = rc.describe(TINY, "real")
        self.assertEqual(rc.REAL_TOTAL_BYTES, d["total_size"])
        self.assertEqual(1030, len(d["tensors"]))
        self.assertEqual(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"],
                         sorted(set(d["weight_map"].values())))
        self.assertIsNone(d["backbone_config"])
        shapes = {t["name"]: t["shape"] for t in d["tensors"]}
        self.assertEqual([151936, 2048], shapes["backbone.model.model.language_model.embed_tokens.weight"])
        self.assertEqual([1024, 3, 2, 16, 16], shapes["backbone.model.model.visual.patch_embed.proj.weight"])
        self.assertEqual([32, 132, 1024], shapes["action_head.state_encoder.layer1.W"])
        self.assertEqual([1536, 2048], shapes["action_head.model.transformer_blocks.0.attn1.to_k.weight"])
        self.assertEqual([1536, 1536], shapes["action_head.model.transformer_blocks.1.attn1.to_k.weight"])
        self.assertNotIn(rc.LM_HEAD, shapes)
        cfg = d["config"]
        self.assertEqual((16, 2048, 32, 4), (cfg["select_layer"], cfg["backbone_embedding_dim"],
                                             cfg["diffusion_model_cfg"]["num_layers"],
                                             cfg["vl_self_attention_cfg"]["num_layers"]))

    def test_fan_in(self) -> None:
        cases = [
            ("a.norm1.weight", (8,), 0),
            ("action_head.vlln.weight", (8,), 0),
            ("a.norm1.bias", (8,), 512),
            ("a.proj.bias", (8,), 512),
            ("a.linear.weight", (16, 8), 8),
            ("a.norm1.linear.weight", (16, 8), 8),
            ("a.layer1.W", (32, 132, 1024), 132),
            ("a.layer1.b", (32, 1024), 1024),
            ("p.patch_embed.proj.weight", (1024, 3, 2, 16, 16), 1536),
        ]
        for name, shape, want in cases:
            with self.subTest(name=name):
                self.assertEqual(want, rc.fan_in(name, shape))

    def test_fnv1a64(self) -> None:
        self.assertEqual(0xCBF29CE484222325, rc.fnv1a64(""))
        self.assertEqual(0xAF63DC4C8601EC8C, rc.fnv1a64("a"))

    def test_shard_split(self) -> None:
        specs = [rc.TensorSpec(f"t{i}", (n,)) for i, n in enumerate([10, 10, 10, 10, 100, 1])]
        got = [[s.name for s in sh] for sh in rc.shard_split(specs)]
        self.assertEqual([["t0", "t1", "t2", "t3", "t4"], ["t5"]], got)


class WriteTest(unittest.TestCase):
    def write(self, rng: str) -> str:
        d = tempfile.mkdtemp(prefix="rc-")
        self.addCleanup(lambda: __import__("shutil").rmtree(d, ignore_errors=True))
        out = os.path.join(d, "ckpt")
        rc.write_checkpoint(out, TINY, "tiny", rc.Filler(rng))
        return out

    def check(self, out: str) -> None:
        files = sorted(os.listdir(out))
        self.assertEqual(sorted(["backbone_config.json", "config.json", "embodiment_id.json", "statistics.json",
                                 "processor_config.json", "model.safetensors.index.json",
                                 "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]), files)
        for f in rc.SIDE_FILES + (rc.BACKBONE_CONFIG_FILE,):
            with open(os.path.join(out, f), "rb") as a, open(os.path.join(TINY, f), "rb") as b:
                if f == rc.BACKBONE_CONFIG_FILE:
                    self.assertEqual(json.load(b), json.load(a))
                else:
                    self.assertEqual(b.read(), a.read(), f)
        with open(os.path.join(out, rc.INDEX_FILE)) as fh:
            idx = json.load(fh)
        ref = rc.read_header(os.path.join(TINY, "model.safetensors"))
        ref.pop("__metadata__")
        self.assertEqual(set(ref), set(idx["weight_map"]))
        total = 0
        for shard in sorted(set(idx["weight_map"].values())):
            path = os.path.join(out, shard)
            hdr = rc.read_header(path)
            self.assertEqual({"format": "pt"}, hdr.pop("__metadata__"))
            with open(path, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
            self.assertEqual(0, n % 8)
            ends = sorted(v["data_offsets"] for v in hdr.values())
            self.assertEqual(0, ends[0][0])
            for (_, hi), (lo, _) in zip(ends, ends[1:]):
                self.assertEqual(hi, lo)
            self.assertEqual(os.path.getsize(path), 8 + n + ends[-1][1])
            for name, v in hdr.items():
                self.assertEqual("BF16", v["dtype"])
                self.assertEqual(ref[name]["shape"], v["shape"], name)
                self.assertEqual(shard, idx["weight_map"][name])
                total += v["data_offsets"][1] - v["data_offsets"][0]
        self.assertEqual(idx["metadata"]["total_size"], total)
        # Values: finite, norm gains around 1, matrices with variance 1/fan_in.
        s1 = os.path.join(out, idx["weight_map"]["backbone.model.model.language_model.embed_tokens.weight"])
        emb = bf16_values(s1, "backbone.model.model.language_model.embed_tokens.weight")
        self.assertTrue(all(math.isfinite(x) for x in emb))
        var = sum(x * x for x in emb) / len(emb)
        self.assertAlmostEqual(1 / 32, var, delta=0.1 / 32)
        self.assertLessEqual(max(abs(x) for x in emb), math.sqrt(3 / 32) * 1.01)
        name = "backbone.model.model.language_model.layers.0.input_layernorm.weight"
        g = bf16_values(os.path.join(out, idx["weight_map"][name]), name)
        self.assertTrue(all(0.8 < x < 1.2 for x in g), g)

    def test_write_numpy(self) -> None:
        self.check(self.write("numpy"))

    def test_write_torch(self) -> None:
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("torch not importable")
        self.check(self.write("torch"))

    def test_deterministic(self) -> None:
        a, b = self.write("numpy"), self.write("numpy")
        for f in sorted(os.listdir(a)):
            with open(os.path.join(a, f), "rb") as x, open(os.path.join(b, f), "rb") as y:
                self.assertEqual(x.read(), y.read(), f)

    def test_refuses_non_empty(self) -> None:
        out = self.write("numpy")
        with self.assertRaises(FileExistsError):
            rc.write_checkpoint(out, TINY, "tiny", rc.Filler("numpy"))


if __name__ == "__main__":
    unittest.main()
