"""The Houtman–Maks index in corner coordinates: the largest share of rounds GARP rationalises.

For a dataset with expenditure matrix ``E`` (``E[r, k] = p^r . q^k_{o^r}``, corner
coordinates for PSM data, :func:`moralkit.psm.rp.expenditure_matrix`; ``E = P Q^T``
for consumer data), the Houtman–Maks index is

    HM(D) = max { |S| / T : S a subset of the rounds, D restricted to S satisfies GARP_e },

with ``e = 1`` by default (Houtman and Maks 1985). Seror's later theory of the
PSM ("Concave Rationalization with an Ideal Point") scores a respondent by
this share, computed with every round priced in its own corner coordinates.

The exact algorithm
-------------------
Finding HM is NP-hard (Smeulders et al. 2014). Here it is solved exactly by
branch-and-cut over *cycle constraints*:

1. The relations ``R0_e`` and ``P0_e`` are computed exactly
   (:func:`moralkit.psm.rp.relations`). Every cycle of a subset is a cycle of the
   full ``R0_e`` graph, inside one of its strongly connected components (SCCs),
   so each SCC that holds a strict edge is an independent subproblem; every
   other round is always kept.
2. For one such SCC the problem is ``max sum_i y_i`` over binaries ``y`` subject
   to ``sum_{i in C} y_i <= |C| - 1`` for every GARP_e-violating cycle ``C`` (a
   cycle of ``R0_e`` edges with at least one ``P0_e`` edge). There are
   exponentially many, so they are generated inside one search tree of SCIP
   (PySCIPOpt), by a constraint handler:

   - the violating 2-cycles are rows from the start, as a cover of them by maximal
     cliques (``sum_{i in Q} y_i <= 1``: at most one round of a set of pairwise
     violating 2-cycles is kept), stronger than one row per pair;
   - at an integral point, the kept rounds are checked exactly (a compiled
     breadth-first search per round); a shortest violating cycle through each
     strict edge found is added as a constraint (lazy constraints);
   - at a fractional point, cycle cuts are separated: a cycle is violated iff
     ``sum_{i in C} (1 - y_i) < 1``, so a Dijkstra search with node weights
     ``1 - y`` finds the lightest cycle through each strict edge (numba);
   - below the root, once per node, local clique cuts: with the rounds F the
     branching keeps, two rounds conflict if F plus both holds a violating cycle
     (checked exactly), and a clique Q of such conflicts gives ``sum_{i in Q} y_i
     <= 1`` in that subtree (:func:`moralkit.psm._hm_scip.local_clique_rows`);
   - a greedy consistent subset, improved by a combinatorial branch-and-bound
     (:func:`moralkit.psm._hm_kernels.max_consistent_bnb`: a clique search whose
     candidates are filtered exactly against the closure of the kept rounds and
     bounded by a colouring into violating-2-cycle cliques) within a fixed node
     budget, is the first incumbent. On small components the branch-and-bound
     finishes, and its optimum is returned without SCIP.

3. The kept set is re-checked with :func:`moralkit.psm.rp.garp` (exact arithmetic)
   before it is returned. "Optimal" is reported only when the solver's bound
   (its dual bound, rounded down: the objective is integral) equals the kept
   count; a search stopped by a time limit returns both bounds instead.

``method="cuts"`` keeps the earlier algorithm, a cut loop that re-solves a master
problem over the cuts found so far with HiGHS (:func:`scipy.optimize.milp`) until
its optimum passes the exact check. It is an independent cross-check. The
tests compare both with brute force over every subset, and with revpref's and
prefgraph's exact Houtman–Maks on consumer data.

References
----------
Houtman, M. and Maks, J. (1985). Determining all maximal data subsets
consistent with revealed preference. *Kwantitatieve Methoden* 19, 89-104.
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2
(Definitions 1-2, footnote 6) and footnote 8. Smeulders, B., Cherchye, L.,
De Rock, B. and Spieksma, F. (2014), Goodness-of-fit measures for revealed
preference tests: complexity results and algorithms, *ACM TEAC* 2(1).
Demuynck, T. and Rehbeck, J. (2023), Computing revealed preference
goodness-of-fit measures with integer programming, *Economic Theory* 76.
Tomita, E. and Seki, T. (2003), An efficient branch-and-bound algorithm for
finding a maximum clique, *DMTCS 2003*, LNCS 2731 (the colouring bound).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from ..errors import MoralkitError
from . import rp
from ._hm_bounds import disjoint_cycles, packing, solve_component_cuts, two_cycle_matching
from ._hm_kernels import greedy_consistent
from ._hm_scip import solve_component_scip

__all__ = [
    "HMDecision",
    "HoutmanMaksResult",
    "houtman_maks",
    "houtman_maks_at_least",
    "houtman_maks_decision",
    "houtman_maks_index",
    "houtman_maks_upper_bound",
]


@dataclass(frozen=True)
class HoutmanMaksResult:
    """Outcome of :func:`houtman_maks`.

    Attributes
    ----------
    index : fractions.Fraction
        ``n_kept / T``, exactly (1 for a dataset that satisfies GARP_e). When
        :attr:`optimal` is False (a time limit stopped the search) it is a lower
        bound, and :attr:`index_upper` the matching upper bound.
    n_kept, T : int
        Size of the largest GARP_e-consistent subset found (checked exactly), and the number of rounds.
    n_upper : int
        The solver's proven upper bound on that size; equal to ``n_kept`` when optimal.
    optimal : bool
        True iff ``n_kept == n_upper``: the index is exact.
    status : str
        ``"optimal"``, or what stopped the search (``"timelimit"``).
    kept : ndarray of int
        One consistent subset of ``n_kept`` rounds (round positions, ascending).
    e : fractions.Fraction
        The rationality level used (a float is the exact binary number it holds).
    method : str
        ``"scip"`` (branch-and-cut) or ``"cuts"`` (the earlier cut loop over HiGHS).
    n_cuts : int
        Cycle constraints added lazily at integral points (SCIP) or cuts generated (``"cuts"``).
    n_solves : int
        Branch-and-bound nodes (SCIP) or master problems solved (``"cuts"``).
    wall_s : float
    """

    index: Fraction
    n_kept: int
    T: int
    kept: np.ndarray = field(repr=False)
    e: Fraction
    n_cuts: int
    n_solves: int
    wall_s: float
    n_upper: int = -1
    optimal: bool = True
    status: str = "optimal"
    method: str = "scip"

    @property
    def index_upper(self) -> Fraction:
        """The upper bound ``n_upper / T`` (equal to :attr:`index` when optimal)."""
        return Fraction(self.n_upper, self.T)

    @property
    def removed(self) -> np.ndarray:
        """The rounds left out (the complement of :attr:`kept`)."""
        return np.setdiff1d(np.arange(self.T), self.kept)

    def __float__(self) -> float:
        return float(self.index)


def _scc_labels(R0):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    return connected_components(csr_matrix(R0), directed=True, connection="strong")[1]


def _components(E, ef):
    """Exact relations, and the SCCs of R0_e that hold a strict edge (the only ones to solve)."""
    R0, P0 = rp.relations(E, ef)
    lab = _scc_labels(R0)
    r, k = np.nonzero(P0)
    bad = np.unique(lab[r][lab[r] == lab[k]])
    comps = [np.nonzero(lab == c)[0] for c in bad]
    return R0, P0, sorted(comps, key=len)


def _prepare(E, e, time_limit):
    if hasattr(E, "valid") and hasattr(E, "chosen"):
        E = rp.psm_expenditure_matrix(E)
    E = rp.validate_expenditure_matrix(E)
    if time_limit is not None and not time_limit > 0:
        raise MoralkitError(f"time_limit must be a positive number of seconds, got {time_limit}")
    if len(E) == 0:
        raise MoralkitError("the dataset has no rounds; the Houtman–Maks index needs at least one")
    return E, _as_fraction(e)


def _solve_components(R0, P0, comps, T, time_limit, t0, method):
    """Solve each component (:func:`_components`): (keep mask, upper bound on the kept count,
    n_cuts, n_solves, status)."""
    keep = np.ones(T, dtype=bool)
    upper = T
    n_cuts = n_solves = 0
    status = "optimal"
    for nodes in comps:
        R = np.ascontiguousarray(R0[np.ix_(nodes, nodes)])
        P = np.ascontiguousarray(P0[np.ix_(nodes, nodes)])
        left = None if time_limit is None else max(time_limit - (time.perf_counter() - t0), 0.01)
        if method == "scip":
            kept_c, up_c, st, nc, ns = solve_component_scip(R, P, left)
        else:
            kept_c, up_c, st, nc, ns = solve_component_cuts(R, P, left)
        if st != "optimal":  # stopped early: the packing bound may be the better one
            up_c = min(up_c, len(nodes) - disjoint_cycles(R, P))
        keep[nodes] = kept_c
        upper -= len(nodes) - up_c
        n_cuts += nc
        n_solves += ns
        if st != "optimal":
            status = st
    return keep, upper, n_cuts, n_solves, status


METHODS = ("scip", "cuts")


def houtman_maks(E, e=1, *, time_limit: float | None = None, method: str = "scip") -> HoutmanMaksResult:
    """The exact Houtman–Maks index: the largest share of rounds that satisfy GARP_e together.

    Parameters
    ----------
    E : array_like (T, T) or PSMDataset
        Expenditure matrix (:func:`moralkit.psm.rp.expenditure_matrix`, corner
        coordinates for PSM data; :func:`moralkit.psm.rp.consumer_expenditure_matrix`
        for consumer data), or a PSM dataset (missing rounds excluded).
    e : float or fractions.Fraction in [0, 1], default 1
        Rationality level of GARP_e (1: GARP, the Houtman–Maks index proper).
        Comparisons are exact; a float is the binary number it holds.
    time_limit : float, optional
        Seconds. A search stopped by it returns bounds: ``optimal`` is False,
        ``index`` (a consistent subset found, checked exactly) is the lower bound and
        ``index_upper`` the solver's upper bound. No unproven value is called optimal.
    method : {"scip", "cuts"}, default "scip"
        ``"scip"``: one branch-and-cut in SCIP (PySCIPOpt). ``"cuts"``: the earlier
        cut loop that re-solves a master problem with HiGHS; kept as an independent
        cross-check (the tests compare the two), it is never faster at T = 160
        (``benchmarks/bench_houtman_maks.py``).

    Returns
    -------
    HoutmanMaksResult
        ``.index`` (a Fraction), ``.optimal``, ``.n_kept``, ``.n_upper``, ``.kept``, ``.removed``.

    Raises
    ------
    ValueError
        On a malformed expenditure matrix, ``e`` outside [0, 1] or an unknown method.

    Notes
    -----
    A round kept by the solver is accepted only after an exact check: the kept set is
    re-checked with :func:`moralkit.psm.rp.garp` (exact arithmetic) before it is
    returned, and "optimal" is reported only when the solver's proven bound (its dual
    bound, rounded down, on an integral objective) equals the kept count.

    References
    ----------
    Houtman and Maks (1985); Seror (2025), Section 2.2 and footnote 6;
    Smeulders et al. (2014) (NP-hardness).

    Examples
    --------
    >>> import numpy as np
    >>> E = np.array([[12, 8, 20], [8, 12, 20], [20, 20, 12]])  # rounds 0 and 1 reveal each other strictly
    >>> r = houtman_maks(E)
    >>> r.index, r.optimal, r.n_kept, r.removed.tolist()
    (Fraction(2, 3), True, 2, [1])
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise MoralkitError(f"method must be one of {METHODS}, got {method!r}")
    E, ef = _prepare(E, e, time_limit)
    keep, upper, n_cuts, n_solves, status = _solve_components(*_components(E, ef), len(E), time_limit, t0, method)
    kept = np.nonzero(keep)[0]
    if not rp.garp(E[np.ix_(kept, kept)], ef):  # pragma: no cover - guarded by construction
        raise RuntimeError("internal error: the Houtman–Maks subset violates GARP_e")
    if upper < len(kept):  # pragma: no cover - a bound below a feasible subset
        raise RuntimeError(f"internal error: the solver's bound {upper} is below a consistent subset of {len(kept)}")
    optimal = upper == len(kept)
    if optimal:
        status = "optimal"
    elif status == "optimal":  # pragma: no cover - the solver said optimal but its bound did not close
        status = "gap"
    T = len(E)
    return HoutmanMaksResult(index=Fraction(len(kept), T), n_kept=len(kept), T=T, kept=kept, e=ef,
                             n_cuts=n_cuts, n_solves=n_solves, wall_s=time.perf_counter() - t0,
                             n_upper=upper, optimal=optimal, status=status, method=method)


def houtman_maks_index(E, e=1) -> Fraction:
    """The Houtman–Maks index as a Fraction (see :func:`houtman_maks`).

    Examples
    --------
    >>> import numpy as np
    >>> houtman_maks_index(np.array([[9.0, 6.0], [6.0, 9.0]]))
    Fraction(1, 2)
    """
    return houtman_maks(E, e).index


def _as_fraction(e) -> Fraction:
    if isinstance(e, (bool, np.bool_)):
        raise MoralkitError(f"e must be a number in [0, 1], got {e!r}")
    try:
        f = Fraction(e) if not isinstance(e, (float, np.floating)) else Fraction(float(e))
    except (TypeError, ValueError):
        raise MoralkitError(f"e must be a number in [0, 1], got {e!r}") from None
    if not 0 <= f <= 1:
        raise MoralkitError(f"e (rationality level) must be in [0, 1], got {e}")
    return f


def houtman_maks_upper_bound(E, e=1) -> int:
    """A quick upper bound on the number of rounds GARP_e can keep (exact, not a heuristic value).

    Vertex-disjoint GARP_e-violating cycles are packed greedily (shortest first, and
    as a maximal matching of violating 2-cycles; the larger packing is used); each
    needs at least one of its rounds removed, so ``T - (number packed)`` bounds the
    Houtman–Maks count from above.

    Examples
    --------
    >>> import numpy as np
    >>> houtman_maks_upper_bound(np.array([[12, 8, 20], [8, 12, 20], [20, 20, 12]]))
    2
    """
    E = rp.validate_expenditure_matrix(E)
    R0, P0 = rp.relations(E, _as_fraction(e))
    return len(E) - disjoint_cycles(R0, P0)


def houtman_maks_at_least(E, k: int, e=1, *, time_limit: float | None = None) -> bool | None:
    """Whether some ``k`` rounds satisfy GARP_e together (HM count >= k), deciding by bounds first.

    The packing bound (:func:`houtman_maks_upper_bound`) and a greedy consistent
    subset decide most datasets; the rest are decided by branch-and-cut, which stops
    as soon as ``k`` rounds are kept or the bound falls below ``k``.

    Returns True or False, or None when ``time_limit`` stopped the search before
    deciding (never a guess).
    """
    return houtman_maks_decision(E, k, e, time_limit=time_limit).at_least


class HMDecision(NamedTuple):
    """Outcome of :func:`houtman_maks_decision`.

    ``at_least``: True, False, or None (undecided within the time limit). ``by``:
    ``"bound"`` (the packing bound), ``"greedy"`` (a greedy consistent subset) or
    ``"exact"`` (the branch-and-cut was needed).
    """

    at_least: bool | None
    by: str


def houtman_maks_decision(E, k: int, e=1, *, time_limit: float | None = None) -> HMDecision:
    """Whether the HM count is at least ``k``, and what decided it (see :func:`houtman_maks_at_least`).

    Examples
    --------
    >>> import numpy as np
    >>> E = np.array([[12, 8, 20], [8, 12, 20], [20, 20, 12]])
    >>> houtman_maks_decision(E, 3), houtman_maks_decision(E, 2)
    (HMDecision(at_least=False, by='bound'), HMDecision(at_least=True, by='greedy'))
    """
    if k <= 0:
        return HMDecision(True, "bound")
    t0 = time.perf_counter()
    E, ef = _prepare(E, e, time_limit)
    T = len(E)
    if k > T:
        return HMDecision(False, "bound")
    R0, P0, comps = _components(E, ef)
    free = T - sum(len(c) for c in comps)
    lo = np.zeros(len(comps), dtype=np.int64)
    hi = np.zeros(len(comps), dtype=np.int64)
    data = []
    for j, nodes in enumerate(comps):
        R = np.ascontiguousarray(R0[np.ix_(nodes, nodes)])
        P = np.ascontiguousarray(P0[np.ix_(nodes, nodes)])
        data.append((R, P))
        hi[j] = len(nodes) - two_cycle_matching(R, P)  # O(n^2); the cycle packing only if it does not decide
    if free + hi.sum() < k:
        return HMDecision(False, "bound")
    for j, (R, P) in enumerate(data):
        hi[j] = min(hi[j], R.shape[0] - packing(R, P))  # (the matching is already in hi)
        two = P & R.T
        order = np.argsort(two.sum(axis=0) + two.sum(axis=1), kind="stable").astype(np.int64)
        lo[j] = int(greedy_consistent(R, P, order).sum())
    if free + hi.sum() < k:
        return HMDecision(False, "bound")
    if free + lo.sum() >= k:
        return HMDecision(True, "greedy")
    for j in sorted(range(len(comps)), key=lambda j: -(hi[j] - lo[j])):  # the widest gap first
        if hi[j] == lo[j]:
            continue
        left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        if left is not None and left <= 0:
            return HMDecision(None, "exact")
        R, P = data[j]
        # one component: decide "at least target" directly (SCIP stops at the first such subset
        # or once its bound drops below target); several: solve each to optimality
        target = k - free if len(comps) == 1 else None
        kept, up, st, _, _ = solve_component_scip(R, P, left, target=target)
        lo[j] = max(lo[j], int(kept.sum()))
        hi[j] = min(hi[j], up)
        if free + hi.sum() < k:
            return HMDecision(False, "exact")
        if free + lo.sum() >= k:
            return HMDecision(True, "exact")
    return HMDecision(None, "exact")
