"""The model in process on the tiny checkpoint: padding, empty key sets, RTC's semantics.

    cd device/torchrunner && /usr/bin/python3 -m unittest discover -s tests -v
"""
from __future__ import annotations

import struct
import unittest

import torch

from helpers import CASE_A, TINY
from gr00t_torchrunner.model import RTC, InputError, Model
from gr00t_torchrunner.selfcheck import load_inputs


class ModelCases(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.m = Model.load(TINY, "cpu", torch.float32)

    def test_left_padding_is_finite(self) -> None:
        inp = load_inputs(CASE_A)
        inp.attention_mask = inp.attention_mask.clone()
        inp.attention_mask[0] = 0  # row 0 has no key it may attend to
        out, _ = self.m.predict(inp)
        self.assertTrue(bool(torch.isfinite(out).all()))

    def test_no_text_key_is_an_input_error(self) -> None:
        inp = load_inputs(CASE_A)
        img = inp.input_ids == self.m.cfg.image_token
        inp.attention_mask = img.long()  # only image tokens valid
        with self.assertRaisesRegex(InputError, "no valid text token"):
            self.m.predict(inp)

    def test_rtc(self) -> None:
        inp = load_inputs(CASE_A)
        plain, _ = self.m.predict(inp)
        prev = (torch.arange(40 * 132, dtype=torch.float32) % 89 / 89 - 0.5).reshape(40, 132)
        inp.rtc = RTC(prev=prev, horizon=40, overlap=0, frozen=0, ramp_rate=6.0)
        off, _ = self.m.predict(inp)
        self.assertTrue(torch.equal(plain, off), "O = F = 0 is the plain sampler, bit for bit")
        inp.rtc = RTC(prev=prev, horizon=16, overlap=10, frozen=3, ramp_rate=6.0)
        out, _ = self.m.predict(inp)
        self.assertTrue(torch.equal(out[:3], prev[6:9]), "frozen rows are the previous chunk's H-O..H-O+F-1")
        self.assertFalse(torch.equal(out[3:10], prev[9:16]), "ramp rows move")
        for bad, msg in (((16, 17, 3), "rtc_overlap_steps 17"), ((16, 10, 11), "rtc_frozen_steps 11"),
                         ((41, 10, 3), "action_horizon 41")):
            inp.rtc = RTC(prev=prev, horizon=bad[0], overlap=bad[1], frozen=bad[2], ramp_rate=6.0)
            with self.assertRaisesRegex(InputError, msg):
                self.m.predict(inp)

    def test_rtc_strengths_spec_example(self) -> None:
        s = RTC(prev=torch.zeros(40, 132), horizon=40, overlap=6, frozen=2, ramp_rate=6.0).strengths(40)
        bits = [struct.unpack("<I", struct.pack("<f", float(v)))[0] for v in s[2:6]]
        self.assertEqual(bits, [0x3F3356BD, 0x3F695ACA, 0x3F799FB7, 0x3F7E862B])
        self.assertEqual(s[:2].tolist(), [0.0, 0.0])
        self.assertTrue(bool((s[6:] == 1).all()))


if __name__ == "__main__":
    unittest.main()
