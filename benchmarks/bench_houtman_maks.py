"""Benchmark: the exact Houtman–Maks index per T = 160 PSM dataset (moralkit.psm.houtman_maks).

Datasets: SIMULATED quadratic agents with logit noise 0.05 / 0.3 / 1.0 and a uniformly random
chooser (moralkit.psm.simulate), then the committed real runs in data/psm (small local LLMs whose
answers are close to random). For each: the branch-and-cut (``method="scip"``, the default),
median of ``--reps`` runs, and the earlier cut loop over HiGHS (``method="cuts"``) once, in the
same run, stopped at ``--cuts-time-limit`` seconds (reported as not finished, never as a value).
A first call on a small matrix compiles (or loads) the numba kernels; its time is reported
separately (``compile``). Each run's process CPU time is recorded beside its wall time (``cpu_s``):
on the shared machine the wall time grows with the load, the CPU time much less. The time limit is
on the wall clock.

With ``--decisions MODEL:N:K`` it times instead the decision "HM count >= K"
(``houtman_maks_decision``) on the first N of MODEL's random datasets of Table 1 (answers drawn
uniformly on MODEL's answered rounds, ``moralkit.psm.random_datasets``, seed 0, chunk 0): process CPU
and wall seconds per decision, their mean and median, and how many were True.

Usage::

    .venv/bin/python benchmarks/bench_houtman_maks.py [--reps 3] [--cuts-time-limit 120] [--no-real] [--only NAME,...]
    .venv/bin/python benchmarks/bench_houtman_maks.py --decisions qwen2.5-coder-0.5b-instruct:12:41

Every figure is one line ``BENCH {json}`` (benchmarks/_record.py), with the date and the load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _record import emit, load  # noqa: E402

from moralkit.psm import rp  # noqa: E402
from moralkit.psm.design import make_design  # noqa: E402
from moralkit.psm.houtman_maks import houtman_maks  # noqa: E402
from moralkit.psm.simulate import random_quadratic_agent, simulate_quadratic, simulate_random  # noqa: E402


def datasets(real=True):
    d = make_design(0)
    data = {f"sim-noise{n}": simulate_quadratic(random_quadratic_agent(i), d, noise=n, seed=i)
            for i, n in enumerate([0.05, 0.3, 1.0])}
    data["sim-random"] = simulate_random(d, seed=9)
    if real:
        from moralkit.psm.dataset import read_psm

        data.update(read_psm(Path(__file__).resolve().parents[1] / "data" / "psm"))
    return data


def decisions(spec):
    """Time ``houtman_maks_decision(E, K)`` on the first N random datasets of MODEL (``MODEL:N:K``)."""
    import numpy as np

    from moralkit.psm.dataset import read_psm
    from moralkit.psm.houtman_maks import houtman_maks_decision
    from moralkit.psm.random_datasets import answered_part, chunk_choices

    model, n, k = spec.rsplit(":", 2)
    n, k = int(n), int(k)
    ds = answered_part(read_psm(Path(__file__).resolve().parents[1] / "data" / "psm")[model])
    T, n_opt = ds.options.shape[:2]
    V = rp.option_expenditures(ds.corners, ds.prices, ds.options).astype(np.int64)
    houtman_maks_decision(V[:20, :20, 0], 5)  # numba kernels: compile or load
    l0 = load()
    cpu, wall, res = [], [], []
    for row in chunk_choices(0, ds.model, 0, n, T, n_opt):
        c0, t0 = time.process_time(), time.perf_counter()
        d = houtman_maks_decision(V[:, np.arange(T), row], k)
        cpu.append(round(time.process_time() - c0, 3))
        wall.append(round(time.perf_counter() - t0, 3))
        res.append(d.at_least)
    emit("houtman_maks_decision", f"{model}:k={k}", l0, n=n, k=k, T=int(T), n_true=sum(r is True for r in res),
         n_undecided=sum(r is None for r in res), cpu_s=cpu, cpu_s_mean=round(statistics.mean(cpu), 3),
         cpu_s_median=statistics.median(cpu), wall_s_mean=round(statistics.mean(wall), 3),
         wall_s_median=statistics.median(wall))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=600.0, help="per branch-and-cut run")
    ap.add_argument("--cuts-time-limit", type=float, default=120.0, help="the earlier method (0: skip it)")
    ap.add_argument("--no-real", action="store_true", help="skip the committed LLM runs")
    ap.add_argument("--only", default=None, help="comma-separated dataset names")
    ap.add_argument("--decisions", default=None, metavar="MODEL:N:K",
                    help="time instead the decisions 'HM count >= K' on MODEL's first N random datasets")
    args = ap.parse_args(argv)
    if args.decisions:
        return decisions(args.decisions)
    data = datasets(not args.no_real)
    if args.only:
        data = {k: v for k, v in data.items() if k in args.only.split(",")}
    l0 = load()
    t = time.perf_counter()
    houtman_maks(rp.psm_expenditure_matrix(data[next(iter(data))])[:20, :20])  # numba kernels: compile or load
    emit("houtman_maks", "compile", l0, s=round(time.perf_counter() - t, 3),
         note="first call in a fresh process: numba compiles, or loads its on-disk cache")
    for name, ds in data.items():
        l0 = load()
        times, cpu, res = [], [], None
        for _ in range(args.reps):
            c0 = time.process_time()
            res = houtman_maks(ds, time_limit=args.time_limit)
            cpu.append(round(time.process_time() - c0, 3))
            times.append(round(res.wall_s, 3))
        cuts = None
        if args.cuts_time_limit > 0:
            c = houtman_maks(ds, time_limit=args.cuts_time_limit, method="cuts")
            cuts = {"s": round(c.wall_s, 3), "finished": c.optimal, "time_limit_s": args.cuts_time_limit,
                    "n_kept": c.n_kept, "n_upper": c.n_upper}
            if c.optimal and c.n_kept != res.n_kept:  # pragma: no cover - two exact methods disagree
                raise SystemExit(f"{name}: cuts {c.n_kept} != scip {res.n_kept}")
        emit("houtman_maks", name, l0, T=res.T, ccei=str(rp.ccei_exact(ds)), hm=f"{res.n_kept}/{res.T}",
             optimal=res.optimal, n_upper=res.n_upper, scip_s_median=statistics.median(times), scip_s=times,
             scip_nodes=res.n_solves, cpu_s=cpu, cpu_s_median=statistics.median(cpu), time_limit_s=args.time_limit,
             cuts=cuts)


if __name__ == "__main__":
    main()
