"""Benchmark: the two changes that make notebook 06_audit cheaper, each against the way it was done before,
measured in one run on the same machine load. Every agent is SIMULATED.

1. Power study (Procedure 1 on quadratic agents at several noise levels). An agent sees the same option
   sets at every noise level, so its random-choice null is the same: it is now drawn once
   (``rationality.retest``) instead of once per noise level (``random_choice_tests`` per level).
2. Convention audit (null distributions of e* outside corner coordinates). e* was computed with
   ``rp.ccei_exact`` (a Fraction refinement); it is now the float of ``rp.ccei`` turned back into the exact
   fraction (``conventions.exact_ratio``).

Both give bit-identical results (checked here too).

Usage::

    .venv/bin/python benchmarks/bench_audit.py [--agents 30] [--levels 8] [--null 40]

The last line printed is one JSON object with the times and the speed-up ratios.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from moralkit.psm import rp
from moralkit.psm.design import make_design
from moralkit.psm.rationality import random_choice_tests, retest
from moralkit.psm.simulate import random_quadratic_agent, simulate_quadratic, simulate_random
from moralkit.studies.conventions import exact_ratio, expenditure_matrix


def power(n_agents, n_levels, n_datasets):
    d = make_design(0)
    agents = [random_quadratic_agent(i) for i in range(n_agents)]
    levels = np.geomspace(0.1, 5, n_levels)
    data = [{f"sim-quadratic-{i}": simulate_quadratic(ag, d, noise=s, seed=100 * i + j, model=f"sim-quadratic-{i}")
             for i, ag in enumerate(agents)} for j, s in enumerate(levels)]
    t0 = time.perf_counter()
    old = [random_choice_tests(x, n_datasets=n_datasets, seed=1) for x in data]
    t_old = time.perf_counter() - t0
    t0 = time.perf_counter()
    first = random_choice_tests(data[0], n_datasets=n_datasets, seed=1)
    new = [first] + [{k: retest(first[k], ds) for k, ds in x.items()} for x in data[1:]]
    t_new = time.perf_counter() - t0
    same = all((o[k].ccei, o[k].alpha) == (n[k].ccei, n[k].alpha) for o, n in zip(old, new) for k in o)
    return t_old, t_new, same


def conventions_null(n):
    d = make_design(0)
    Es = [expenditure_matrix(simulate_random(d, seed=i, model=f"sim-random-{i}"), "origin") for i in range(n)]
    t0 = time.perf_counter()
    old = [rp.ccei_exact(E) for E in Es]
    t_old = time.perf_counter() - t0
    t0 = time.perf_counter()
    new = [exact_ratio(rp.ccei(E)) for E in Es]
    t_new = time.perf_counter() - t0
    return t_old, t_new, old == new


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=30)
    ap.add_argument("--levels", type=int, default=8)
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--null", type=int, default=40)
    a = ap.parse_args()
    p_old, p_new, p_same = power(a.agents, a.levels, a.datasets)
    print(f"power study, {a.agents} agents x {a.levels} noise levels x {a.datasets} random datasets: "
          f"null per level {p_old:.2f} s, shared null {p_new:.2f} s ({p_old / p_new:.1f}x); identical: {p_same}")
    c_old, c_new, c_same = conventions_null(a.null)
    print(f"e* in origin coordinates, {a.null} random respondents: ccei_exact {c_old:.2f} s, "
          f"ccei + exact_ratio {c_new:.2f} s ({c_old / c_new:.1f}x); identical: {c_same}")
    print(json.dumps({"power_old_s": p_old, "power_new_s": p_new, "power_speedup": p_old / p_new,
                      "power_identical": p_same, "convention_old_s": c_old, "convention_new_s": c_new,
                      "convention_speedup": c_old / c_new, "convention_identical": c_same}))


if __name__ == "__main__":
    main()
