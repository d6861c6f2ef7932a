"""Benchmark: notebook 06_audit's heavy cells before and after the changes that made them cheaper,
measured in one run (CPU seconds of this process, ``time.process_time``, so other load on the machine
does not count). Every agent is SIMULATED.

Earlier changes, each timed against the way it was done before:

1. Power study (Procedure 1 on quadratic agents at several noise levels). An agent sees the same option
   sets at every noise level, so its random-choice null is the same: it is drawn once
   (``rationality.retest``) instead of once per noise level (``random_choice_tests`` per level).
2. Convention audit: e* outside corner coordinates was computed with ``rp.ccei_exact`` (a Fraction
   refinement); it is the float of ``rp.ccei`` turned back into the exact fraction
   (``indices.exact_ratio``).

The changes timed cell by cell here (the old implementations live only in this file, patched in for the
"before" runs):

3. ``Design.arrays``: every round's corners and raw options for a round-0 answer in one vectorised step
   (the simulators built them round by round with ``Round.corner`` / ``Round.options``).
4. ``ccei_many.ccei_subsets``: the convention audit's null takes nested subsets of every simulated respondent;
   their CCEIs come from one compiled pass over the respondent's expenditure matrix (each subset was
   copied out with ``np.ix_`` and given to ``rp.ccei``, which ranked all its ratios again).
5. ``level_lists_direct`` (the random-choice test's level lists): one list per distinct raw answer
   (about 40 % of a design's options), shared by the options that have it, and a vectorised cost loop.
6. ``make_design``: one shared (immutable) design per seed; the audit rebuilt the same ten designs
   for every null.
7. ``validate_dataset``'s budget check through the affine form of the costs, and the option-set key of ``retest`` hashing answers as
   bytes. (``power_study`` computing each agent's round-0 answer once is in both runs.)

Every cell's output is compared before/after (identical DataFrames).

Usage::

    .venv/bin/python benchmarks/bench_audit.py            # the notebook's full sizes (~1.5 min CPU)
    .venv/bin/python benchmarks/bench_audit.py --scale 0.2 --cells power,convention_audit

The last line printed is one JSON object with the times and the speed-up ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import time

import numpy as np
from numba import njit

from moralkit.psm import ccei_many, rp
from moralkit.psm import dataset as dataset_module
from moralkit.psm import design as design_module
from moralkit.psm import rationality as rationality_module
from moralkit.psm.design import Design, make_design
from moralkit.psm.indices import exact_ratio, expenditure_matrix
from moralkit.psm.rationality import random_choice_tests, retest
from moralkit.psm.reference import published_table1
from moralkit.psm.simulate import random_quadratic_agent, simulate_quadratic, simulate_random
from moralkit.studies import audit

# --------------------------------------------------------------------------- the old implementations


def _old_arrays(self, q0=None):
    """Design.arrays as the simulators computed it before: round by round."""
    corners = np.stack([r.corner(q0) for r in self])
    prices = np.stack([r.prices for r in self])
    options = np.stack([r.options(q0) for r in self])
    ci = np.array([r.corner_index for r in self])
    pi = np.array([r.price_index for r in self])
    idx = np.array([r.index for r in self])
    return corners, prices, options, ci, pi, idx


def _old_ccei_subsets(E, subsets):
    """ccei_many.ccei_subsets as computed before: each restricted matrix copied out and given to rp.ccei."""
    return np.array([rp.ccei(E[np.ix_(s, s)]) for s in subsets])


@njit(cache=False, nogil=True)
def _old_level_lists_direct(A, b, options, n_levels, budget):
    T, n = options.shape[0], options.shape[1]
    start = np.empty((T, n, n_levels + 1), dtype=np.int64)
    rows = np.empty(T * max(T - 1, 0) * n, dtype=np.int32)
    vbuf = np.empty(T, dtype=np.int64)
    cnt = np.zeros(n_levels + 1, dtype=np.int64)
    bad = np.full(3, -1, dtype=np.int64)
    pos = 0
    for k in range(T):
        for j in range(n):
            q0 = options[k, j, 0]
            q1 = options[k, j, 1]
            q2 = options[k, j, 2]
            q3 = options[k, j, 3]
            q4 = options[k, j, 4]
            cnt[:] = 0
            for r in range(T):
                v = b[r] + A[r, 0] * q0 + A[r, 1] * q1 + A[r, 2] * q2 + A[r, 3] * q3 + A[r, 4] * q4
                if r == k:
                    if v != budget and bad[0] < 0:
                        bad[0] = k
                        bad[1] = j
                        bad[2] = v
                    v = n_levels
                elif v < 0:
                    v = 0
                elif v > n_levels:
                    v = n_levels
                vbuf[r] = v
                cnt[v] += 1
            acc = pos
            for L in range(n_levels):
                start[k, j, L] = acc
                c = cnt[L]
                cnt[L] = acc
                acc += c
            start[k, j, n_levels] = acc
            for r in range(T):
                v = vbuf[r]
                if v < n_levels:
                    rows[cnt[v]] = r
                    cnt[v] += 1
            pos = acc
    return start, rows[:pos], bad


def _old_validate_dataset(ds):
    """validate_dataset as before: the budget checked by an einsum over the answers in corner coordinates."""
    T = len(ds.chosen)
    if ds.corners.shape != (T, 5):
        raise dataset_module.DataError(f"{ds.model}: corners must have shape ({T}, 5), got {ds.corners.shape}")
    if ds.prices.shape != (T, 5):
        raise dataset_module.DataError(f"{ds.model}: prices must have shape ({T}, 5), got {ds.prices.shape}")
    if ds.options.ndim != 3 or ds.options.shape[0] != T or ds.options.shape[2] != 5:
        raise dataset_module.DataError(f"{ds.model}: options must have shape ({T}, n_options, 5), got {ds.options.shape}")
    if not np.isin(ds.corners, (0, 5)).all():
        raise dataset_module.DataError(f"{ds.model}: corners must have entries 0 or 5 (vertices of {{0..5}}^5)")
    if (ds.prices <= 0).any():
        raise dataset_module.DataError(f"{ds.model}: prices must be positive")
    if ds.options.size and (ds.options.min() < 0 or ds.options.max() > 5):
        raise dataset_module.DataError(f"{ds.model}: answers must be integers on the 0-5 scale")
    n_opt = ds.options.shape[1]
    if ((ds.chosen < 0) | (ds.chosen > n_opt)).any():
        raise dataset_module.DataError(f"{ds.model}: chosen option numbers must be 1..{n_opt} (0 = missing round)")
    if ds.q0 is not None and (ds.q0.shape != (5,) or ds.q0.min() < 0 or ds.q0.max() > 5):
        raise dataset_module.DataError(f"{ds.model}: q0 must be five answers on the 0-5 scale")
    if T:
        cost = np.einsum("ts,tns->tn", ds.prices, design_module.to_corner(ds.options, ds.corners[:, None, :]))
        bad = np.argwhere(cost != design_module.BUDGET)
        if len(bad):
            t, n = bad[0]
            raise dataset_module.DataError(
                f"{ds.model}: option {n + 1} of round {ds.round_index[t]} is off the budget: "
                f"p . q_o = {cost[t, n]}, expected {design_module.BUDGET}; every alternative must satisfy eq. (1) "
                "in the round's corner coordinates"
            )


def _old_option_key(v):
    h = hashlib.sha256()
    for a in (v.round_index, v.corners, v.prices, v.options):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    return h.hexdigest()


_PATCHES = [  # (object, attribute, old implementation or a function of the current one)
    (Design, "arrays", _old_arrays),
    (ccei_many, "ccei_subsets", _old_ccei_subsets),
    (rp, "level_lists_direct", _old_level_lists_direct),
    (design_module, "_cached_design", lambda cur: cur.__wrapped__),  # make_design rebuilt designs every call
    (dataset_module, "validate_dataset", _old_validate_dataset),
    (rationality_module, "_option_key", _old_option_key),
]


@contextlib.contextmanager
def old_implementations():
    saved = [getattr(obj, name) for obj, name, _ in _PATCHES]
    for (obj, name, old), cur in zip(_PATCHES, saved):
        setattr(obj, name, old(cur) if name == "_cached_design" else old)
    try:
        yield
    finally:
        for (obj, name, _), cur in zip(_PATCHES, saved):
            setattr(obj, name, cur)


# --------------------------------------------------------------------------- notebook 06's heavy cells


def cells(scale: float):
    def n(x, lo=2):
        return max(lo, int(round(x * scale)))

    t1 = published_table1()
    return {
        "power": lambda: audit.power_study([0.0, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0], n_agents=n(100),
                                           n_random=n(200), n_datasets=1000, seed=0),
        "convention_audit": lambda: audit.convention_audit(t1, n_datasets=n(1000), seed=0),
        "alpha_envelope": lambda: audit.alpha_envelope(t1, n_datasets=n(150), seed=0),
        "rational_agents": lambda: audit.rational_agent_indices(n_agents=n(100), seed=0),
        "nlls_cross_forms": lambda: audit.nlls_cross_forms(n_agents=n(40), seed=0),
        "nlls_recovery": lambda: audit.nlls_recovery(n_agents=n(40), noise_levels=(0.0, 0.3), seed=0),
        "partition_recovery": lambda: audit.partition_recovery(
            rhos=(5, 10, 20), es=(0.2, 0.333, 0.5, 0.667, 0.8, 0.9, 1.0), T=n(200), seed=0),
    }


def _same(a, b):
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b))
    return a.equals(b)


def _cpu(f):
    t0 = time.process_time()
    out = f()
    return time.process_time() - t0, out


def bench_cells(names, scale):
    cs = cells(scale)
    with old_implementations():  # compile / warm both paths before timing
        audit.convention_audit(published_table1(), n_datasets=2, seed=0)
        random_choice_tests({"sim-r": simulate_random(0, seed=0, model="sim-r")}, n_datasets=10)
    audit.convention_audit(published_table1(), n_datasets=2, seed=0)
    random_choice_tests({"sim-r": simulate_random(0, seed=0, model="sim-r")}, n_datasets=10)
    res = {}
    for name in names:
        with old_implementations():
            t_old, old = _cpu(cs[name])
        t_new, new = _cpu(cs[name])
        res[name] = (t_old, t_new, _same(old, new))
        print(f"{name:20s} before {t_old:6.2f} s CPU, after {t_new:6.2f} s CPU ({t_old / t_new:4.1f}x); "
              f"identical: {res[name][2]}", flush=True)
    return res


# --------------------------------------------------------------------------- the earlier changes


def power(n_agents, n_levels, n_datasets):
    d = make_design(0)
    agents = [random_quadratic_agent(i) for i in range(n_agents)]
    levels = np.geomspace(0.1, 5, n_levels)
    data = [{f"sim-quadratic-{i}": simulate_quadratic(ag, d, noise=s, seed=100 * i + j, model=f"sim-quadratic-{i}")
             for i, ag in enumerate(agents)} for j, s in enumerate(levels)]
    t_old, old = _cpu(lambda: [random_choice_tests(x, n_datasets=n_datasets, seed=1) for x in data])

    def shared():
        first = random_choice_tests(data[0], n_datasets=n_datasets, seed=1)
        return [first] + [{k: retest(first[k], ds) for k, ds in x.items()} for x in data[1:]]

    t_new, new = _cpu(shared)
    same = all((o[k].index_value, o[k].alpha) == (n[k].index_value, n[k].alpha) for o, n in zip(old, new) for k in o)
    return t_old, t_new, same


def conventions_null(n):
    d = make_design(0)
    Es = [expenditure_matrix(simulate_random(d, seed=i, model=f"sim-random-{i}"), "origin") for i in range(n)]
    t_old, old = _cpu(lambda: [rp.ccei_exact(E) for E in Es])
    t_new, new = _cpu(lambda: [exact_ratio(rp.ccei(E)) for E in Es])
    return t_old, t_new, old == new


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="sample sizes relative to the notebook's full run")
    ap.add_argument("--cells", default=",".join(cells(1.0)), help="comma-separated cells of notebook 06")
    ap.add_argument("--agents", type=int, default=30)
    ap.add_argument("--levels", type=int, default=8)
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--null", type=int, default=40)
    a = ap.parse_args()
    out = {}
    names = [c for c in a.cells.split(",") if c]
    if names:
        res = bench_cells(names, a.scale)
        t_old, t_new = sum(r[0] for r in res.values()), sum(r[1] for r in res.values())
        print(f"{'all cells above':20s} before {t_old:6.2f} s CPU, after {t_new:6.2f} s CPU ({t_old / t_new:4.1f}x)")
        out["cells"] = {k: {"before_cpu_s": r[0], "after_cpu_s": r[1], "speedup": r[0] / r[1], "identical": r[2]}
                        for k, r in res.items()}
        out["cells_total"] = {"before_cpu_s": t_old, "after_cpu_s": t_new, "speedup": t_old / t_new}
    p_old, p_new, p_same = power(a.agents, a.levels, a.datasets)
    print(f"power study, {a.agents} agents x {a.levels} noise levels x {a.datasets} random datasets: "
          f"null per level {p_old:.2f} s, shared null {p_new:.2f} s ({p_old / p_new:.1f}x); identical: {p_same}")
    c_old, c_new, c_same = conventions_null(a.null)
    print(f"e* in origin coordinates, {a.null} random respondents: ccei_exact {c_old:.2f} s, "
          f"ccei + exact_ratio {c_new:.2f} s ({c_old / c_new:.1f}x); identical: {c_same}")
    out.update({"power_old_s": p_old, "power_new_s": p_new, "power_speedup": p_old / p_new,
                "power_identical": p_same, "convention_old_s": c_old, "convention_new_s": c_new,
                "convention_speedup": c_old / c_new, "convention_identical": c_same})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
