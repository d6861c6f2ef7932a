"""Alternative CCEI conventions a reader of the paper might suspect (for the convention audit).

The package's CCEI is the standard one (:func:`moralkit.psm.rp.ccei`): the
supremum of ``e`` for which GARP_e holds, with the relations of Definition 1
in each round's (effective) corner coordinates. There every chosen answer
costs exactly 12 (eq. (1)), so the CCEI is a multiple of 1/12. The published
Table 1 prints values such as 0.385, 0.400, 0.353 that are not. The
conventions that could produce them are defined in :mod:`moralkit.psm.indices`
(and re-exported here); this module holds what notebook ``06_audit`` needs to
test which one reproduces the published (CCEI, alpha) pairs. **The default
everywhere is the standard convention.**

A convention is a pair ``(coordinates, report)``; both are defined, with the values each one takes,
in :mod:`moralkit.psm.indices`.

The random-choice test (Procedure 1) computes ``alpha`` = share of random
datasets whose reported index is ``>=`` the model's; with ``report="1-e"``
that literal reading rejects H0 for data *less* consistent than random
choice. :func:`null_distribution` and :func:`predicted_alpha` make this
concrete.

References
----------
Seror (2025), Section 2.2 (eq. (1), Definitions 1-3, corner flip), Section 2.3
(Procedure 1, eq. (4)), Table 1. Afriat (1972); Varian (1982).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np
import pandas as pd

from ..errors import MoralkitError
from ..psm import ccei_many
from ..psm.design import BUDGET, CORNERS, PRICES, budget_set, from_corner, to_corner
from ..psm.indices import CONVENTIONS, COORDINATES, convention, exact_ratio, expenditures
from ..psm.rp import validate_expenditure_matrix

__all__ = [
    "attainable_values",
    "in_support",
    "matching_fractions",
    "null_distribution",
    "predicted_alpha",
]

# --------------------------------------------------------------------------- attainable values


@lru_cache(maxsize=None)
def _own_expenditures(coordinates: str) -> frozenset[int]:
    """Own expenditures a chosen answer can have (over all 32 corners x 5 prices). Memoised: the
    convention audit asks for them once per convention and null distribution."""
    if coordinates in ("corner", "origin_budget"):
        return frozenset({BUDGET})
    out = {BUDGET} if coordinates == "nominal" else set()  # nominal: unflipped rounds cost 12
    for p in PRICES:
        ys = budget_set(p)
        for o in CORNERS:
            q = from_corner(ys, o)
            if coordinates == "origin":
                out |= set((q @ p).tolist())
            else:  # nominal: the round may have been flipped, so the answer is on the opposite budget
                out |= set((to_corner(q, 5 - o) @ p).tolist())
    return frozenset(out)


def attainable_values(convention_="corner/e") -> np.ndarray:
    """Every value the convention's index can take on PSM data (sorted floats in [0, 1]).

    ``e*`` is always 1, 0, or a ratio ``E[r, k] / E[r, r]`` < 1 of integer
    expenditures (``E[r, k]`` in 0..30, own expenditure as listed in the
    module docstring); ``"1-e"`` maps each value ``v`` to ``1 - v``.

    References
    ----------
    Seror (2025), Section 2.2, eqs. (1)-(2).
    """
    c = convention(convention_)
    return _attainable(c.coordinates, c.report).copy()


@lru_cache(maxsize=None)
def _attainable(coordinates: str, report: str) -> np.ndarray:
    """:func:`attainable_values` of a checked convention, memoised (read-only: callers get a copy or only read)."""
    dens = _own_expenditures(coordinates)
    vals = {Fraction(0), Fraction(1)}
    for b in dens:
        for a in range(0, b + 1):
            vals.add(Fraction(a, b))
    if report == "1-e":
        vals = {1 - v for v in vals}
    out = np.array(sorted(float(v) for v in vals))
    out.flags.writeable = False
    return out


def in_support(values, convention_="corner/e", decimals: int = 3) -> np.ndarray:
    """Whether each printed value can be an attainable value rounded to ``decimals``.

    A printed ``x`` is accepted when some attainable ``v`` has
    ``|v - x| <= 0.5 * 10**-decimals`` (both rounding directions of a tie
    allowed, e.g. 3/16 = 0.1875 printed as 0.187 or 0.188).
    """
    c = convention(convention_)
    v = _attainable(c.coordinates, c.report)
    x = np.atleast_1d(np.asarray(values, dtype=float))
    tol = 0.5 * 10.0 ** (-decimals) + 1e-12
    return np.array([bool((np.abs(v - xi) <= tol).any()) for xi in x])


def matching_fractions(x: float, max_den: int = 30, decimals: int = 3) -> list[Fraction]:
    """Fractions ``k/m`` with ``m <= max_den`` (lowest terms) that print as ``x`` to ``decimals`` places.

    Ties (e.g. 3/16 = 0.1875 for 0.187 or 0.188) are accepted either way.

    Examples
    --------
    >>> matching_fractions(0.385)
    [Fraction(5, 13)]
    """
    tol = 0.5 * 10.0 ** (-decimals) + 1e-12
    out = set()
    for m in range(1, int(max_den) + 1):
        for k in range(0, m + 1):
            if abs(k / m - x) <= tol:
                out.add(Fraction(k, m))
    return sorted(out)


# --------------------------------------------------------------------------- null distribution


def _null_rows(idx, seeds, designs, q0, n_obs, coords, convs):
    """Rows of :func:`null_distribution` for the replicates ``idx`` (each with its own SeedSequence)."""
    from ..psm.simulate import random_chosen_answers

    rows = []
    exact = {}  # float e* -> (e*, 1 - e*) as floats of the exact fractions (see exact_ratio)
    for i, ss in zip(idx, seeds):
        rng = np.random.default_rng(ss)
        # simulate_random's draws (every round answered), as arrays: no dataset built per replicate, and
        # of the alternatives only the chosen ones
        _, corners, prices, ci, q = random_chosen_answers(designs[i % len(designs)], rng, q0)
        T = len(q)
        perm = rng.permutation(T)
        keeps = [np.sort(perm[:n]) for n in n_obs]
        S, sizes = ccei_many.subset_table(keeps, T)  # the same subsets in every coordinate system
        E_of = {}
        for co in coords:
            if co == "origin_budget" and "origin" in E_of:  # the origin matrix with the budget on the diagonal
                E = E_of["origin"].copy()
                np.fill_diagonal(E, BUDGET)
            else:
                E = expenditures(corners, prices, q, CORNERS[ci] if co == "nominal" else None, co)
            E_of[co] = E
            # every nested subset from one pass over the respondent's expenditure matrix
            x_of = ccei_many.ccei_subset_table(validate_expenditure_matrix(E), S, sizes)
            for n, x in zip(n_obs, x_of):
                if x not in exact:
                    e = exact_ratio(x)
                    exact[x] = (float(e), float(1 - e))
                e, one_minus = exact[x]
                for c in convs:
                    if c.coordinates == co:
                        rows.append((i, n, c.name, e, e if c.report == "e" else one_minus))
    return rows


def null_distribution(n_datasets: int = 1000, conventions=CONVENTIONS, n_obs=(160,), *, designs=None,
                      q0=None, seed=0, progress: bool = False, n_jobs: int = 1) -> pd.DataFrame:
    """Index of uniformly random (simulated) respondents in the paper's design, under each convention.

    Each replicate is a simulated random respondent (:func:`moralkit.psm.simulate.simulate_random`):
    a uniformly random round-0 answer (which fixes the corner flips) and a
    uniformly random option in each of the 160 rounds of a design drawn by
    :func:`moralkit.psm.design.make_design`; for each ``n`` in ``n_obs`` the index is
    computed on a random subset of ``n`` rounds (nested subsets), emulating the
    missing rounds of Table 1.

    Parameters
    ----------
    n_datasets : int, default 1000
    conventions : iterable of conventions
    n_obs : iterable of int, default (160,)
    designs : sequence of Design or ints, optional
        Designs cycled over the replicates (default: 10 designs, seeds 0..9).
        The paper's own option sets are not public.
    q0 : array_like (5,), optional
        A fixed round-0 answer (it decides the corner flips, hence the option
        sets in raw coordinates); default a uniformly random one per replicate.
    seed : int
    progress : bool
        Show a tqdm bar.
    n_jobs : int, default 1
        joblib worker processes (-1: all cores). Every replicate has its own seed, so the
        result does not depend on it.

    Returns
    -------
    DataFrame
        Columns ``replicate``, ``n_obs``, ``convention``, ``e_star`` (exact
        critical efficiency as float), ``index`` (the reported value).

    References
    ----------
    Seror (2025), Section 2.3 (random datasets ``D^m_n``, Procedure 1).
    """
    from joblib import Parallel, delayed, effective_n_jobs

    from ..psm.design import as_design

    convs = [convention(c) for c in conventions]
    n_obs = sorted({int(n) for n in n_obs}, reverse=True)
    if not n_obs or n_obs[-1] < 2 or n_obs[0] > 160:
        raise MoralkitError("n_obs must be integers in 2..160")
    if designs is None:
        designs = range(10)
    designs = [as_design(d) for d in designs]
    coords = sorted({c.coordinates for c in convs}, key=COORDINATES.index)
    ss = np.random.SeedSequence(int(seed)).spawn(int(n_datasets))
    workers = effective_n_jobs(n_jobs)
    n_chunks = 1 if workers == 1 else min(int(n_datasets), 4 * workers)
    chunks = [c for c in np.array_split(np.arange(int(n_datasets)), max(n_chunks, 1)) if len(c)]
    if progress and workers == 1:
        chunks = [np.array([i]) for i in range(int(n_datasets))]
    args = (designs, q0, n_obs, coords, convs)
    if workers == 1:
        parts = (_null_rows(c, [ss[i] for i in c], *args) for c in chunks)
    else:
        parts = Parallel(n_jobs=n_jobs, return_as="generator")(
            delayed(_null_rows)(c, [ss[i] for i in c], *args) for c in chunks)
    if progress:
        from tqdm.auto import tqdm
        parts = tqdm(parts, total=len(chunks), desc="null datasets")
    rows = [r for part in parts for r in part]
    return pd.DataFrame(rows, columns=["replicate", "n_obs", "convention", "e_star", "index"])


def predicted_alpha(null: pd.DataFrame, published: pd.DataFrame, *, decimals: int = 3) -> pd.DataFrame:
    """Alpha each convention predicts for the published CCEIs, next to the published alpha.

    For each published row (``ccei``, ``n_obs``) and each convention in
    ``null``, ``alpha_hat`` = share of null replicates (with the nearest
    ``n_obs`` simulated) whose index, rounded to ``decimals`` as printed, is
    ``>=`` the published value (Procedure 1, eq. (4): "CCEI(D_n) >= CCEI(D)").

    Returns
    -------
    DataFrame
        One row per (model, convention): ``model``, ``convention``, ``ccei``,
        ``n_obs``, ``alpha`` (published), ``alpha_hat``, ``in_support``.

    References
    ----------
    Seror (2025), Section 2.3, eq. (4); Table 1.
    """
    need = {"model", "ccei", "alpha", "n_obs"}
    if not need <= set(published.columns):
        raise MoralkitError(f"published must have columns {sorted(need)} (see moralkit.psm.reference.published_table1())")
    sims = np.array(sorted(null["n_obs"].unique()))
    rows = []
    for conv, g in null.groupby("convention", sort=False):
        by_n = {n: np.round(gg["index"].to_numpy(), decimals) for n, gg in g.groupby("n_obs")}
        sup = in_support(published["ccei"].to_numpy(), conv, decimals)
        for j, rec in enumerate(published.itertuples(index=False)):
            n = int(sims[np.argmin(np.abs(sims - rec.n_obs))])
            vals = by_n[n]
            a_hat = float((vals >= round(float(rec.ccei), decimals) - 1e-12).mean())
            rows.append((rec.model, conv, float(rec.ccei), int(rec.n_obs), float(rec.alpha), a_hat, bool(sup[j])))
    return pd.DataFrame(rows, columns=["model", "convention", "ccei", "n_obs", "alpha", "alpha_hat", "in_support"])
