"""Benchmark: exact CCEI on PSM data (T = 160) and the Table-1-scale random-choice workload.

Measured in one run on the same SIMULATED data (uniformly random respondents and
quadratic-utility agents from :mod:`moralkit.psm.simulate`, never LLM answers):

1. CCEI time per dataset at T = 160, moralkit vs revpref ('warshall', exact) vs
   prefgraph (Rust engine, if installed), printed as ratios. moralkit is timed
   from the raw answers (expenditure matrix + CCEI, one public call per dataset);
   the other tools get the same expenditure matrices written as consumer data
   (goods ``(q, 5 - q)``, prices ``p`` on the statements measured from the
   origin and 0 elsewhere, so that ``P X^T = E`` exactly). prefgraph's public
   ``Engine`` refuses zero prices, so its Rust batch function is called directly
   (one batch call for all datasets: its best case, parallel over the cores).
2. The wall time of the Table-1 workload: 39 models x 1,000 random datasets x
   160 rounds through :func:`moralkit.psm.rationality.table1`, with the number of
   joblib workers (including worker start-up).

The last line printed is one JSON object with keys ``speedup_vs_revpref``,
``speedup_vs_prefgraph`` (null if prefgraph is absent), ``table1_workload_s``
and ``workers``.

Run: ``python benchmarks/bench_rationality.py [--workers N] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def lifted(ds):
    """PSM answers as consumer data with P X^T equal to the corner-coordinate expenditure matrix."""
    q = ds.choices
    P = np.concatenate([ds.prices * (ds.corners == 0), ds.prices * (ds.corners == 5)], 1).astype(float)
    X = np.concatenate([q, 5 - q], 1).astype(float)
    return P, X


def best_of(f, repeat=3):
    best = np.inf
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=-1, help="joblib workers for the Table-1 workload (-1: all cores)")
    ap.add_argument("--quick", action="store_true", help="smaller run (fewer datasets)")
    args = ap.parse_args(argv)

    from joblib import effective_n_jobs

    from moralkit.psm import ccei_many, rp
    from moralkit.psm.design import make_design
    from moralkit.psm.rationality import table1
    from moralkit.psm.simulate import simulate_agents

    design = make_design(0)
    n_data = 20 if args.quick else 100
    data = list(simulate_agents(n_data, "random", design, seed=1).values())
    data = [d.valid() for d in data]
    T = data[0].n_obs
    print(f"data: {n_data} SIMULATED uniformly random respondents, T = {T} rounds each")

    # warm-up (numba JIT / cache load) outside the timings
    rp.ccei(rp.expenditure_matrix(data[0].corners, data[0].prices, data[0].choices))

    def run_moralkit():
        return [rp.ccei(rp.expenditure_matrix(d.corners, d.prices, d.choices)) for d in data]

    t_mk, mk_vals = best_of(run_moralkit)
    t_mk /= n_data
    Es = [rp.psm_expenditure_matrix(d) for d in data]
    t_mk_ccei, _ = best_of(lambda: [rp.ccei(E) for E in Es])
    t_mk_ccei /= n_data
    rounds = (data[0].corners, data[0].prices, data[0].options)
    C = np.random.default_rng(0).integers(0, 100, size=(1000, T))
    ccei_many.ccei_choices(*rounds, C[:2])
    t_batch, _ = best_of(lambda: ccei_many.ccei_choices(*rounds, C, numerators=True))
    t_batch /= len(C)
    print(f"moralkit   : {t_mk * 1e6:9.1f} us/dataset (expenditure matrix + ccei, public API); "
          f"ccei(E) alone {t_mk_ccei * 1e6:.1f} us; batched ccei_choices {t_batch * 1e6:.1f} us")

    users = [lifted(d) for d in data]
    for (P, X), E in zip(users, Es):
        assert np.array_equal(P @ X.T, E)

    # revpref: pure-Python O(T^3) Warshall, a few datasets only
    import revpref

    n_rev = 2 if args.quick else 3
    t0 = time.perf_counter()
    rev_vals = [revpref.RevealedPreference(P, X).ccei("warshall") for P, X in users[:n_rev]]
    t_rev = (time.perf_counter() - t0) / n_rev
    agree_rev = sum(abs(a - b) <= 1e-12 for a, b in zip(rev_vals, mk_vals))
    print(f"revpref    : {t_rev * 1e6:9.1f} us/dataset ('warshall'); agrees on {agree_rev}/{n_rev}")

    speed_pg = None
    try:
        from prefgraph._rust_backend import HAS_RUST, _rust_analyze_batch
    except ImportError:
        HAS_RUST = False
    if HAS_RUST:
        Ps = [np.ascontiguousarray(u[0]) for u in users]
        Xs = [np.ascontiguousarray(u[1]) for u in users]

        def run_pg():
            return _rust_analyze_batch(Ps, Xs, True, False, False, False, False, False, False, False, 1e-10)

        run_pg()
        t_pg, res = best_of(run_pg)
        t_pg /= n_data
        pg_vals = [r["ccei"] for r in res]
        agree_pg = sum(abs(a - b) <= 1e-12 for a, b in zip(pg_vals, mk_vals))
        print(f"prefgraph  : {t_pg * 1e6:9.1f} us/dataset (Rust engine, one batch call); "
              f"agrees on {agree_pg}/{n_data}")
        speed_pg = t_pg / t_mk
    else:
        print("prefgraph  : not installed")

    speed_rev = t_rev / t_mk
    print(f"ratios     : moralkit is {speed_rev:,.0f}x faster than revpref"
          + (f" and {speed_pg:,.1f}x faster than prefgraph" if speed_pg else ""))

    # Table-1-scale workload
    n_models = 39
    models = {**simulate_agents(20, "random", design, seed=7), **simulate_agents(19, "quadratic", design, seed=7)}
    assert len(models) == n_models
    n_datasets = 200 if args.quick else 1000
    workers = effective_n_jobs(args.workers)
    t0 = time.perf_counter()
    df = table1(models, n_datasets=n_datasets, seed=0, n_jobs=args.workers)
    t_table = time.perf_counter() - t0
    n_pass = int((df["alpha"] <= 0.05).sum())
    print(f"table 1    : {n_models} SIMULATED models x {n_datasets} random datasets x {T} rounds in "
          f"{t_table:.2f} s with {workers} worker(s) ({n_pass} reject H0 at 5 %)")
    print(json.dumps({
        "speedup_vs_revpref": round(speed_rev, 1),
        "speedup_vs_prefgraph": None if speed_pg is None else round(speed_pg, 2),
        "per_dataset_ms": round(t_mk * 1e3, 4),
        "ccei_only_ms": round(t_mk_ccei * 1e3, 4),
        "batched_ms": round(t_batch * 1e3, 4),
        "table1_workload_s": round(t_table, 3),
        "workers": workers,
    }))


if __name__ == "__main__":
    main()
