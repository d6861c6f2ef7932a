"""Bounds and the cross-check of :mod:`moralkit.psm.houtman_maks` (one strongly connected component).

``R`` and ``P`` are the boolean relations ``R0_e`` and ``P0_e`` of one component. Every
GARP_e-violating cycle needs one of its rounds removed, so vertex-disjoint violating cycles
bound the Houtman–Maks count from above (:func:`disjoint_cycles`). :func:`solve_component_cuts`
is the earlier exact method, a cut loop over HiGHS, kept as an independent cross-check of the
branch-and-cut (:mod:`moralkit.psm._hm_scip`).
"""

from __future__ import annotations

import time

import numpy as np

from ._hm_kernels import greedy_consistent, shortest_violating_cycles

__all__ = ["disjoint_cycles", "packing", "solve_component_cuts", "two_cycle_matching"]


def disjoint_cycles(R, P):
    """The more of two greedy packings of vertex-disjoint violating cycles (each costs one round)."""
    return max(packing(R, P), two_cycle_matching(R, P))


def two_cycle_matching(R, P):
    """A greedy maximal matching of violating 2-cycles: vertex-disjoint violating cycles, found in O(n^2)."""
    two = (P & R.T) | (P & R.T).T
    free = np.ones(R.shape[0], dtype=bool)
    m = 0
    for a in np.argsort(two.sum(axis=1), kind="stable"):  # rounds with few conflicts first
        if free[a]:
            b = np.nonzero(two[a] & free)[0]
            if len(b):
                free[a] = free[b[0]] = False
                m += 1
    return m


def packing(R, P):
    """Vertex-disjoint violating cycles packed greedily, shortest first (each costs one round)."""
    free = np.ones(R.shape[0], dtype=bool)
    packed = 0
    while True:
        flat, starts = shortest_violating_cycles(R, P, free)
        if len(starts) == 1:
            return packed
        cycles = sorted((flat[starts[c]:starts[c + 1]] for c in range(len(starts) - 1)), key=len)
        for cyc in cycles:
            if free[cyc].all():
                free[cyc] = False
                packed += 1


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
    if res.status == 1:  # the time limit stopped HiGHS
        return None
    if res.status != 0 or res.x is None:  # pragma: no cover - the master is always feasible (y = 0)
        raise RuntimeError(f"the Houtman–Maks master problem was not solved ({res.message})")
    return np.round(res.x).astype(bool)


def solve_component_cuts(R, P, time_limit):
    """The earlier method for one SCC: a cut loop whose master problem HiGHS re-solves from scratch.

    Returns (kept bool array, upper bound, status, n_cuts, n_solves); on a time limit, the
    greedy subset and the last master optimum (a relaxation, so an upper bound).
    """
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    n = R.shape[0]
    u, v = np.nonzero(P & R.T)  # violating 2-cycles: u P0 v and v R0 u
    seen = set()
    cuts = []
    for a, b in zip(u, v):
        key = (min(a, b), max(a, b))
        if key not in seen:
            seen.add(key)
            cuts.append(np.array(key, dtype=np.int64))
    y = np.ones(n, dtype=bool)
    upper = n
    n_solves = 0
    while True:
        if cuts:
            left = None if deadline is None else deadline - time.perf_counter()
            if left is not None and left <= 0:
                break
            y = _solve_master(n, cuts, left)
            if y is None:
                break
            upper = int(y.sum())
            n_solves += 1
        flat, starts = shortest_violating_cycles(R, P, y)
        if len(starts) == 1:  # no violating cycle left: y is optimal
            return y, int(y.sum()), "optimal", len(cuts), n_solves
        new = 0
        for c in range(len(starts) - 1):
            cyc = np.unique(flat[starts[c]:starts[c + 1]])
            key = tuple(cyc.tolist())
            if key not in seen:
                seen.add(key)
                cuts.append(cyc)
                new += 1
        if new == 0:  # pragma: no cover - a violating cycle is never a known cut of a feasible y
            raise RuntimeError("Houtman–Maks cut generation made no progress; please report this dataset")
    kept = greedy_consistent(R, P, np.arange(n, dtype=np.int64))
    return kept, upper, "timelimit", len(cuts), n_solves
