"""The random-choice rationality test with the Houtman–Maks index (Procedure 1, eq. (4), footnote 6).

:func:`hm_random_choice_test` compares a model's Houtman–Maks index (the largest share of its
rounds that satisfies GARP, :func:`moralkit.psm.houtman_maks.houtman_maks`) with that of the same
random datasets as the CCEI test of :mod:`moralkit.psm.rationality` (both draw them from
:mod:`moralkit.psm.random_datasets`, with the same seeds). :func:`moralkit.psm.rationality.table1`
with ``hm=True`` adds its columns to Table 1, and :mod:`moralkit.psm.hm_table1` commits them for the
project's own runs. The result is an :class:`HMTestResult`.

Each random dataset is decided by bounds first and by the branch-and-cut only when they do not
decide (:func:`moralkit.psm.houtman_maks.houtman_maks_decision`); one not decided within the time
limit is counted as undecided, and alpha becomes an interval rather than a guess.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.3 (eq. (4), Procedure 1,
footnote 6). Houtman, M. and Maks, J. (1985), "Determining all maximal data subsets consistent with
revealed preference", *Kwantitatieve Methoden* 19, 89-104.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..checks import check_int
from . import rp
from .dataset import PSMDataset
from .random_choice import stars
from .random_datasets import answered_part, chunk_choices, chunk_sizes

__all__ = ["HMTestResult", "hm_decide", "hm_random_choice_test", "random_expenditures"]


@dataclass(frozen=True)
class HMTestResult:
    """The random-choice test with the Houtman–Maks index (:func:`hm_random_choice_test`).

    Attributes
    ----------
    model : str
    hm : fractions.Fraction
        The model's Houtman–Maks index, ``n_kept / n_obs``.
    n_kept, n_obs : int
    n_upper : int
        The proven upper bound on the model's HM count (``n_kept`` when its HM is exact).
    n_at_least, n_below, n_undecided : int
        Random datasets whose HM is at least the model's, below it, and neither
        decided within the time limit (nor, when the model's own HM is only known to
        lie in ``[n_kept, n_upper]``, placed on one side of that whole interval).
    n_datasets, seed : int
    n_exact : int
        Random datasets that the bounds (packing bound, greedy subset) did not decide,
        so that the branch-and-cut was run (decided or not).
    time_limit : float or None
        Seconds allowed per random dataset.
    decisions, decided_by : ndarray
        Per random dataset, in order: 1 (HM at least the model's), 0 (below), -1
        (undecided); and ``"bound"``, ``"greedy"`` or ``"exact"``.
    """

    model: str
    hm: Fraction
    n_kept: int
    n_obs: int
    n_at_least: int
    n_below: int
    n_undecided: int
    n_datasets: int
    seed: int
    n_exact: int = 0
    time_limit: float | None = None
    decisions: np.ndarray | None = field(default=None, repr=False, compare=False)
    decided_by: np.ndarray | None = field(default=None, repr=False, compare=False)
    n_upper: int = -1

    @property
    def own_exact(self) -> bool:
        """Whether the model's own HM was proven (else it lies in ``[n_kept, n_upper]``)."""
        return self.n_upper < 0 or self.n_upper == self.n_kept

    @property
    def hm_text(self) -> str:
        """``"41/160"``, or ``"[40, 45]/160"`` when the model's own HM is only bounded."""
        if self.own_exact:
            return f"{self.n_kept}/{self.n_obs}"
        return f"[{self.n_kept}, {self.n_upper}]/{self.n_obs}"

    @property
    def alpha_low(self) -> float:
        return self.n_at_least / self.n_datasets

    @property
    def alpha_high(self) -> float:
        return (self.n_at_least + self.n_undecided) / self.n_datasets

    @property
    def alpha(self) -> float:
        """The share of random datasets with an HM at least the model's; NaN when some are undecided."""
        return self.alpha_low if self.n_undecided == 0 else float("nan")

    @property
    def stars(self) -> str:
        """Stars when the interval [alpha_low, alpha_high] decides them, else ``"?"``."""
        lo, hi = stars(Fraction(self.n_at_least, self.n_datasets)), stars(
            Fraction(self.n_at_least + self.n_undecided, self.n_datasets))
        return lo if lo == hi else "?"


def hm_decide(E, k: int, time_limit=None, k_hi: int | None = None) -> tuple[int, str]:
    """One random dataset's decision: 1 (HM >= ``k_hi``, or >= ``k`` when ``k_hi`` is None or equal),
    0 (HM < ``k``), -1 (undecided within ``time_limit``, or between ``k`` and ``k_hi``), and what
    decided it (``"bound"``, ``"greedy"`` or ``"exact"``: the branch-and-cut ran).

    ``E`` is the random dataset's expenditure matrix (:func:`moralkit.psm.rp.psm_expenditure_matrix`
    layout); ``[k, k_hi]`` brackets the respondent's own HM count when only bounds are known.
    """
    from .houtman_maks import houtman_maks_decision

    if k_hi is None or k_hi == k:
        d, how = houtman_maks_decision(E, k, time_limit=time_limit)
        return (-1 if d is None else int(d)), how
    d, how = houtman_maks_decision(E, k_hi, time_limit=time_limit)
    if d:
        return 1, how
    d2, how2 = houtman_maks_decision(E, k, time_limit=time_limit)
    return (0 if d2 is False else -1), ("exact" if "exact" in (how, how2) else how2)


def random_expenditures(dataset: PSMDataset) -> np.ndarray:
    """``V[t, s, o]``: the expenditure of round ``t``'s bundle at round ``s``'s option ``o`` (answered rounds).

    Random dataset ``C`` (one row of :func:`moralkit.psm.random_datasets.chunk_choices`) has the expenditure
    matrix ``V[:, arange(T), C]``.
    """
    v = answered_part(dataset)
    return rp.option_expenditures(v.corners, v.prices, v.options).astype(np.int64)


def _hm_decisions(model, corners, prices, options, seed, chunks, sizes, k, time_limit, k_hi=None):
    """:func:`hm_decide` of every random dataset of these chunks, in order."""
    T, n_opt = options.shape[0], options.shape[1]
    V = rp.option_expenditures(corners, prices, options).astype(np.int64)
    cols = np.arange(T)
    out = []
    for c, m in zip(chunks, sizes):
        C = chunk_choices(seed, model, c, m, T, n_opt)  # the CCEI test's random datasets
        out.extend(hm_decide(V[:, cols, row], k, time_limit, k_hi) for row in C)
    return out


def hm_random_choice_test(dataset: PSMDataset, n_datasets: int = 1000, seed: int = 0, *, n_jobs: int = 1,
                          time_limit: float = 10.0, own_time_limit: float | None = None) -> HMTestResult:
    """The random-choice rationality test (Procedure 1) with the Houtman–Maks index in corner coordinates.

    The model's HM (:func:`moralkit.psm.houtman_maks.houtman_maks`, exact) is compared
    with that of the same random datasets as the CCEI test (same seeds). Each
    random dataset is decided by bounds first (a packing bound, a greedy consistent
    subset) and by the branch-and-cut only when they do not decide
    (:func:`moralkit.psm.houtman_maks.houtman_maks_decision`).
    A dataset not decided within ``time_limit`` seconds is counted as undecided:
    alpha is then reported as the interval [``alpha_low``, ``alpha_high``] and
    ``alpha`` is NaN. Near-random data at T = 160 are slow to decide (see
    ``benchmarks/bench_houtman_maks.py``).

    ``own_time_limit`` (seconds, default none) bounds the model's own exact HM. When it
    stops the search, the model's HM is only known to lie in ``[n_kept, n_upper]``; each
    random dataset is then decided at both ends, and one whose HM is at least ``n_upper``
    counts as at least the model's, one below ``n_kept`` as below it, and any other as
    undecided (so alpha is again an interval, never a guess).

    References
    ----------
    Seror (2025), Section 2.3, eq. (4) and footnote 6; Houtman and Maks (1985).
    """
    from joblib import Parallel, delayed

    from .houtman_maks import houtman_maks

    n_datasets, seed = check_int(n_datasets, "n_datasets", minimum=1), check_int(seed, "seed", minimum=0)
    v = answered_part(dataset)
    own = houtman_maks(rp.psm_expenditure_matrix(v), time_limit=own_time_limit)
    sizes = chunk_sizes(int(n_datasets))
    tasks = [delayed(_hm_decisions)(v.model, v.corners, v.prices, v.options, int(seed), [c], [sizes[c]],
                                    own.n_kept, time_limit, own.n_upper) for c in range(len(sizes))]
    parts = Parallel(n_jobs=n_jobs)(tasks) if n_jobs != 1 else [f(*a, **kw) for f, a, kw in tasks]
    flat = [x for p in parts for x in p]
    d = np.array([x[0] for x in flat], dtype=np.int64)
    how = np.array([x[1] for x in flat])
    return HMTestResult(model=v.model, hm=own.index, n_kept=own.n_kept, n_obs=v.n_obs,
                        n_at_least=int((d == 1).sum()), n_below=int((d == 0).sum()),
                        n_undecided=int((d == -1).sum()), n_datasets=len(d), seed=int(seed),
                        n_exact=int((how == "exact").sum()), time_limit=time_limit, decisions=d, decided_by=how,
                        n_upper=own.n_upper)
