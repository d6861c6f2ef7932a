"""Benchmark: LS(e) / Procedure 2 with the exact cut solver vs the Proposition-1 MILP, and the
paper-scale permutation study (7 models, T = 500, rho = 20).

All agents are SIMULATED (moralkit.psm.simulate): four near-rational quadratic agents with different
ideal points (logit noise 0.05) and three noisier ones (0.3, 0.5, 1.0). The rationality level
follows the paper's rule (Section 3.3): the smallest CCEI among the models. A second permutation
study at a stricter e (``--stress-e``, more types per draw) is timed too.

Usage::

    .venv/bin/python benchmarks/bench_partition.py [--cuts-instances 50] [--milp-instances 2] \
        [--time-limit 120] [--n-jobs 1] [--perm-solvers highs]

At the paper's size (7 models x rho = 20 = 140 pooled rounds, e binding) it times, per LS(e), the
exact solver and every MILP solver with formulation="cuts" (median and max), a few literal
Proposition-1 MILPs (formulation="prop1", under the time limit), and the paper-scale permutation
study with the exact solver and with solver="highs" (max |dG|). The last line printed is one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from moralkit.psm.design import make_design
from moralkit.psm.milp import solve_ls_milp
from moralkit.psm.milp_solvers import find_glpsol
from moralkit.psm.partition import largest_subsets, partition_types
from moralkit.psm.permutation import E_BELOW_CCEI, draw_rounds, permutation_study
from moralkit.psm.pooled import pool
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
    ap.add_argument("--milp-instances", type=int, default=2, help="140-round instances for formulation='prop1'")
    ap.add_argument("--cuts-instances", type=int, default=50, help="140-round instances for formulation='cuts'")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per MILP")
    ap.add_argument("--solvers", default="highs,glpk,gurobi")
    ap.add_argument("--T", type=int, default=500)
    ap.add_argument("--rho", type=int, default=20)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--perm-solvers", default="highs", help="MILP solvers for the paper-scale permutation study")
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
    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    if "glpk" in solvers and find_glpsol() is None:
        print("glpk: not installed, skipped")
        solvers.remove("glpk")
    # per LS(e) at the paper's size, at the paper's rule for e and at the stricter --stress-e (e binds)
    for tag, lev in (("", e), ("stress_", args.stress_e)):
        ex_t, lev_sizes = [], []
        for P in inst[:args.cuts_instances]:
            t = time.perf_counter()
            lev_sizes.append(len(largest_subsets(P, lev)[0]))
            ex_t.append(time.perf_counter() - t)
        out[f"{tag}exact_ms_per_ls_median"] = round(1e3 * float(np.median(ex_t)), 3)
        out[f"{tag}exact_ms_per_ls_max"] = round(1e3 * float(np.max(ex_t)), 3)
        print(f"e = {lev:.6f}: exact per LS(e) on {len(ex_t)} instances of {inst[0].n_obs} rounds: median "
              f"{1e3 * np.median(ex_t):.2f} ms, max {1e3 * np.max(ex_t):.2f} ms (|LS| distribution "
              f"{np.bincount(lev_sizes, minlength=8).tolist()})")
        for solver in solvers:
            times, agree, n_solves = [], 0, []
            try:
                for i, P in enumerate(inst[:args.cuts_instances]):
                    r = solve_ls_milp(P, lev, solver=solver, formulation="cuts", time_limit=args.time_limit)
                    times.append(r.wall_s)
                    n_solves.append(r.n_solves)
                    agree += int(r.optimal and len(r.models) == lev_sizes[i])
            except ValueError as ex:
                print(f"  {solver} cuts: {ex}")
                out[f"{tag}milp_{solver}_cuts_note"] = str(ex)[:160]
            if times:
                out[f"{tag}milp_{solver}_cuts_s_per_ls_median"] = round(float(np.median(times)), 4)
                out[f"{tag}milp_{solver}_cuts_s_per_ls_max"] = round(float(np.max(times)), 4)
                out[f"{tag}milp_{solver}_cuts_agree"] = f"{agree}/{len(times)}"
                print(f"  {solver}, formulation='cuts': median {np.median(times):.3f} s, max {np.max(times):.3f} s "
                      f"per LS(e) ({np.mean(n_solves):.1f} master solves on average); |LS(e)| agrees with the "
                      f"exact solver on {agree}/{len(times)}; median ratio to exact "
                      f"{np.median(times) / np.median(ex_t):,.0f}x")
    # formulation="prop1" (the literal MILP): a few instances at the paper's rule, under the time limit
    for solver in solvers:
        p_times, p_build, p_status, note = [], [], [], ""
        for i, P in enumerate(inst[:args.milp_instances]):
            try:
                r = solve_ls_milp(P, e, solver=solver, formulation="prop1", time_limit=args.time_limit)
            except ValueError as ex:
                note = str(ex)
                print(f"  {solver} prop1: {note}")
                break
            p_times.append(r.wall_s)
            p_build.append(r.build_s)
            ok = r.optimal and len(r.models) == sizes[i]
            p_status.append(r.status if not r.optimal else ("optimal, agrees" if ok else "optimal, DISAGREES"))
            print(f"  {solver} prop1 instance {i} ({inst[0].n_obs} rounds): {r.wall_s:.1f} s including "
                  f"{r.build_s:.1f} s to build the Pyomo model, {p_status[-1]}")
        if note:
            out[f"milp_{solver}_prop1_note"] = note[:160]
        if p_times:
            out[f"milp_{solver}_prop1_s_per_ls"] = [round(x, 2) for x in p_times]
            out[f"milp_{solver}_prop1_build_s"] = [round(x, 2) for x in p_build]
            out[f"milp_{solver}_prop1_status"] = p_status

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
                r = solve_ls_milp(P, e, solver=solver, formulation="prop1", time_limit=args.time_limit)
                times.append(r.wall_s)
                agree += int(r.optimal and len(r.models) == k)
        except ValueError as ex:
            print(f"  {solver}: {ex}")
            continue
        print(f"  {solver} prop1: {np.mean(times):.2f} s per LS(e) MILP ({agree}/{len(small)} agree with the exact "
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
    for solver in [s for s in args.perm_solvers.split(",") if s]:
        for tag, lev, ref in (("", e, res), ("stress_", args.stress_e, res2)):
            t = time.perf_counter()
            resm = permutation_study(ds, lev, T=args.T, rho=args.rho, seed=0, n_jobs=args.n_jobs, progress=False,
                                     solver=solver, formulation="cuts")
            wallm = time.perf_counter() - t
            dG = float(np.abs(resm.G.to_numpy() - ref.G.to_numpy()).max())
            same = bool(np.array_equal(resm.labels, ref.labels))
            print(f"permutation study at e={lev:.6f} with solver={solver!r} (formulation='cuts'): {wallm:.1f} s "
                  f"(exact: {ref.wall_s:.2f} s); max |dG| against the exact solver {dG:g}; every draw's "
                  f"partition identical: {same}")
            out[f"{tag}permutation_{solver}_s"] = round(wallm, 2)
            out[f"{tag}permutation_{solver}_max_abs_dG"] = dG
            out[f"{tag}permutation_{solver}_labels_identical"] = same
    out["permutation_stress_e_s"] = round(wall2, 2)
    out["e"] = round(e, 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
