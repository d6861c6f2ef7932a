"""Exact arithmetic behind :mod:`moralkit.psm.rp` (validated input assumed): levels and the exact CCEI.

* :func:`level_arrays` -- a rationality level ``e`` (scalar, per observation, a Fraction or a
  :class:`~moralkit.psm.level.RationalityLevel`) as exact ``(num, den)`` float arrays;
* :func:`ccei_level` -- the CCEI's level of a validated matrix: the PSM level path (integer ``E``
  with a constant diagonal ``B <= 64``) or the smallest float ratio with a cycle;
* :func:`ccei_float` / :func:`ccei_fraction` -- the CCEI as the nearest float, or exactly (float
  ratios sharing the threshold are separated with Fractions).

The module docstring of :mod:`moralkit.psm.rp` explains why each step is exact.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2, Definitions 1-3.
Afriat, S. N. (1972), Efficiency estimation of production functions.
"""

from __future__ import annotations

from fractions import Fraction
from numbers import Rational

import numpy as np

from ..errors import MoralkitError
from ._rp_kernels import has_cycle_dense, min_cycle_ratio, psm_levels_batch
from .level import RationalityLevel

__all__ = ["MAX_LEVELS", "level_arrays", "psm_budget", "ratio_matrix", "ccei_level", "ccei_float", "ccei_fraction",
           "as_fraction"]

#: Integer matrices whose diagonal is one constant B <= this use the level path.
MAX_LEVELS = 64


def level_arrays(e, T):
    """Rationality level(s) as (num, den) float arrays of length T with e = num / den exactly.

    A :class:`~moralkit.psm.level.RationalityLevel` was checked at a public boundary and is not
    checked again; its exact Fraction decides (its float when that holds it exactly)."""
    if isinstance(e, RationalityLevel):
        if e.float_is_exact:
            return np.full(T, e.value), np.ones(T)
        e = e.exact
    if isinstance(e, Rational) and not isinstance(e, (bool, np.bool_)):
        if not 0 <= e <= 1:
            raise MoralkitError("e must lie in [0, 1] (Definition 1)")
        if abs(e.numerator) > 2**53 or e.denominator > 2**53:
            return None  # not exactly representable as a ratio of floats: Fraction arithmetic
        num_a, den_a = np.full(T, float(e.numerator)), np.full(T, float(e.denominator))
    else:
        arr = np.asarray(e, dtype=float)
        if arr.ndim == 0:
            arr = np.full(T, float(arr))
        if arr.shape != (T,):
            raise MoralkitError(f"e must be a scalar or one value per observation (length {T}), got shape {arr.shape}")
        num_a, den_a = arr.copy(), np.ones(T)
    val = num_a / den_a
    if not np.isfinite(val).all() or (val < 0).any() or (val > 1).any():
        raise MoralkitError("e must lie in [0, 1] (Definition 1)")
    return num_a, den_a


def psm_budget(E):
    """The common own expenditure B if E is an integer matrix with constant diagonal B <= 64, else None."""
    if not np.issubdtype(E.dtype, np.integer) or not len(E):
        return None
    d = np.diag(E)
    B = int(d[0])
    if (d == B).all() and 0 < B <= MAX_LEVELS:
        return B
    return None


def ratio_matrix(E) -> np.ndarray:
    """R[r, k] = E[r, k] / E[r, r] in floats (correctly rounded, hence monotone in the exact ratio)."""
    if np.issubdtype(E.dtype, np.integer) and len(E) and np.abs(E).max() >= 2**53:
        raise MoralkitError("integer expenditures must be below 2**53 in absolute value")
    Ef = E.astype(np.float64, order="C")  # one specialisation of the kernels below, not a C and an F one
    return Ef / np.diag(Ef)[:, None]


def ccei_level(E):
    """(kind, value) for a validated matrix: ("one", None), ("psm", (m, B)) or ("float", (R, t))."""
    T = len(E)
    if T < 2:
        return "one", None
    B = psm_budget(E)
    if B is not None:
        L = int(psm_levels_batch(E[None], B)[0])
        return ("one", None) if L >= B else ("psm", (L, B))
    R = ratio_matrix(E)
    t = float(min_cycle_ratio(R))  # the smallest cyclic threshold among the ratios <= 1; 2.0: none
    if t > 1.0:
        return "one", None
    return "float", (R, t)


def ccei_float(E) -> float:
    kind, v = ccei_level(E)
    if kind == "one":
        return 1.0
    if kind == "psm":
        return v[0] / v[1]
    # The smallest float threshold t with a cycle among {fl(ratio) <= t} is the float
    # nearest to the exact CCEI: rounding is monotone, so {ratio <= x} is contained in
    # {fl(ratio) <= fl(x)}, which is contained in {ratio <= y} for the largest exact
    # ratio y with fl(y) <= fl(x).
    return min(1.0, max(0.0, v[1]))


def ccei_fraction(E) -> Fraction:
    kind, v = ccei_level(E)
    if kind == "one":
        return Fraction(1)
    if kind == "psm":
        return Fraction(v[0], v[1])
    R, t = v
    # exact refinement among the edges whose float ratio equals t
    rs, ks = np.nonzero(R == t)
    keep = rs != ks
    rs, ks = rs[keep], ks[keep]
    vals = [as_fraction(E[r, k]) / as_fraction(E[r, r]) for r, k in zip(rs, ks)]
    distinct = sorted(set(vals))
    if len(distinct) > 1:
        base = R < t
        lo, hi = 0, len(distinct) - 1  # a cycle exists at distinct[-1]
        while lo < hi:
            mid = (lo + hi) // 2
            A = base.copy()
            for (r, k), x in zip(zip(rs, ks), vals):
                if x <= distinct[mid]:
                    A[r, k] = True
            if has_cycle_dense(A):
                hi = mid
            else:
                lo = mid + 1
        val = distinct[lo]
    else:
        val = distinct[0]
    return min(Fraction(1), max(Fraction(0), val))


def as_fraction(x) -> Fraction:
    return Fraction(int(x)) if isinstance(x, (int, np.integer)) else Fraction(float(x))
