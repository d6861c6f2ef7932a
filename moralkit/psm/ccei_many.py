"""The CCEI of many datasets at once, in compiled loops (Definition 3).

* :func:`ccei_batch` -- a stack of expenditure matrices;
* :func:`ccei_subsets` -- one expenditure matrix restricted to many subsets of its observations
  (datasets with missing rounds, the convention audit's null);
* :func:`ccei_choices` -- many answer vectors over the same PSM rounds (the random-choice test):
  level-sorted sparse lists of every alternative's costs (:func:`moralkit.psm.rp.choice_level_lists`)
  and levels 0, 1, 2, ... added until a cycle appears.

Each returns the same floats as :func:`moralkit.psm.rp.ccei` on each dataset.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2 (Definition 3) and
Section 2.3 (the random datasets D^m_n).
"""

from __future__ import annotations

import numpy as np

from ..errors import MoralkitError
from ._rp_exact import MAX_LEVELS, ratio_matrix
from ._rp_kernels import psm_levels_batch, psm_levels_choices
from ._subset_kernels import int_ratio_levels, ratio_levels, subset_levels
from .design import BUDGET
from .rp import ccei, choice_level_lists, validate_expenditure_matrix

__all__ = ["ccei_batch", "ccei_subsets", "ccei_choices"]


def ccei_batch(Es) -> np.ndarray:
    """CCEI of a stack of expenditure matrices ``Es`` (N, T, T); returns floats (N,).

    Stacks of integer matrices sharing the constant diagonal ``B <= 64`` (PSM)
    run in one compiled loop.

    References
    ----------
    Seror (2025), Definition 3.
    """
    Es = np.asarray(Es)
    if Es.ndim != 3 or Es.shape[1] != Es.shape[2]:
        raise MoralkitError(f"Es must be a stack of square matrices (N, T, T), got shape {Es.shape}")
    if len(Es) and np.issubdtype(Es.dtype, np.integer) and Es.shape[1] >= 2:
        d = np.diagonal(Es, axis1=1, axis2=2)
        B = int(d.flat[0])
        if (d == B).all() and 0 < B <= MAX_LEVELS:
            L = psm_levels_batch(np.ascontiguousarray(Es, dtype=np.int64), B)
            return np.minimum(L, B) / B
    return np.array([ccei(E) for E in Es], dtype=float)


#: Largest integer expenditure for which :func:`ccei_subsets` ranks the ratios through a table of pairs.
_MAX_TABLE = 1024


def ccei_subsets(E, subsets) -> np.ndarray:
    """CCEI of an expenditure matrix restricted to each of several subsets of its observations.

    ``ccei_subsets(E, subsets)[i] == ccei(E[np.ix_(s, s)])`` for the ``i``-th subset ``s``, computed
    in one compiled pass: the ratios ``E[r, k] / E[r, r]`` and their ranks are shared by every
    subset (a subset's ratios are entries of the full matrix), and each subset's CCEI is the
    smallest ratio level whose graph on the subset has a cycle (the same supremum as :func:`ccei`).
    The random-choice null of the convention audit takes nested subsets of every simulated
    respondent (:func:`moralkit.studies.conventions.null_distribution`).

    Parameters
    ----------
    E : array_like (T, T)
        Expenditure matrix, as for :func:`ccei`.
    subsets : sequence of array_like of int
        Observation indices (0-based, distinct within a subset) of each subset.

    Returns
    -------
    ndarray (len(subsets),) of float
        The same floats as :func:`ccei` on each restricted matrix.

    References
    ----------
    Seror (2025), Section 2.2, Definition 3; Section 2.3 (datasets with missing rounds).

    Examples
    --------
    >>> from moralkit.psm.rp import psm_expenditure_matrix
    >>> from moralkit.psm.simulate import simulate_random
    >>> E = psm_expenditure_matrix(simulate_random(0, seed=1))
    >>> keep = np.arange(0, 160, 2)
    >>> ccei_subsets(E, [np.arange(160), keep]).tolist() == [ccei(E), ccei(E[np.ix_(keep, keep)])]
    True
    """
    E = validate_expenditure_matrix(E)
    S, sizes = subset_table(subsets, len(E))
    return ccei_subset_table(E, S, sizes)


def subset_table(subsets, T: int) -> tuple[np.ndarray, np.ndarray]:
    """``(S, sizes)``: the subsets of :func:`ccei_subsets`, checked, as rows of a padded index table.

    Checked once, the table serves every expenditure matrix of the same ``T`` observations
    (:func:`ccei_subset_table`); the convention audit takes the same nested subsets of one simulated
    respondent under four coordinate systems.
    """
    subs = [np.asarray(s) for s in subsets]
    for i, s in enumerate(subs):
        if s.ndim != 1 or (s.size and s.dtype.kind not in "iu"):
            raise MoralkitError(f"subset {i} must be a 1-d array of integer observation indices")
    if not subs:
        return np.zeros((0, 0), dtype=np.int64), np.zeros(0, dtype=np.int64)
    sizes = np.array([len(s) for s in subs], dtype=np.int64)
    flat = np.concatenate(subs).astype(np.int64)
    owner = np.repeat(np.arange(len(subs)), sizes)
    if flat.size:  # all subsets checked at once
        out_of_range = (flat < 0) | (flat >= T)
        if out_of_range.any():
            raise MoralkitError(f"subset {owner[np.argmax(out_of_range)]} has indices outside 0..{T - 1}")
        counts = np.bincount(owner * T + flat)
        if counts.max() > 1:
            raise MoralkitError(f"subset {np.argmax(counts) // T} repeats an observation; give each observation once")
    S = np.zeros((len(subs), int(sizes.max())), dtype=np.int64)
    S[owner, np.arange(len(flat)) - np.repeat(np.cumsum(sizes) - sizes, sizes)] = flat
    return S, sizes


def ccei_subset_table(E: np.ndarray, S: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """:func:`ccei_subsets` of a checked matrix ``E`` (:func:`validate_expenditure_matrix`) and a table
    ``(S, sizes)`` of :func:`subset_table` built for ``len(E)`` observations."""
    if not len(sizes):
        return np.empty(0)
    if E.size and np.issubdtype(E.dtype, np.integer) and E.min() >= 0 and E.max() <= _MAX_TABLE:
        vals, levels = int_ratio_levels(E, int(E.max()))  # small integer expenditures (PSM data)
    else:
        vals, levels = ratio_levels(ratio_matrix(E))
    n_levels = len(vals)
    L = subset_levels(levels, n_levels, S, sizes)
    found = L < n_levels
    out = np.ones(len(sizes))
    out[found] = np.maximum(0.0, vals[L[found]])
    return out


def ccei_choices(corners, prices, options, choices, *, budget: int = BUDGET,
                 numerators: bool = False) -> np.ndarray:
    """CCEI of many choice vectors over the same PSM rounds (the random-choice test's workhorse).

    Parameters
    ----------
    corners, prices : array (T, 5) of int
        Effective corner and prices of each round.
    options : array (T, n, 5) of int
        The alternatives shown (raw answers 0..5), each on its round's budget.
    choices : array_like (N, T) or (T,) of int
        0-based option index chosen in each round, one row per dataset.
    budget : int, default 12
        The common own expenditure.
    numerators : bool, default False
        Return the exact integer numerators ``m`` (CCEI = ``m / budget``)
        instead of floats.

    Returns
    -------
    ndarray (N,) of float (or int64 numerators)

    References
    ----------
    Seror (2025), Section 2.3 (random datasets D^m_n) and Definition 3.
    """
    if not 0 < int(budget) <= 10_000:
        raise MoralkitError("budget must be a positive integer")
    start, rows = choice_level_lists(corners, prices, options, int(budget))
    T, n = np.shape(options)[:2]
    C = np.asarray(choices)
    squeeze = C.ndim == 1
    C = np.atleast_2d(C)
    if C.ndim != 2 or C.shape[1] != T:
        raise MoralkitError(f"choices must have shape (N, {T}), got {np.shape(choices)}")
    if not np.issubdtype(C.dtype, np.integer):
        raise MoralkitError("choices must be 0-based integer option indices")
    if C.size and (C.min() < 0 or C.max() >= n):
        raise MoralkitError(f"choices must be 0-based option indices in 0..{n - 1}")
    if T < 2:
        L = np.full(len(C), int(budget), dtype=np.int64)
    else:
        L = psm_levels_choices(start, rows, np.ascontiguousarray(C, dtype=np.int64), int(budget))
    L = np.minimum(L, int(budget))
    out = L if numerators else L / int(budget)
    return out[0] if squeeze else out
