"""Compiled predicted answers of the NLLS fit (eqs. (7)-(10)) and their Jacobian in (a, b).

:func:`moralkit.psm.nlls.model.predict_corner` is called tens of thousands of times per notebook (every
residual and Jacobian evaluation of every bootstrap refit) on arrays of at most 160 x 5 entries, where
NumPy's per-call overhead of some thirty temporary arrays is most of the cost. These kernels do the same
floating-point operations in the same order as the NumPy expressions they replace (products and
quotients elementwise, every sum over the five statements accumulated left to right, as NumPy's reduction
over a length-5 axis does), so the results are bit-identical; ``tests/psm/test_nlls.py`` compares them with
the NumPy expressions. No transcendental function is computed here (NumPy's ``exp`` stays in the
softmax of :mod:`moralkit.psm.nlls.fit`).

References
----------
Seror (2025), Section 3.2, eqs. (7)-(10).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _bliss_slack(b, sign, corners, p, budget, t, bo):
    """Round ``t``'s ideal point in its corner coordinates, written into ``bo`` (5,) (``b_{z,o}`` of
    Section 2.2: ``b_z`` where the corner is 0, ``5 - b_z`` where it is 5), and the budget's slack at
    it, ``budget - p . b_o`` (the sum accumulated left to right), which is returned."""
    for z in range(5):
        bo[z] = corners[t, z] + sign[t, z] * b[z]
    s = p[t, 0] * bo[0]
    for z in range(1, 5):
        s = s + p[t, z] * bo[z]
    return budget - s


@njit(cache=True)
def exact_corner(a, b, sign, corners, p, budget, y, J, want_jac):
    """Form "exact" (the maximiser of (7) under (8)): ``y`` (T, 5) and, if ``want_jac``, ``J`` (T, 5, 10)."""
    T = p.shape[0]
    w = np.empty(5)
    for z in range(5):
        w[z] = 1.0 / a[z]
    bo = np.empty(5)
    k = np.empty(5)
    for t in range(T):
        c = _bliss_slack(b, sign, corners, p, budget, t, bo)
        S = p[t, 0] * p[t, 0] * w[0]
        for z in range(1, 5):
            S = S + p[t, z] * p[t, z] * w[z]
        for z in range(5):
            k[z] = p[t, z] * w[z] / S
            y[t, z] = bo[z] + c * k[z]
        if want_jac:
            for z in range(5):
                pz_S = p[t, z] / S
                for j in range(5):
                    e = 1.0 if z == j else 0.0
                    J[t, z, j] = (c * (e * pz_S - k[z] * (p[t, j] * p[t, j] / S))) * (-(w[j] * w[j]))
                    J[t, z, 5 + j] = e * sign[t, j] - k[z] * (p[t, j] * sign[t, j])


@njit(cache=True)
def paper_corner(a, b, sign, corners, p, budget, y, J, want_jac):
    """Form "paper" (eqs. (9)-(10) as printed): ``y`` (T, 5) and, if ``want_jac``, ``J`` (T, 5, 10)."""
    T = p.shape[0]
    bo = np.empty(5)
    g = np.empty(5)
    beta = np.empty(5)
    target = np.empty(5)
    for t in range(T):
        c = _bliss_slack(b, sign, corners, p, budget, t, bo)
        for z in range(5):
            g[z] = a[z] / (p[t, z] * p[t, z])
        G = g[0]
        for z in range(1, 5):
            G = G + g[z]
        for z in range(5):
            beta[z] = g[z] / G
            target[z] = c / p[t, z]
            y[t, z] = (1.0 - beta[z]) * bo[z] + beta[z] * target[z]
        if want_jac:
            for z in range(5):
                d = p[t, z] * p[t, z] * G
                tb = target[z] - bo[z]
                ob = (1.0 - beta[z]) * sign[t, z]
                bp = beta[z] / p[t, z]
                for j in range(5):
                    e = 1.0 if z == j else 0.0
                    J[t, z, j] = (e / d - g[z] / ((p[t, j] * p[t, j]) * (G * G))) * tb
                    J[t, z, 5 + j] = e * ob - bp * (p[t, j] * sign[t, j])
