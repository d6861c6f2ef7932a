"""Benchmark: Table 1 and the permutation study locally vs on a dask.distributed LocalCluster.

Agents are SIMULATED (moralkit.psm.simulate). The cluster has 2 worker processes on 127.0.0.1, one thread
each; the same joblib code runs under ``joblib.parallel_backend("dask")``. Results must be identical;
the wall times are printed side by side (the cluster's start-up is timed separately).

Usage::

    .venv/bin/python benchmarks/bench_dask.py [--n-datasets 1000] [--T 500] [--rho 20]

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import joblib
import numpy as np
import pandas as pd

from moralkit.psm.design import make_design
from moralkit.psm.permutation import permutation_study
from moralkit.psm.rationality import table1
from moralkit.psm.simulate import (
    random_quadratic_agent,
    simulate_quadratic,
    simulate_random,
)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-datasets", type=int, default=1000)
    ap.add_argument("--T", type=int, default=500)
    ap.add_argument("--rho", type=int, default=20)
    ap.add_argument("--e", type=float, default=0.75)
    args = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    d = make_design(0)
    ds = {f"sim-q{i}": simulate_quadratic(random_quadratic_agent(i), d, noise=0.1 * i, seed=i, model=f"sim-q{i}")
          for i in range(6)}
    ds["sim-r0"] = simulate_random(d, seed=7, model="sim-r0")
    out = {}
    # warm-up (numba caches) before timing the local runs
    table1(ds, n_datasets=100, seed=0)
    permutation_study(ds, args.e, T=5, rho=args.rho, seed=0, progress=False)
    for n_jobs in (1, 2):
        t = time.perf_counter()
        tab_local = table1(ds, n_datasets=args.n_datasets, seed=0, n_jobs=n_jobs)
        out[f"table1_local_{n_jobs}_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        perm_local = permutation_study(ds, args.e, T=args.T, rho=args.rho, seed=0, n_jobs=n_jobs, progress=False)
        out[f"permutation_local_{n_jobs}_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster):
        out["cluster_start_s"] = round(time.perf_counter() - t, 3)
        with joblib.parallel_backend("dask"):
            table1(ds, n_datasets=100, seed=0, n_jobs=-1)  # warm-up on the workers
            t = time.perf_counter()
            tab_dask = table1(ds, n_datasets=args.n_datasets, seed=0, n_jobs=-1)
            out["table1_dask_s"] = round(time.perf_counter() - t, 3)
            t = time.perf_counter()
            perm_dask = permutation_study(ds, args.e, T=args.T, rho=args.rho, seed=0, n_jobs=-1, progress=False)
            out["permutation_dask_s"] = round(time.perf_counter() - t, 3)
    pd.testing.assert_frame_equal(tab_local.to_frame(), tab_dask.to_frame())
    assert np.array_equal(perm_local.labels, perm_dask.labels)
    out["identical"] = True
    print(f"Table 1 ({len(ds)} SIMULATED models x {args.n_datasets} random datasets): local 1 worker "
          f"{out['table1_local_1_s']:.2f} s, local 2 threads {out['table1_local_2_s']:.2f} s, dask 2 processes "
          f"{out['table1_dask_s']:.2f} s")
    print(f"permutation study (T={args.T}, rho={args.rho}, e={args.e}): local 1 worker "
          f"{out['permutation_local_1_s']:.2f} s, local 2 {out['permutation_local_2_s']:.2f} s, dask 2 processes "
          f"{out['permutation_dask_s']:.2f} s; cluster start-up {out['cluster_start_s']:.2f} s; results identical")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
