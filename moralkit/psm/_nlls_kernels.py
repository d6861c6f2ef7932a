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

import llvmlite.ir as _ir
import numpy as np
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def _fma(typingctx, x, y, z):
    """``x * y + z`` rounded once (LLVM's ``llvm.fma.f64``; the hardware instruction where there is one,
    a correctly rounded software fallback elsewhere)."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        d = _ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [d], _ir.FunctionType(d, [d, d, d]))
        return builder.call(fn, args)

    return sig, codegen


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


@njit(cache=True)
def theta_jacobian(a, J, out):
    """The residuals' Jacobian in ``theta = (eta, b)`` from ``J = d yhat / d(a, b)`` (T, 5, 10), written into
    ``out`` (5 T, 9): ``-(J[:, :, :5] @ d a / d eta)`` in columns 0-3, ``-J[:, :, 5:]`` in columns 4-8.

    ``d a / d eta`` is ``(diag(a) - outer(a, a))[:, 1:]`` (the softmax with ``a_1``'s logit fixed at 0),
    each entry computed as NumPy computes it (``a_i - a_i a_j`` on the diagonal, ``0 - a_i a_j`` off it).
    The product over the five weights is accumulated as OpenBLAS's double-precision kernels accumulate
    NumPy's ``matmul`` on x86-64 (the first product, then one fused multiply-add per further term, in
    order), so the result equals the NumPy expression it replaces bit for bit there
    (``tests/psm/test_nlls_fast.py`` compares them).
    """
    D = np.empty((5, 4))
    for i in range(5):
        for j in range(4):
            d = a[i] if i == j + 1 else 0.0
            D[i, j] = d - a[i] * a[j + 1]
    T = J.shape[0]
    for t in range(T):
        for z in range(5):
            r = 5 * t + z
            for j in range(4):
                acc = J[t, z, 0] * D[0, j]
                for k in range(1, 5):
                    acc = _fma(J[t, z, k], D[k, j], acc)
                out[r, j] = -acc
            for j in range(5):
                out[r, 4 + j] = -J[t, z, 5 + j]


# the shipped compiled cache of these kernels (moralkit.psm.kernel_cache): installed into numba's cache if absent
from .kernel_cache import install as _install_compiled  # noqa: E402

_install_compiled(globals())
