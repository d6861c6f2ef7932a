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

   - every violating 2-cycle is a row ``y_a + y_b <= 1`` from the start (SCIP's
     clique machinery then works on these);
   - at an integral point, the kept rounds are checked exactly (a compiled
     breadth-first search per round); a shortest violating cycle through each
     strict edge found is added as a constraint (lazy constraints);
   - at a fractional point, cycle cuts are separated: a cycle is violated iff
     ``sum_{i in C} (1 - y_i) < 1``, so a Dijkstra search with node weights
     ``1 - y`` finds the lightest cycle through each strict edge (numba);
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
from ._hm_kernels import (
    greedy_consistent,
    lightest_violating_cycles,
    max_consistent_bnb,
    rank_cuts,
    shortest_violating_cycles,
)

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


def _solve_component_cuts(R, P, time_limit):
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


# --------------------------------------------------------------------------- branch-and-cut (SCIP)

_EPS = 1e-6
# Measured on T = 160 random choosers (benchmarks/bench_houtman_maks.py): SCIP's general-purpose cut
# separators and large-neighbourhood heuristics cost more than they gain on this pure 0-1 packing
# problem, and a restart throws the cycle cuts away.
_DEFAULT_PARAMS = {
    **{f"separating/{s}/freq": -1 for s in ("gomory", "aggregation", "mcf", "zerohalf", "cmir")},
    **{f"heuristics/{h}/freq": -1 for h in ("shiftandpropagate", "rens", "rins", "alns", "locks")},
    "presolving/maxrestarts": 0,
}


# Fractional cycle cuts: one lightest cycle per round, not one per strict edge. Measured on the 94-round
# LLM run (smollm2, load ~27): SCIP's CPU time fell from 1.61 to 1.34 s, separation from 4.4 to 2.0 s
# wall, nodes from 272 to 139.
_ALL_EDGES = False


def _add_cuts(model, tvars, rows):
    """Add the efficacious rows ``sum_{i in key} y_i <= rhs`` as cuts; whether any was added."""
    added = False
    for key, rhs in rows:
        row = model.createEmptyRowUnspec(name="cc", lhs=None, rhs=rhs, local=False, removable=True)
        model.cacheRowExtensions(row)
        for i in key:
            model.addVarToRow(row, tvars[i], 1.0)
        model.flushRowExtensions(row)
        if model.isCutEfficacious(row):
            model.addCut(row)
            added = True
        model.releaseRow(row)
    return added


def _conshdlr_class():
    from pyscipopt import SCIP_RESULT, Conshdlr, quicksum

    class GarpCycles(Conshdlr):
        """GARP_e on the kept rounds as a constraint handler: lazy cycle constraints at integral
        points (exact check), cycle cuts at fractional points (``lightest_violating_cycles``)."""

        def __init__(self, R, P, y):
            self.R, self.P, self.y = R, P, y
            self.seen = set()
            self.n_cuts = 0
            self.tvars = None
            self.rank, self.rank_depth = 0, 0
            self.all_edges, self.max_cuts = _ALL_EDGES, None
            self.conflict = (P & R.T) | (P & R.T).T

        def _values(self, sol=None):
            return np.array([self.model.getSolVal(sol, v) for v in self.y])

        def _new_cycles(self, flat, starts):
            out = []
            for c in range(len(starts) - 1):
                key = tuple(sorted(flat[starts[c]:starts[c + 1]].tolist()))
                if key not in self.seen:
                    self.seen.add(key)
                    out.append(key)
            return out

        def _violations(self, sol=None):
            inc = self._values(sol) > 0.5
            return shortest_violating_cycles(self.R, self.P, inc)

        def _enforce(self, sol=None):
            flat, starts = self._violations(sol)
            if len(starts) == 1:
                return {"result": SCIP_RESULT.FEASIBLE}
            for key in self._new_cycles(flat, starts):
                self.model.addCons(quicksum(self.y[i] for i in key) <= len(key) - 1, name=f"cyc{self.n_cuts}",
                                   removable=False)
                self.n_cuts += 1
            return {"result": SCIP_RESULT.CONSADDED}

        def conscheck(self, constraints, solution, checkintegrality, checklprows, printreason, completely):
            flat, starts = self._violations(solution)
            return {"result": SCIP_RESULT.FEASIBLE if len(starts) == 1 else SCIP_RESULT.INFEASIBLE}

        def consenfolp(self, constraints, nusefulconss, solinfeasible):
            return self._enforce()

        def consenfops(self, constraints, nusefulconss, solinfeasible, objinfeasible):
            return self._enforce()

        def consenforelax(self, solution, constraints, nusefulconss, solinfeasible):
            return self._enforce(solution)

        def conssepalp(self, constraints, nusefulconss):
            y = self._values()
            rows = []
            flat, starts, w = lightest_violating_cycles(self.R, self.P, y, 1.0 - 1e-3, self.all_edges)
            seen = set()
            for c in np.argsort(w, kind="stable")[:self.max_cuts]:  # the most violated first
                key = np.unique(flat[starts[c]:starts[c + 1]])
                if key.tobytes() not in seen:
                    seen.add(key.tobytes())
                    rows.append((key, len(key) - 1))
            if self.rank > 0 and self.model.getDepth() <= self.rank_depth:
                flat, starts, rhs = rank_cuts(self.R, self.P, self.conflict, y, self.rank, 40, 48)
                for c in range(len(starts) - 1):
                    rows.append((flat[starts[c]:starts[c + 1]], int(rhs[c])))
            if self.tvars is None:
                self.tvars = [self.model.getTransformedVar(v) for v in self.y]
            added = _add_cuts(self.model, self.tvars, rows)
            return {"result": SCIP_RESULT.SEPARATED if added else SCIP_RESULT.DIDNOTFIND}

        def conslock(self, constraint, locktype, nlockspos, nlocksneg):
            for v in self.y:  # keeping a round more can violate GARP_e: rounding y up is locked
                self.model.addVarLocksType(v, locktype, nlocksneg, nlockspos)

    return GarpCycles


# Nodes of the combinatorial branch-and-bound before SCIP takes over (a node budget, not a time, keeps
# the result independent of the machine's load). Measured at T = 160 (load ~17): 3,000 nodes cost 0.8 s
# on a near-rational agent whose 81-round component SCIP proves at its root in 0.3 s, so optimisation
# gets a short run (small components still finish in it); a decision gets more, since the subset it
# looks for often ends the search.
_HEUR_NODES = 300
_DECISION_NODES = 3_000


def _bnb(R, P, start, time_limit, max_nodes, stop_at=None, floor=None):
    """:func:`max_consistent_bnb` from the consistent subset ``start``: (kept, n, upper, finished, nodes).

    ``floor``: search only for subsets larger than it (a decision's ``target - 1``); then ``n`` is
    ``max(floor, |kept|)`` and ``kept`` may be smaller than ``n``."""
    two = P & R.T
    order = np.argsort(-(two.sum(axis=0) + two.sum(axis=1)), kind="stable").astype(np.int64)
    kept, n, up, fin, nodes = max_consistent_bnb(
        R, P, order, max(int(start.sum()), -1 if floor is None else int(floor)), start.astype(np.bool_), 0 if stop_at is None else int(stop_at),
        0.0 if time_limit is None else max(float(time_limit), 1e-3), int(max_nodes))
    return kept, int(n), int(up), bool(fin), int(nodes)


def _greedy(R, P, seed=0, start=None):
    """A greedy consistent subset: rounds with few violating 2-cycles first, then a few random orders
    (and ``start``, when given and larger)."""
    rng = np.random.default_rng(seed)
    two = P & R.T
    best = greedy_consistent(R, P, np.argsort(two.sum(axis=0) + two.sum(axis=1), kind="stable").astype(np.int64))
    for _ in range(8):
        cand = greedy_consistent(R, P, rng.permutation(R.shape[0]).astype(np.int64))
        if cand.sum() > best.sum():
            best = cand
    if start is not None and start.sum() > best.sum():
        best = start
    return best


def _solve_component_scip(R, P, time_limit, target=None, seed=0, start=None, params=None, stats=None):
    """Largest GARP_e-consistent subset of one SCC by branch-and-cut in SCIP.

    Returns (kept bool array, upper bound, optimal, n_cuts, n_nodes). With ``target``,
    the search stops as soon as ``target`` rounds are kept (then ``optimal`` is False
    unless the bound also closed).
    """
    from pyscipopt import Model

    t0 = time.perf_counter()
    n = R.shape[0]
    two = P & R.T
    best = _greedy(R, P, seed, start)
    # the combinatorial branch-and-bound: on small or easy components it proves the optimum by
    # itself; otherwise its incumbent (often the optimum on near-random data) starts SCIP
    left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
    floor = None if target is None else int(target) - 1  # decide ">= target": only larger subsets matter
    budget = _HEUR_NODES if target is None else _DECISION_NODES
    kept_b, n_b, up_b, fin, nodes_b = _bnb(R, P, best, left, budget, stop_at=target, floor=floor)
    if target is not None and int(kept_b.sum()) >= target:
        return kept_b, max(up_b, int(kept_b.sum())), "solutionlimit", 0, nodes_b
    if fin:  # proven: nothing larger than the incumbent (or than target - 1)
        return kept_b, n_b, ("optimal" if target is None else "infeasible"), 0, nodes_b
    best = kept_b
    if time_limit is not None and time_limit - (time.perf_counter() - t0) <= 0.001:
        return best, up_b, "timelimit", 0, nodes_b
    m = Model("houtman-maks")
    m.hideOutput()
    m.setParam("randomization/randomseedshift", 0)
    m.setParam("limits/gap", 0.0)
    m.setParam("limits/absgap", 0.0)
    params = {**_DEFAULT_PARAMS, **(params or {})}
    sepafreq = params.pop("_sepafreq", 1)
    rank, rank_depth = params.pop("_rank", 0), params.pop("_rank_depth", 0)
    all_edges, max_cuts = params.pop("_all_edges", _ALL_EDGES), params.pop("_max_cuts", None)
    for key, val in params.items():
        m.setParam(key, val)
    y = [m.addVar(f"y{i}", vtype="B", obj=1.0) for i in range(n)]
    m.setMaximize()
    u, v = np.nonzero(np.triu(two | two.T))  # every violating 2-cycle as a clique row
    for a, b in zip(u.tolist(), v.tolist()):
        m.addCons(y[a] + y[b] <= 1)
    hdlr = _conshdlr_class()(R, P, y)
    hdlr.rank, hdlr.rank_depth = rank, rank_depth
    hdlr.all_edges, hdlr.max_cuts = all_edges, max_cuts
    for a, b in zip(u.tolist(), v.tolist()):
        hdlr.seen.add((a, b))
    m.includeConshdlr(hdlr, "garp_cycles", "GARP_e cycle constraints", sepapriority=1000, enfopriority=-10,
                      chckpriority=-10, sepafreq=sepafreq, needscons=False)
    if target is not None:
        m.setObjlimit(target - 0.5)
        m.setParam("limits/solutions", 1)
    sol = m.createSol()
    for i in range(n):
        m.setSolVal(sol, y[i], float(best[i]))
    m.addSol(sol)
    if time_limit is not None:  # what is left of it once the model is built
        m.setParam("limits/time", max(float(time_limit) - (time.perf_counter() - t0), 0.001))
    m.optimize()
    if stats is not None:
        m.writeStatistics(stats)
    kept = best
    if m.getNSols() > 0:
        s = m.getBestSol()
        cand = np.array([m.getSolVal(s, v) > 0.5 for v in y])
        if cand.sum() > kept.sum():
            kept = cand
    status = m.getStatus()
    if status == "infeasible":  # with an objective limit: nothing reaches target
        upper = int(target) - 1
    else:
        upper = min(n, up_b, int(np.floor(m.getDualbound() + _EPS)))
    return kept, upper, status, hdlr.n_cuts, int(m.getNNodes())


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
    T = len(E)
    R0, P0, comps = _components(E, ef)
    keep = np.ones(T, dtype=bool)
    upper = T
    n_cuts = n_solves = 0
    status = "optimal"
    for nodes in comps:
        R = np.ascontiguousarray(R0[np.ix_(nodes, nodes)])
        P = np.ascontiguousarray(P0[np.ix_(nodes, nodes)])
        left = None if time_limit is None else max(time_limit - (time.perf_counter() - t0), 0.01)
        if method == "scip":
            kept_c, up_c, st, nc, ns = _solve_component_scip(R, P, left)
        else:
            kept_c, up_c, st, nc, ns = _solve_component_cuts(R, P, left)
        if st != "optimal":  # stopped early: the packing bound may be the better one
            up_c = min(up_c, len(nodes) - _disjoint_cycles(R, P))
        keep[nodes] = kept_c
        upper -= len(nodes) - up_c
        n_cuts += nc
        n_solves += ns
        if st != "optimal":
            status = st
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
    return len(E) - _disjoint_cycles(R0, P0)


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
        hi[j] = len(nodes) - _two_cycle_matching(R, P)  # O(n^2); the cycle packing only if it does not decide
    if free + hi.sum() < k:
        return HMDecision(False, "bound")
    for j, (R, P) in enumerate(data):
        hi[j] = min(hi[j], R.shape[0] - _packing(R, P))  # (the matching is already in hi)
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
        kept, up, st, _, _ = _solve_component_scip(R, P, left, target=target)
        lo[j] = max(lo[j], int(kept.sum()))
        hi[j] = min(hi[j], up)
        if free + hi.sum() < k:
            return HMDecision(False, "exact")
        if free + lo.sum() >= k:
            return HMDecision(True, "exact")
    return HMDecision(None, "exact")


def _disjoint_cycles(R, P):
    """The more of two greedy packings of vertex-disjoint violating cycles (each costs one round)."""
    return max(_packing(R, P), _two_cycle_matching(R, P))


def _two_cycle_matching(R, P):
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


def _packing(R, P):
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
