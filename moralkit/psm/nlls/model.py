"""The model of the NLLS fit: corner coordinates and the predicted answer of eqs. (7)-(10).

:func:`predict_answers` is the public entry point; the helpers (:func:`check_form`,
:func:`corner_signs`, :func:`to_corner_linear`, :func:`check_parameters`,
:func:`check_rounds`, :func:`predict_corner`) are shared with the estimator
(:mod:`moralkit.psm.nlls.fit`). See :mod:`moralkit.psm.nlls` for the coordinates and the
two forms (``"exact"``, ``"paper"``).

References
----------
Seror (2025), Section 2.2 (corner coordinates) and Section 3.2 (eqs. (7)-(10)).
"""

from __future__ import annotations

import numpy as np

from ...errors import MoralkitError
from ..design import BUDGET

__all__ = ["FORMS", "predict_answers", "predict_corner", "check_form", "check_parameters", "check_rounds",
           "corner_signs", "to_corner_linear", "from_corner_linear"]

#: The two forms of the predicted answer.
FORMS: tuple[str, ...] = ("exact", "paper")


# --------------------------------------------------------------------------- coordinates


def check_form(form) -> str:
    """``form`` if it is one of :data:`FORMS`, else a MoralkitError naming both forms."""
    if form not in FORMS:
        raise MoralkitError(f"form must be one of {FORMS} ('exact': maximiser of eqs. (7)-(8); "
                            f"'paper': eqs. (9)-(10) as printed), got {form!r}")
    return form


def corner_signs(corners) -> np.ndarray:
    """+1 where the corner coordinate is 0, -1 where it is 5 (shape of ``corners``)."""
    c = np.asarray(corners)
    if not np.isin(c, (0, 5)).all():
        raise MoralkitError("corners must have entries 0 or 5 (vertices of {0..5}^5)")
    return np.where(c == 0, 1.0, -1.0)


def to_corner_linear(q, corners) -> np.ndarray:
    """Linear corner map: ``y = q`` where ``o = 0``, ``5 - q`` where ``o = 5`` (real-valued)."""
    c = np.asarray(corners, dtype=float)
    return c + corner_signs(corners) * np.asarray(q, dtype=float)


def from_corner_linear(y, corners) -> np.ndarray:
    """Inverse of :func:`to_corner_linear` (the map is its own inverse)."""
    return to_corner_linear(y, corners)


def check_parameters(a, b):
    """The weights ``a`` and ideal points ``b`` of eq. (7) as float arrays of 5; a's must be positive."""
    a = np.asarray(a, dtype=float).reshape(-1)
    b = np.asarray(b, dtype=float).reshape(-1)
    if a.shape != (5,) or b.shape != (5,):
        raise MoralkitError(f"a and b must have 5 entries (one per statement), got shapes {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise MoralkitError("a and b must be finite")
    if (a <= 0).any():
        raise MoralkitError(f"every weight a_s must be positive (eq. (7)), got {a}")
    return a, b


def check_rounds(corners, prices):
    """Corners and prices as (T, 5) arrays (one round broadcasts); prices must be positive and finite."""
    corners = np.asarray(corners)
    prices = np.asarray(prices, dtype=float)
    if corners.ndim == 1:
        corners = corners[None]
    if prices.ndim == 1:
        prices = np.broadcast_to(prices, corners.shape)
    if corners.ndim != 2 or corners.shape[1] != 5 or prices.shape != corners.shape:
        raise MoralkitError(f"corners and prices must have shape (T, 5), got {corners.shape} and {prices.shape}")
    if not (np.isfinite(prices).all() and (prices > 0).all()):
        raise MoralkitError("prices must be positive and finite")
    return corners, prices


# --------------------------------------------------------------------------- predictions


def predict_corner(a, b, sign, corners, prices, form, budget=BUDGET, jac=False):
    """Predicted answers in corner coordinates (T, 5) and, optionally, d yhat / d(a, b) (T, 5, 10).

    ``sign`` and ``corners`` are float arrays (T, 5); ``b_o = corners + sign * b``. Computed by the
    compiled kernels of :mod:`moralkit.psm._nlls_kernels` (the same operations, bit for bit, as
    :func:`_predict_corner_numpy`, the reference the tests compare them with).
    """
    from .._nlls_kernels import exact_corner, paper_corner

    c64 = np.ascontiguousarray
    p = c64(prices, dtype=np.float64)
    y = np.empty(p.shape)
    J = np.empty((len(p), 5, 10)) if jac else np.empty((0, 5, 10))
    kernel = exact_corner if form == "exact" else paper_corner
    kernel(c64(a, dtype=np.float64), c64(b, dtype=np.float64), c64(sign, dtype=np.float64),
           c64(corners, dtype=np.float64), p, float(budget), y, J, bool(jac))
    return (y, J) if jac else y


def _predict_corner_numpy(a, b, sign, corners, prices, form, budget=BUDGET, jac=False):
    """:func:`predict_corner` in NumPy expressions: the reference of the compiled kernels."""
    p = prices
    bo = corners + sign * b  # (T, 5): b in corner coordinates
    c = budget - (p * bo).sum(1)  # (T,): 12 - p . b_o
    if form == "exact":
        w = 1.0 / a  # (5,)
        S = (p * p * w).sum(1)  # (T,)
        k = p * w / S[:, None]  # (T, 5): p_z w_z / S
        y = bo + c[:, None] * k
        if not jac:
            return y
        T = len(p)
        J = np.empty((T, 5, 10))
        # d y_z / d a_k = -w_k^2 [c p_z delta_zk / S - c p_z w_z p_k^2 / S^2]
        dyw = c[:, None, None] * (np.eye(5)[None] * (p / S[:, None])[:, :, None]
                                  - k[:, :, None] * (p * p / S[:, None])[:, None, :])
        J[:, :, :5] = dyw * (-(w * w))[None, None, :]
        # d y_z / d b_k = sign_k delta_zk - k_z p_k sign_k
        J[:, :, 5:] = np.eye(5)[None] * sign[:, None, :] - k[:, :, None] * (p * sign)[:, None, :]
        return y, J
    # form == "paper": eqs. (9)-(10) as printed
    g = a / (p * p)  # (T, 5): a_z / p_z^2
    G = g.sum(1)
    beta = g / G[:, None]  # 1 - alpha_z
    target = c[:, None] / p  # (12 - p . b_o) / p_z
    y = (1.0 - beta) * bo + beta * target
    if not jac:
        return y
    T = len(p)
    J = np.empty((T, 5, 10))
    # d beta_z / d a_k = delta_zk / (p_z^2 G) - g_z / (p_k^2 G^2)
    dbeta = (np.eye(5)[None] / (p * p * G[:, None])[:, :, None]
             - g[:, :, None] / ((p * p)[:, None, :] * (G * G)[:, None, None]))
    J[:, :, :5] = dbeta * (target - bo)[:, :, None]
    # d y_z / d b_k = (1 - beta_z) sign_z delta_zk - beta_z p_k sign_k / p_z
    J[:, :, 5:] = (np.eye(5)[None] * ((1.0 - beta) * sign)[:, :, None]
                   - (beta / p)[:, :, None] * (p * sign)[:, None, :])
    return y, J


def predict_answers(a, b, corners, prices, form: str = "exact", coords: str = "raw",
                    budget: float = BUDGET) -> np.ndarray:
    """Predicted answer of the quadratic utility in each round (eqs. (8)-(10)).

    Parameters
    ----------
    a : array_like (5,)
        Positive weights (only their ratios matter; need not sum to 1).
    b : array_like (5,)
        Ideal answers in raw (0..5 scale) coordinates.
    corners : array_like (T, 5) or (5,)
        Effective corner of each round (entries 0 or 5).
    prices : array_like (T, 5) or (5,)
        Price vector of each round.
    form : {"exact", "paper"}
        ``"exact"``: the maximiser of (7) under (8);
        ``"paper"``: eqs. (9)-(10) as printed (see the module docstring).
    coords : {"raw", "corner"}
        Return raw answers (mapped back from the corner coordinates, the
        default) or corner coordinates ``q_{o^r}``.
    budget : float, default 12

    Returns
    -------
    ndarray (T, 5)
        Real-valued predictions (not rounded; the bounds 0..5 are not imposed,
        as in eq. (8)).

    References
    ----------
    Seror (2025), Section 3.2, eqs. (7)-(10); Section 2.2 (corner coordinates).
    """
    form = check_form(form)
    if coords not in ("raw", "corner"):
        raise MoralkitError(f"coords must be 'raw' or 'corner', got {coords!r}")
    a, b = check_parameters(a, b)
    corners, prices = check_rounds(corners, prices)
    sign = corner_signs(corners)
    y = predict_corner(a, b, sign, corners.astype(float), prices, form, budget)
    return y if coords == "corner" else from_corner_linear(y, corners)
