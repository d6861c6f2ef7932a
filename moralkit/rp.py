"""Revealed preference in corner coordinates: expenditure matrix, GARP_e and the CCEI.

(Interface placeholder written at project start; the issue-2 implementation
replaces the internals and keeps these signatures.)
"""

from __future__ import annotations

import numpy as np

from .design import to_corner

__all__ = ["expenditure_matrix", "garp"]


def expenditure_matrix(corners, prices, choices) -> np.ndarray:
    """E[r, k] = p^r . q^k_{o^r}: round k's answer priced in round r's corner coordinates."""
    corners = np.asarray(corners, dtype=np.int64)
    prices = np.asarray(prices, dtype=np.int64)
    choices = np.asarray(choices, dtype=np.int64)
    y = to_corner(choices[None, :, :], corners[:, None, :])  # (r, k, s)
    return np.einsum("rs,rks->rk", prices, y)


def garp(E, e: float = 1.0) -> bool:
    """Reference GARP_e check (Warshall closure); True when the data satisfy GARP_e."""
    E = np.asarray(E, dtype=float)
    own = np.diag(E)[:, None]
    R = e * own >= E
    P = e * own > E
    np.fill_diagonal(R, True)
    n = len(E)
    C = R.copy()
    for k in range(n):
        C |= C[:, k:k + 1] & C[k:k + 1, :]
    return not (C & P.T).any()
