"""Benchmark: LS(e) / Procedure 2 with the exact cut solver vs the Proposition-1 MILP, and the
paper-scale permutation study (7 models, T = 500, rho = 20).

All agents are SIMULATED (moralkit.psm.simulate): four near-rational quadratic agents with different
ideal points (logit noise 0.05) and three noisier ones (0.3, 0.5, 1.0). The rationality level
follows the paper's rule (Section 3.3): the smallest CCEI among the models. A second permutation
study at a stricter e (``--stress-e``, more types per draw) is timed too.

Usage::

    .venv/bin/python benchmarks/bench_partition.py [--milp-instances 2] [--time-limit 120] [--n-jobs 1]

The last line printed is one JSON object with (at least) the keys ``exact_ms_per_partition``,
``milp_highs_s_per_partition`` and ``permutation_paper_scale_s``. MILP times stopped by the time
limit are lower bounds (``milp_<solver>_time_limited`` says so).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from moralkit.psm.design import make_design
from moralkit.psm.milp import find_glpsol, solve_ls_milp
from moralkit.psm.partition import largest_subsets, partition_types, pool
from moralkit.psm.permutation import E_BELOW_CCEI, draw_rounds, permutation_study
from moralkit.psm.rp import ccei
from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic

#: SIMULATED agents: four near-rational quadratic agents with different ideal points, three noisier ones
IDEALS = [(1, 1, 1, 1, 1), (4, 4, 4, 4, 4), (1, 4, 1, 4, 1), (4, 1, 4, 1, 4), (2.5, 2.5, 2.5, 2.5, 2.5),
          (2, 3, 2, 3, 2), (3, 2, 3, 2, 3)]
NOISE = [0.05, 0.05, 0.05, 0.05, 0.3, 0.5, 1.0]


def simulated_agents(seed=0):
    d = make_design(seed)
    return {f"sim-{i}": simulate_quadratic(QuadraticAgent(a=np.ones(5), b=b), d, noise=NOISE[i], seed=seed + i,
                                           model=f"sim-{i}") for i, b in enumerate(IDEALS)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exact-instances", type=int, default=50)
    ap.add_argument("--milp-instances", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per MILP")
    ap.add_argument("--solvers", default="highs,glpk,gurobi")
    ap.add_argument("--T", type=int, default=500)
    ap.add_argument("--rho", type=int, default=20)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--stress-e", type=float, default=0.75)
    ap.add_argument("--small-instances", type=int, default=5)
    ap.add_argument("--small-rho", type=int, default=3)
    args = ap.parse_args(argv)

    ds = simulated_agents(0)
    cc = {m: ccei(x) for m, x in ds.items()}
    e = min(cc.values()) - E_BELOW_CCEI  # Section 3.3's rule; just below the supremum (see default_e)
    print(f"SIMULATED agents (7): CCEI {', '.join(f'{m}={v:.3f}' for m, v in cc.items())}; "
          f"e = just below min CCEI = {e:.6f}")
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")

    inst = [pool(ds, draw_rounds(ds, args.rho, s)) for s in range(max(args.exact_instances, args.milp_instances))]
    print(f"instances: {len(inst)} pooled datasets of {inst[0].n_obs} rounds (rho={args.rho} x 7 models)")

    # warm-up (numba compile / cache load)
    partition_types(inst[0], e, seed=0)

    t = time.perf_counter()
    sizes = [len(largest_subsets(P, e)[0]) for P in inst[:args.exact_instances]]
    ls_ms = 1e3 * (time.perf_counter() - t) / args.exact_instances
    t = time.perf_counter()
    parts = [partition_types(P, e, seed=i) for i, P in enumerate(inst[:args.exact_instances])]
    part_ms = 1e3 * (time.perf_counter() - t) / args.exact_instances
    print(f"exact: {ls_ms:.2f} ms per LS(e), {part_ms:.2f} ms per Procedure-2 partition "
          f"(|LS| distribution {np.bincount(sizes).tolist()}, types per partition "
          f"{np.bincount([p.n_types for p in parts]).tolist()})")

    out = {"exact_ms_per_ls": round(ls_ms, 3), "exact_ms_per_partition": round(part_ms, 3)}
    for solver in [s.strip() for s in args.solvers.split(",") if s.strip()]:
        if solver == "glpk" and find_glpsol() is None:
            print("glpk: not installed, skipped")
            continue
        ls_times, part_times, limited, agree, note = [], [], False, 0, ""
        for i, P in enumerate(inst[:args.milp_instances]):
            t0 = time.perf_counter()
            try:
                within, n_solves, types = list(P.models), 0, []
                while within:
                    r = solve_ls_milp(P, e, within=within, solver=solver, time_limit=args.time_limit)
                    n_solves += 1
                    ls_times.append(r.wall_s)
                    if not r.optimal:
                        limited = True
                        print(f"  {solver} instance {i} step {n_solves}: hit the {args.time_limit:.0f} s time "
                              f"limit ({r.status})")
                        break
                    if n_solves == 1:
                        agree += int(len(r.models) == sizes[i])
                    types.append(r.models)
                    within = [m for m in within if m not in r.models]
                    if not r.models:
                        break
            except ValueError as ex:
                note = str(ex)
                print(f"  {solver}: {note}")
                break
            part_times.append(time.perf_counter() - t0)
            if not limited:
                print(f"  {solver} instance {i}: {n_solves} MILPs, {part_times[-1]:.1f} s, types "
                      f"{[len(t) for t in types]} (exact: {[len(t) for t in parts[i].types]})")
        if note and not part_times:
            out[f"milp_{solver}_s_per_partition"] = None
            out[f"milp_{solver}_note"] = note[:160]
            continue
        out[f"milp_{solver}_s_per_ls"] = round(float(np.mean(ls_times)), 2) if ls_times else None
        out[f"milp_{solver}_s_per_partition"] = round(float(np.mean(part_times)), 2) if part_times else None
        out[f"milp_{solver}_time_limited"] = limited
        n_opt = len(part_times) - (1 if limited else 0) if part_times else 0
        out[f"milp_{solver}_first_ls_agrees"] = f"{agree}/{n_opt} solved" if not limited else "n/a (time limit)"
        if part_times:
            print(f"{solver}: {np.mean(ls_times):.1f} s per LS(e) MILP, {np.mean(part_times):.1f} s per partition"
                  f"{' (lower bound: time limit hit)' if limited else ''}; "
                  f"ratio to exact {1e3 * np.mean(part_times) / part_ms:,.0f}x")
    out.setdefault("milp_highs_s_per_partition", None)

    # small instances every solver can finish (and gurobipy's pip licence can hold): rho = 3 x 7 models
    small = [pool(ds, draw_rounds(ds, args.small_rho, 1000 + s)) for s in range(args.small_instances)]
    t = time.perf_counter()
    small_sizes = [len(largest_subsets(P, e)[0]) for P in small]
    small_ms = 1e3 * (time.perf_counter() - t) / len(small)
    print(f"small instances ({len(small)} x {small[0].n_obs} pooled rounds, rho={args.small_rho}): exact "
          f"{small_ms:.2f} ms per LS(e)")
    out["small_exact_ms_per_ls"] = round(small_ms, 3)
    for solver in [s.strip() for s in args.solvers.split(",") if s.strip()]:
        if solver == "glpk" and find_glpsol() is None:
            continue
        times, agree = [], 0
        try:
            for P, k in zip(small, small_sizes):
                r = solve_ls_milp(P, e, solver=solver, time_limit=args.time_limit)
                times.append(r.wall_s)
                agree += int(r.optimal and len(r.models) == k)
        except ValueError as ex:
            print(f"  {solver}: {ex}")
            continue
        print(f"  {solver}: {np.mean(times):.2f} s per LS(e) MILP ({agree}/{len(small)} agree with the exact "
              f"solver); ratio to exact {1e3 * np.mean(times) / small_ms:,.0f}x")
        out[f"small_milp_{solver}_s_per_ls"] = round(float(np.mean(times)), 3)

    t = time.perf_counter()
    res = permutation_study(ds, e, T=args.T, rho=args.rho, seed=0, n_jobs=args.n_jobs, progress=False)
    wall = time.perf_counter() - t
    off = res.G.to_numpy()[np.triu_indices(7, 1)]
    print(f"permutation study: T={args.T}, rho={args.rho}, 7 models, exact solver, n_jobs={args.n_jobs}: "
          f"{wall:.2f} s (target <= 60 s); off-diagonal G in [{off.min():.2f}, {off.max():.2f}], "
          f"mean {off.mean():.2f}")
    out["permutation_paper_scale_s"] = round(wall, 2)
    out["permutation_mean_types"] = round(float(res.n_types.mean()), 2)
    t = time.perf_counter()
    res2 = permutation_study(ds, args.stress_e, T=args.T, rho=args.rho, seed=0, n_jobs=args.n_jobs, progress=False)
    wall2 = time.perf_counter() - t
    print(f"permutation study at e={args.stress_e}: {wall2:.2f} s, mean types per draw {res2.n_types.mean():.2f}")
    out["permutation_stress_e_s"] = round(wall2, 2)
    out["e"] = round(e, 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
