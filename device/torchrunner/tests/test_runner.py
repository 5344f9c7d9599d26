"""The runner process end to end over its socket (protocol v1), on the tiny checkpoint, CPU.

    cd device/torchrunner && /usr/bin/python3 -m unittest discover -s tests -v
"""
from __future__ import annotations

import time
import unittest

import numpy as np

from helpers import TINY, Client, case_a, pcc

HELLO, ATTACH, ATTACHED, PREDICT, RESULT, ERROR, CANCEL, PING, PONG, CLOSE, CLOSED = range(1, 12)


class RunnerFP32(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.c = Client("--weights-dir", TINY, "--dtype", "fp32", "--threads", "2", "--index", "0", "--unknown-flag", "x")
        typ, mid, cls.hello = cls.c.recv()
        assert typ == HELLO and mid == 0, (typ, mid)
        cls.case = case_a()
        typ, _, body = cls.c.attach(Client.segment_size(cls.case))
        assert typ == ATTACHED, body

    @classmethod
    def tearDownClass(cls) -> None:
        cls.c.send(CLOSE)
        typ, _, _ = cls.c.recv()
        assert typ == CLOSED, typ
        with cls.assertRaises(cls, EOFError):
            cls.c.recv()
        cls.c.close()
        assert cls.c.proc.returncode == 0, cls.c.proc.returncode

    def predict(self, body):
        mid = self.c.send(PREDICT, body)
        typ, rid, res = self.c.recv()
        self.assertEqual(rid, mid)
        return typ, res

    def test_hello(self) -> None:
        h = self.hello
        self.assertEqual(h["protocol"], 1)
        self.assertIn("gr00t_torchrunner", h["runner"])
        self.assertEqual(h["layout"], {"max_patches": 1792, "max_images": 4, "max_seq": 512, "pixel_cols": 1536,
                                       "state_dim": 132, "action_horizon": 40, "action_dim": 132})
        f = h["facts"]
        self.assertEqual((f["backend"], f["policy"]), ("torch", "fp32"))
        self.assertEqual(f["stages"], ["vision", "llm", "adapter", "denoise"])
        self.assertEqual(f["extra"]["device"], "cpu")
        self.assertEqual(len(f["extra"]["checkpoint_sha256"]), 64)

    def test_predict_matches_golden_and_repeats(self) -> None:
        body = self.c.predict_body(self.case)
        outs = []
        for _ in range(2):
            typ, res = self.predict(body)
            self.assertEqual(typ, RESULT, res)
            self.assertEqual((res["horizon"], res["action_dim"]), (40, 132))
            self.assertEqual([s["name"] for s in res["stages"]], ["vision", "llm", "adapter", "denoise"])
            outs.append(self.c.output(body))
        want = self.case["action_pred"].ravel()
        self.assertLessEqual(float(np.abs(outs[0] - want).max()), 1e-4)
        self.assertTrue(np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32)), "two runs differ")

    def test_seed_noise_is_torch_randn(self) -> None:
        import torch
        from gr00t_torchrunner.model import randn
        body = self.c.predict_body(self.case, noise=False)
        body["seed"] = 7
        typ, res = self.predict(body)
        self.assertEqual(typ, RESULT, res)
        by_seed = self.c.output(body)
        explicit = dict(self.c.predict_body(self.case))
        self.c.put(explicit["noise"]["offset"], randn(40 * 132, 7).numpy())
        typ, res = self.predict(explicit)
        self.assertEqual(typ, RESULT, res)
        self.assertTrue(np.array_equal(by_seed, self.c.output(explicit)))
        g = torch.Generator().manual_seed(7)
        self.assertTrue(torch.equal(randn(5280, 7), torch.randn(5280, generator=g)))

    def test_errors(self) -> None:
        good = self.c.predict_body(self.case)
        cases = {
            "unattached segment": (dict(good, segment=9), "input", "segment[9] is not attached"),
            "span outside": (dict(good, state={"offset": 1 << 30, "count": 132}), "input", "state"),
            "misaligned": (dict(good, state={"offset": 2, "count": 132}), "input", "aligned"),
            "pixel count": (dict(good, pixel_rows=3), "input", "pixel_values"),
            "bad slot": (dict(good, embodiment_id=99), "input", "embodiment_id 99"),
            "grids": (dict(good, image_grid_thw=[[1, 16, 28]]), "input", "patches"),
            "output span": (dict(good, output={"offset": 0, "count": 3}), "input", "output"),
        }
        for name, (body, kind, text) in cases.items():
            with self.subTest(name):
                typ, res = self.predict(body)
                self.assertEqual(typ, ERROR, res)
                self.assertEqual(res["kind"], kind, res)
                self.assertIn(text, res["message"])
        mid = self.c.send(42)
        typ, rid, res = self.c.recv()
        self.assertEqual((typ, rid, res["kind"]), (ERROR, mid, "protocol"))
        mid = self.c.send(PREDICT, None)  # no body
        typ, rid, res = self.c.recv()
        self.assertEqual((typ, res["kind"]), (ERROR, "protocol"))
        mid = self.c.send(PING)  # still serving
        self.assertEqual(self.c.recv()[:2], (PONG, mid))

    def test_in_flight(self) -> None:
        body = self.c.predict_body(self.case)
        first = self.c.send(PREDICT, body)
        ping = self.c.send(PING)
        second = self.c.send(PREDICT, body)
        got = {}
        for _ in range(3):
            typ, rid, res = self.c.recv()
            got[rid] = (typ, res)
        self.assertEqual(got[ping][0], PONG)
        self.assertEqual(got[second][0], ERROR)
        self.assertEqual(got[second][1]["kind"], "protocol")
        self.assertEqual(got[first][0], RESULT)
        # CANCEL right after PREDICT stops it between blocks.
        mid = self.c.send(PREDICT, body)
        self.c.send(CANCEL, mid=mid)
        typ, rid, res = self.c.recv()
        self.assertEqual((typ, rid, res["kind"]), (ERROR, mid, "cancelled"))
        # A deadline of 1 ms stops it too.
        typ, res = self.predict(dict(body, timeout_ms=1))
        self.assertEqual((typ, res["kind"]), (ERROR, "cancelled"))


class RunnerBF16(unittest.TestCase):
    def test_bf16_pcc_vs_fp32_golden(self) -> None:
        c = Client("--weights-dir", TINY, "--dtype", "bf16", "--threads", "2")
        try:
            typ, _, hello = c.recv()
            self.assertEqual(typ, HELLO)
            self.assertEqual(hello["facts"]["policy"], "bf16")
            case = case_a()
            self.assertEqual(c.attach(Client.segment_size(case))[0], ATTACHED)
            body = c.predict_body(case)
            c.send(PREDICT, body)
            typ, _, res = c.recv()
            self.assertEqual(typ, RESULT, res)
            got = c.output(body)
            self.assertGreaterEqual(pcc(got, case["action_pred"]), 0.999)
        finally:
            c.close()


class RunnerStart(unittest.TestCase):
    def test_bad_device_and_weights(self) -> None:
        for flags, code, text in ((["--weights-dir", TINY, "--device", "cuda"], 2, "--device cuda"),
                                  (["--weights-dir", "/nonexistent"], 3, "/nonexistent")):
            with self.subTest(flags=flags):
                c = Client(*flags)
                t0 = time.time()
                with self.assertRaises(EOFError):
                    c.recv()
                err = "\n".join(c.close())
                self.assertEqual(c.proc.returncode, code, err)
                self.assertIn(text, err)
                self.assertLess(time.time() - t0, 60)


if __name__ == "__main__":
    unittest.main()
