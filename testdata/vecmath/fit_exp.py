#!/usr/bin/env python3
"""Fits P of the vector exp in core/tensor/gen_asm.go (vconsts p1..p5).

e^r = 1 + r + r^2 * P(r) on the reduced argument r = t - n*ln2, |r| <= ln2/2
(widened 2 % for the rounding of n): P, of degree 4, minimises the maximum
relative error of the whole expression, i.e. |P(r) - (e^r - 1 - r)/r^2|
weighted by r^2 / e^r, by Lawson's iteratively reweighted least squares on a
dense grid. Prints the float32 coefficients, highest degree first (p1..p5),
and the approximation error in float32 ulps (the kernels' rounding comes on
top; TestVecAccuracy measures the whole).

    /usr/bin/python3 testdata/vecmath/fit_exp.py
"""
import numpy as np

a = np.log(2) / 2 * 1.02
r = np.linspace(-a, a, 20001)
r = r[np.abs(r) > 1e-6]
target = (np.expm1(r) - r) / r**2
weight = r**2 / np.exp(r)
V = np.vander(r, 5, increasing=True)
lw = np.full_like(r, 1 / len(r))
for _ in range(200):
    sw = np.sqrt(lw) * weight
    c, *_ = np.linalg.lstsq(V * sw[:, None], target * sw, rcond=None)
    err = np.abs((V @ c - target) * weight)
    lw = lw * err
    lw /= lw.sum()
c32 = c.astype(np.float32).astype(np.float64)
err32 = np.abs((V @ c32 - target) * weight).max()
print(f"approximation error: {err.max() / 2**-24:.3f} ulp (float64 coefficients), "
      f"{err32 / 2**-24:.3f} ulp (float32)")
for i, v in enumerate(reversed(c32)):
    print(f'f32c("p{i + 1}", {v:.10e}),')
