"""The distributed path: Table 1 and the permutation study on a real Dask cluster.

A ``distributed.LocalCluster`` with 2 worker *processes* on 127.0.0.1 runs the same joblib code
through ``joblib.parallel_backend("dask")``; the results must be identical to a local run with
one worker. Agents are SIMULATED (moralkit.psm.simulate). Timings: ``benchmarks/bench_dask.py``.
"""

import numpy as np
import pandas as pd
import pytest

from moralkit.psm.design import make_design
from moralkit.psm.permutation import permutation_study
from moralkit.psm.rationality import table1
from moralkit.psm.simulate import random_quadratic_agent, simulate_quadratic, simulate_random

distributed = pytest.importorskip("distributed", reason="dask[distributed] not installed (extra 'dask')")


@pytest.fixture(scope="module")
def datasets():
    d = make_design(0)
    out = {f"sim-q{i}": simulate_quadratic(random_quadratic_agent(i), d, noise=0.1 * i, seed=i, model=f"sim-q{i}")
           for i in range(3)}
    out["sim-r0"] = simulate_random(d, seed=7, model="sim-r0")
    return out


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def test_cluster_has_two_worker_processes(client):
    info = client.scheduler_info()
    assert len(info["workers"]) == 2
    assert all(w.startswith("tcp://127.0.0.1:") for w in info["workers"])
    pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert len(pids) == 2 and __import__("os").getpid() not in pids  # separate processes


def test_table1_on_dask_is_identical(datasets, client):
    import joblib

    local = table1(datasets, n_datasets=300, seed=3, n_jobs=1)
    with joblib.parallel_backend("dask"):
        remote = table1(datasets, n_datasets=300, seed=3, n_jobs=-1)
    pd.testing.assert_frame_equal(local.to_frame(), remote.to_frame())
    for m in datasets:
        assert np.array_equal(local.results[m].null_index, remote.results[m].null_index)


def test_permutation_study_on_dask_is_identical(datasets, client):
    import joblib

    e = 0.75
    local = permutation_study(datasets, e, T=60, rho=10, seed=5, n_jobs=1, progress=False)
    with joblib.parallel_backend("dask"):
        remote = permutation_study(datasets, e, T=60, rho=10, seed=5, n_jobs=-1, progress=False, chunk_size=7)
    assert np.array_equal(local.labels, remote.labels)
    pd.testing.assert_frame_equal(local.G, remote.G)
    assert 0 < local.G.to_numpy()[np.triu_indices(4, 1)].mean() < 1  # a non-trivial G
