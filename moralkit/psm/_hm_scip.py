"""The branch-and-cut of :mod:`moralkit.psm.houtman_maks` in SCIP (PySCIPOpt), for one strongly connected
component, with its incumbents (a greedy subset and the combinatorial branch-and-bound of
:mod:`moralkit.psm._hm_kernels`).

``R`` and ``P`` are the boolean relations ``R0_e`` and ``P0_e`` of one component; ``y_i`` = 1 keeps
round i. See :mod:`moralkit.psm.houtman_maks` for the method and its references.
"""

from __future__ import annotations

import time

import numpy as np

from ._hm_kernels import (
    greedy_cliques,
    greedy_consistent,
    lightest_violating_cycles,
    local_conflicts,
    max_consistent_bnb,
    shortest_violating_cycles,
)

__all__ = ["DECISION_NODES", "HEUR_NODES", "solve_component_scip"]

_EPS = 1e-6
# Measured on T = 160 random choosers (benchmarks/bench_houtman_maks.py): SCIP's general-purpose cut
# separators and large-neighbourhood heuristics cost more than they gain on this pure 0-1 packing
# problem, and a restart throws the cycle cuts away.
_DEFAULT_PARAMS = {
    **{f"separating/{s}/freq": -1 for s in ("gomory", "aggregation", "mcf", "zerohalf", "cmir")},
    **{f"heuristics/{h}/freq": -1 for h in ("shiftandpropagate", "rens", "rins", "alns", "locks")},
    "presolving/maxrestarts": 0,
    # Reliability branching: fewer strong-branching probes per variable (maxreliable 2, SCIP's default 5) and
    # the inference history weighted as much as the pseudo-costs (inferenceweight 1, default 1e-4): a round
    # whose fixing propagated many cycle rows is a good branching candidate here. Measured (process CPU,
    # alternated, 2026-11-26 19:05 UTC, one other core busy): noise-1.0 agent 11.3/12.0 -> 9.3/10.0 s (1,915
    # -> 2,185 nodes), random chooser 5.9/6.8 -> 5.4/5.0 s, every committed LLM run 13-49 % less CPU; the same
    # optima. Strong branching had been about half of a Table 1 decision's time.
    "branching/relpscost/maxreliable": 2.0,
    "branching/relpscost/inferenceweight": 1.0,
}


# Fractional cycle cuts: one lightest cycle per round, not one per strict edge. Measured on the 94-round
# LLM run (smollm2, load ~27): SCIP's CPU time fell from 1.61 to 1.34 s, separation from 4.4 to 2.0 s
# wall, nodes from 272 to 139.
_ALL_EDGES = False

# Local clique cuts below the root (:func:`local_clique_rows`), once per node. Measured on T = 160
# (benchmarks/bench_houtman_maks.py --reps 1, process CPU seconds and SCIP nodes, load 4-7, 2026-11-26),
# before -> after: noise-1.0 agent 23.6 s (4,884 nodes) -> 13.3 s (1,915); random chooser 7.8 (1,084) ->
# 7.4 (498); the 0.5B runs care 12.3 -> 7.8, deontological 19.6 -> 9.2, utilitarian 14.6 -> 9.0, s1 8.9
# -> 8.8 (892 -> 962 nodes), plain 9.0 -> 6.3; 1.5B 4.2 -> 4.0; smollm2 1.1 -> 0.8; the 12 decisions
# of ``--decisions qwen2.5-coder-0.5b-instruct:12:41`` 5.5 -> 3.3 s each (mean), the same answers. At
# every separation round instead of once per node: fewer nodes (noise 1.0: 1,679) but s1 12.3 s.
_LOCAL_CLIQUES = True


def _add_cuts(model, tvars, rows, local=False):
    """Add the efficacious rows ``sum_{i in key} y_i <= rhs`` as cuts (``local``: valid in the current
    node's subtree only); whether any was added."""
    added = False
    for key, rhs in rows:
        row = model.createEmptyRowUnspec(name="cc", lhs=None, rhs=rhs, local=local, removable=True)
        model.cacheRowExtensions(row)
        for i in key:
            model.addVarToRow(row, tvars[i], 1.0)
        model.flushRowExtensions(row)
        if model.isCutEfficacious(row):
            model.addCut(row)
            added = True
        model.releaseRow(row)
    return added


# The violating 2-cycles are stated as a maximal-clique cover, not one row per pair. Measured on the random
# chooser (T = 160, process CPU time, load ~16): 19.4 -> 11.0 s, 1,741 -> 1,084 nodes; every maximal clique
# (networkx) instead: 11.5 s, 1,209 nodes. On the noise-1.0 agent it costs more nodes (6,492 -> 7,238).
def clique_cover(conflict):
    """Maximal cliques of the symmetric boolean matrix ``conflict`` that together cover each of its edges
    (greedy: from each uncovered edge, grow a clique by common neighbours, uncovered edges first)."""
    n = conflict.shape[0]
    uncovered = np.triu(conflict, 1)
    uncovered = uncovered | uncovered.T
    out = []
    for a in np.argsort(-conflict.sum(axis=1), kind="stable"):
        while uncovered[a].any():
            b = int(np.argmax(uncovered[a]))
            q = [int(a), b]
            common = conflict[a] & conflict[b]
            while common.any():
                cand = np.nonzero(common)[0]
                score = uncovered[np.ix_(cand, q)].sum(axis=1) * n + conflict[cand].sum(axis=1)
                c = int(cand[np.argmax(score)])
                q.append(c)
                common &= conflict[c]
            for i in q:
                uncovered[i, q] = False
            out.append(sorted(q))
    return out


def local_clique_rows(R, P, y, fixed):
    """Clique cuts valid in a node's subtree, from the rounds its branching keeps (``fixed``: local
    lower bound 1): rows ``(key, 1)`` meaning ``sum_{i in key} y_i <= 1``.

    Two rounds a, b conflict if the fixed rounds F plus a and b hold a GARP_e-violating cycle (checked
    exactly, of any length: :func:`local_conflicts`), so a consistent subset that keeps F keeps at
    most one round of a clique of such conflicts. The cliques of fractional rounds heavier than 1 at
    ``y`` (greedy, :func:`greedy_cliques`) are returned. A cycle cut through F and a, b at ``y_a = y_b =
    1/2`` is not violated (its weight is 1), the half-integral point the cycle formulation stalls at;
    three such rounds pairwise in conflict give a violated clique cut.
    """
    frac = np.nonzero((y > _EPS) & (y < 1.0 - _EPS))[0].astype(np.int64)
    if len(frac) < 3:  # (as measured: cliques of three or more fractional rounds)
        return []
    conf = local_conflicts(R, P, np.nonzero(fixed)[0].astype(np.int64), frac)
    flat, starts = greedy_cliques(conf, y[frac], 1.0 + 1e-3)
    rows, seen = [], set()
    for c in range(len(starts) - 1):
        key = np.sort(frac[flat[starts[c]:starts[c + 1]]])
        if key.tobytes() not in seen:
            seen.add(key.tobytes())
            rows.append((key, 1))
    return rows


def _conshdlr_class():
    from pyscipopt import SCIP_RESULT, Conshdlr, quicksum

    class GarpCycles(Conshdlr):
        """GARP_e on the kept rounds as a constraint handler: lazy cycle constraints at integral
        points (exact check), cycle cuts at fractional points (``lightest_violating_cycles``) and,
        below the root, local clique cuts (:func:`local_clique_rows`)."""

        def __init__(self, R, P, y):
            self.R, self.P, self.y = R, P, y
            self.seen = set()
            self.n_cuts = 0
            self.tvars = None
            self.all_edges, self.max_cuts = _ALL_EDGES, None
            self.local_cliques, self.last_node = _LOCAL_CLIQUES, -1

        def _values(self, sol=None, lp=False):
            if lp and self.tvars is None:  # lp: the current LP solution (at enforcement and separation)
                self.tvars = [self.model.getTransformedVar(v) for v in self.y]
            return np.array([v.getLPSol() for v in self.tvars] if lp else [self.model.getSolVal(sol, v) for v in self.y])

        def _new_cycles(self, flat, starts):
            out = []
            for c in range(len(starts) - 1):
                key = tuple(sorted(flat[starts[c]:starts[c + 1]].tolist()))
                if key not in self.seen:
                    self.seen.add(key)
                    out.append(key)
            return out

        def _violations(self, sol=None, lp=False):
            inc = self._values(sol, lp) > 0.5
            return shortest_violating_cycles(self.R, self.P, inc)

        def _enforce(self, sol=None, lp=False):
            flat, starts = self._violations(sol, lp)
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
            return self._enforce(lp=True)

        def consenfops(self, constraints, nusefulconss, solinfeasible, objinfeasible):
            return self._enforce()

        def consenforelax(self, solution, constraints, nusefulconss, solinfeasible):
            return self._enforce(solution)

        def conssepalp(self, constraints, nusefulconss):
            y = self._values(lp=True)
            rows = []
            flat, starts, w = lightest_violating_cycles(self.R, self.P, y, 1.0 - 1e-3, self.all_edges)
            seen = set()
            for c in np.argsort(w, kind="stable")[:self.max_cuts]:  # the most violated first
                key = np.sort(flat[starts[c]:starts[c + 1]])  # a simple cycle: its rounds are distinct
                if key.tobytes() not in seen:
                    seen.add(key.tobytes())
                    rows.append((key, len(key) - 1))
            added = _add_cuts(self.model, self.tvars, rows)
            node = self.model.getCurrentNode().getNumber()
            if self.local_cliques and self.model.getDepth() > 0 and node != self.last_node:  # once per node
                self.last_node = node
                fixed = np.array([v.getLbLocal() > 0.5 for v in self.tvars])
                added = _add_cuts(self.model, self.tvars, local_clique_rows(self.R, self.P, y, fixed), True) or added
            return {"result": SCIP_RESULT.SEPARATED if added else SCIP_RESULT.DIDNOTFIND}

        def conslock(self, constraint, locktype, nlockspos, nlocksneg):
            for v in self.y:  # keeping a round more can violate GARP_e: rounding y up is locked
                self.model.addVarLocksType(v, locktype, nlocksneg, nlockspos)

    return GarpCycles


# Nodes of the combinatorial branch-and-bound before SCIP takes over (a node budget, not a time, keeps
# the result independent of the machine's load). 3,000 nodes cost ~0.02 s on a T = 160 near-random
# component and find a larger first incumbent: on the noise-1.0 agent 43 rounds instead of 39 (optimum
# 45), 7,238 -> 4,884 SCIP nodes, 32.3 -> 19.8 s CPU (load ~6); the LLM runs and the random chooser
# within +-10 % (one 0.5B persona 13.0 -> 15.3 s), smollm2 1.3 -> 0.7 s (scratch runs, 2026-11-26).
# A decision gets the same budget, since the subset it looks for often ends the search.
HEUR_NODES = 3_000
DECISION_NODES = 3_000


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


def solve_component_scip(R, P, time_limit, target=None, seed=0, start=None, params=None, stats=None):
    """Largest GARP_e-consistent subset of one SCC by branch-and-cut in SCIP.

    Returns (kept bool array, upper bound, optimal, n_cuts, n_nodes). With ``target``,
    the search stops as soon as ``target`` rounds are kept (then ``optimal`` is False
    unless the bound also closed).
    """
    from pyscipopt import Model, quicksum

    t0 = time.perf_counter()
    n = R.shape[0]
    two = P & R.T
    best = _greedy(R, P, seed, start)
    # the combinatorial branch-and-bound: on small or easy components it proves the optimum by
    # itself; otherwise its incumbent (often the optimum on near-random data) starts SCIP
    left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
    floor = None if target is None else int(target) - 1  # decide ">= target": only larger subsets matter
    budget = HEUR_NODES if target is None else DECISION_NODES
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
    all_edges, max_cuts = params.pop("_all_edges", _ALL_EDGES), params.pop("_max_cuts", None)
    cliques = params.pop("_cliques", True)
    local_cliques = params.pop("_local_cliques", _LOCAL_CLIQUES)
    for key, val in params.items():
        m.setParam(key, val)
    y = [m.addVar(f"y{i}", vtype="B", obj=1.0) for i in range(n)]
    m.setMaximize()
    u, v = np.nonzero(np.triu(two | two.T))  # the violating 2-cycles
    for q in (clique_cover(two | two.T) if cliques else zip(u.tolist(), v.tolist())):
        m.addCons(quicksum(y[i] for i in q) <= 1)
    hdlr = _conshdlr_class()(R, P, y)
    hdlr.all_edges, hdlr.max_cuts, hdlr.local_cliques = all_edges, max_cuts, local_cliques
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
