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
Finding HM is NP-hard (Smeulders et al. 2014), but at the PSM's size it is
solved exactly by *cycle cuts*:

1. The relations ``R0_e`` and ``P0_e`` are computed exactly
   (:func:`moralkit.psm.rp.relations`). Every cycle of a subset is a cycle of the
   full ``R0_e`` graph, inside one of its strongly connected components (SCCs),
   so each SCC that holds a strict edge is an independent subproblem; every
   other round is always kept.
2. For one such SCC, the master problem is ``max sum_i y_i`` over binaries
   ``y`` subject to ``sum_{i in C} y_i <= |C| - 1`` for every GARP_e-violating
   cycle ``C`` found so far (a cycle of ``R0_e`` edges with at least one
   ``P0_e`` edge). It starts with every violating 2-cycle.
3. The master's optimum ``S`` is checked exactly; if ``S`` violates GARP_e,
   a shortest violating cycle through every strict edge of ``S`` that lies on
   one is added as a cut (one compiled breadth-first search per round), and the
   master is solved again. Once ``S`` passes, it is optimal: the master is a
   relaxation (it holds only some of the cycle constraints) and ``S`` is
   feasible for the full problem.

The master is a pure 0-1 problem with 0/1 coefficients, solved to proven
optimality (relative gap 0) by HiGHS through :func:`scipy.optimize.milp`; the
kept set is re-checked with :func:`moralkit.psm.rp.garp` before it is returned, so
the lower bound is exact and the upper bound is the solver's certificate. The
tests compare it with brute force over every subset, with revpref's and
prefgraph's exact Houtman–Maks on consumer data, and with the MILP of
Demuynck and Rehbeck (2023) through Pyomo.

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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numba import njit

from ..errors import MoralkitError
from . import rp

__all__ = [
    "HoutmanMaksResult",
    "houtman_maks",
    "houtman_maks_at_least",
    "houtman_maks_index",
    "houtman_maks_upper_bound",
]


@dataclass(frozen=True)
class HoutmanMaksResult:
    """Outcome of :func:`houtman_maks`.

    Attributes
    ----------
    index : fractions.Fraction
        ``n_kept / T``, exactly (1 for a dataset that satisfies GARP_e).
    n_kept, T : int
        Size of the largest GARP_e-consistent subset, and the number of rounds.
    kept : ndarray of int
        One largest consistent subset (round positions, ascending).
    e : fractions.Fraction
        The rationality level used (a float is the exact binary number it holds).
    n_cuts, n_solves : int
        Cycle cuts generated and master problems solved.
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

    @property
    def removed(self) -> np.ndarray:
        """The rounds left out (the complement of :attr:`kept`)."""
        return np.setdiff1d(np.arange(self.T), self.kept)

    def __float__(self) -> float:
        return float(self.index)


@njit(cache=True)
def _shortest_violating_cycles(R, P, inc):
    """For every strict edge ``u P0 v`` between included rounds that lies on a cycle within
    ``inc``: a shortest such cycle (u -> v, then a shortest R0 path back from v to u).

    Returns (flat, starts): the rounds of cycle c are ``flat[starts[c]:starts[c + 1]]``.
    """
    n = R.shape[0]
    dist = np.empty(n, np.int64)
    prev = np.empty(n, np.int64)
    queue = np.empty(n, np.int64)
    flat = np.empty(n * n, np.int64)
    starts = np.zeros(n + 1, np.int64)
    nc = 0
    pos = 0
    for v in range(n):
        if not inc[v]:
            continue
        for i in range(n):
            dist[i] = -1
        dist[v] = 0
        prev[v] = -1
        head = 0
        tail = 1
        queue[0] = v
        while head < tail:
            a = queue[head]
            head += 1
            for b in range(n):
                if inc[b] and dist[b] < 0 and R[a, b]:
                    dist[b] = dist[a] + 1
                    prev[b] = a
                    queue[tail] = b
                    tail += 1
        for u in range(n):
            if inc[u] and u != v and P[u, v] and dist[u] >= 0:
                if pos + dist[u] + 1 > flat.shape[0]:  # grow the buffer
                    bigger = np.empty(2 * flat.shape[0] + n, np.int64)
                    bigger[:pos] = flat[:pos]
                    flat = bigger
                if nc + 2 > starts.shape[0]:
                    s2 = np.zeros(2 * starts.shape[0], np.int64)
                    s2[:nc + 1] = starts[:nc + 1]
                    starts = s2
                w = u
                while w != -1:
                    flat[pos] = w
                    pos += 1
                    w = prev[w]
                nc += 1
                starts[nc] = pos
    return flat[:pos].copy(), starts[:nc + 1].copy()


def _scc_labels(R0):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    return connected_components(csr_matrix(R0), directed=True, connection="strong")[1]


def _solve_master(n, cuts, time_limit):
    """max sum y s.t. sum_{i in C} y_i <= |C| - 1 for every cut C (y binary)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    rows = np.concatenate([np.full(len(c), k) for k, c in enumerate(cuts)])
    cols = np.concatenate(cuts)
    A = csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(cuts), n))
    ub = np.array([len(c) - 1 for c in cuts], dtype=float)
    opts = {"mip_rel_gap": 0.0, "presolve": True}
    if time_limit is not None:
        opts["time_limit"] = float(time_limit)
    res = milp(c=-np.ones(n), integrality=np.ones(n), bounds=Bounds(0, 1),
               constraints=[LinearConstraint(A, -np.inf, ub)], options=opts)
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"the Houtman–Maks master problem was not solved to optimality ({res.message}); "
                           "raise time_limit")
    return np.round(res.x).astype(bool)


def _solve_component(R0, P0, nodes, time_limit, deadline):
    """Largest GARP_e-consistent subset of the rounds ``nodes`` (one SCC of the full R0 graph)."""
    R = np.ascontiguousarray(R0[np.ix_(nodes, nodes)])
    P = np.ascontiguousarray(P0[np.ix_(nodes, nodes)])
    n = len(nodes)
    u, v = np.nonzero(P & R.T)  # violating 2-cycles: u P0 v and v R0 u
    seen = set()
    cuts = []
    for a, b in zip(u, v):
        key = (min(a, b), max(a, b))
        if key not in seen:
            seen.add(key)
            cuts.append(np.array(key, dtype=np.int64))
    y = np.ones(n, dtype=bool)
    n_solves = 0
    while True:
        if cuts:
            left = None if deadline is None else max(1.0, deadline - time.perf_counter())
            y = _solve_master(n, cuts, left if time_limit is not None else None)
            n_solves += 1
        flat, starts = _shortest_violating_cycles(R, P, y)
        new = 0
        for c in range(len(starts) - 1):
            cyc = np.unique(flat[starts[c]:starts[c + 1]])
            key = tuple(cyc.tolist())
            if key not in seen:
                seen.add(key)
                cuts.append(cyc)
                new += 1
        if len(starts) == 1:  # no violating cycle left: y is optimal
            return nodes[y], len(cuts), n_solves
        if new == 0:  # pragma: no cover - a violating cycle is never a known cut of a feasible y
            raise RuntimeError("Houtman–Maks cut generation made no progress; please report this dataset")
        if deadline is not None and time.perf_counter() > deadline:
            raise RuntimeError(f"Houtman–Maks stopped at time_limit={time_limit} s before proving optimality")


def houtman_maks(E, e=1, *, time_limit: float | None = None) -> HoutmanMaksResult:
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
        Seconds; a computation stopped by it raises ``RuntimeError`` (no
        unproven value is ever returned).

    Returns
    -------
    HoutmanMaksResult
        ``.index`` (a Fraction), ``.n_kept``, ``.kept``, ``.removed``.

    Raises
    ------
    ValueError
        On a malformed expenditure matrix or ``e`` outside [0, 1].

    References
    ----------
    Houtman and Maks (1985); Seror (2025), Section 2.2 and footnote 6;
    Smeulders et al. (2014) (NP-hardness).

    Examples
    --------
    >>> import numpy as np
    >>> E = np.array([[12, 8, 20], [8, 12, 20], [20, 20, 12]])  # rounds 0 and 1 reveal each other strictly
    >>> r = houtman_maks(E)
    >>> r.index, r.n_kept, r.removed.tolist()
    (Fraction(2, 3), 2, [1])
    """
    t0 = time.perf_counter()
    if hasattr(E, "valid") and hasattr(E, "chosen"):
        E = rp.psm_expenditure_matrix(E)
    E = rp.validate_expenditure_matrix(E)
    if time_limit is not None and not time_limit > 0:
        raise MoralkitError(f"time_limit must be a positive number of seconds, got {time_limit}")
    ef = _as_fraction(e)
    T = len(E)
    if T == 0:
        raise MoralkitError("the dataset has no rounds; the Houtman–Maks index needs at least one")
    R0, P0 = rp.relations(E, ef)
    lab = _scc_labels(R0)
    keep = np.ones(T, dtype=bool)
    deadline = None if time_limit is None else t0 + time_limit
    n_cuts = n_solves = 0
    r, k = np.nonzero(P0)
    bad = np.unique(lab[r][lab[r] == lab[k]])
    for c in bad:
        nodes = np.nonzero(lab == c)[0]
        kept, nc, ns = _solve_component(R0, P0, nodes, time_limit, deadline)
        keep[nodes] = False
        keep[kept] = True
        n_cuts += nc
        n_solves += ns
    kept = np.nonzero(keep)[0]
    if not rp.garp(E[np.ix_(kept, kept)], ef):  # pragma: no cover - guarded by construction
        raise RuntimeError("internal error: the Houtman–Maks subset violates GARP_e")
    return HoutmanMaksResult(index=Fraction(len(kept), T), n_kept=len(kept), T=T, kept=kept, e=ef,
                             n_cuts=n_cuts, n_solves=n_solves, wall_s=time.perf_counter() - t0)


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

    Vertex-disjoint GARP_e-violating cycles are packed greedily, shortest first;
    each needs at least one of its rounds removed, so ``T - (number packed)``
    bounds the Houtman–Maks count from above.

    Examples
    --------
    >>> import numpy as np
    >>> houtman_maks_upper_bound(np.array([[12, 8, 20], [8, 12, 20], [20, 20, 12]]))
    2
    """
    E = rp.validate_expenditure_matrix(E)
    R0, P0 = rp.relations(E, _as_fraction(e))
    T = len(E)
    free = np.ones(T, dtype=bool)
    packed = 0
    while True:
        flat, starts = _shortest_violating_cycles(R0, P0, free)
        if len(starts) == 1:
            return T - packed
        cycles = sorted((flat[starts[c]:starts[c + 1]] for c in range(len(starts) - 1)), key=len)
        for cyc in cycles:
            if free[cyc].all():
                free[cyc] = False
                packed += 1


def houtman_maks_at_least(E, k: int, e=1, *, time_limit: float | None = None) -> bool | None:
    """Whether some ``k`` rounds satisfy GARP_e together (HM count >= k), deciding by the bound first.

    Returns True or False, or None when the exact computation was stopped by
    ``time_limit`` before deciding (never a guess).
    """
    if k <= 0:
        return True
    if houtman_maks_upper_bound(E, e) < k:
        return False
    try:
        return houtman_maks(E, e, time_limit=time_limit).n_kept >= k
    except RuntimeError:
        return None
