"""Compile (or load from numba's on-disk cache) the PSM kernels once, before the notebooks run.

Every ``@njit(cache=True)`` kernel of :mod:`moralkit.psm` is compiled the first time a process calls
it, and the machine code is cached next to its source (``moralkit/psm/__pycache__``, or
``NUMBA_CACHE_DIR``). On a fresh clone no cache exists yet, and ``run_all.py`` runs several notebooks
side by side, each of which would compile the same kernels at the same time. :func:`warm_kernels`
calls the public functions once on a small SIMULATED dataset, with the argument types the notebooks
use, so that the cache is written once and every notebook then loads it
(``python -m moralkit.psm.warmup``; ``run_all.py`` does not call it: numba compiles lazily, so a
notebook compiles only the kernels it calls, and no notebook calls the Houtman–Maks kernels).
"""

from __future__ import annotations

import time

__all__ = ["dispatchers", "warm_kernels"]


def dispatchers() -> dict:
    """Every numba dispatcher of the PSM kernel modules (``moralkit.psm._*_kernels``), by ``module.name``."""
    import sys

    from numba.core.registry import CPUDispatcher

    from . import houtman_maks, partition, rp  # noqa: F401  (they load every kernel module)

    out = {}
    for modname, mod in sorted(sys.modules.items()):
        if modname.startswith(__package__ + "._") and modname.endswith("_kernels"):
            for name, obj in vars(mod).items():
                if isinstance(obj, CPUDispatcher):
                    out[f"{modname.rsplit('.', 1)[-1]}.{name}"] = obj
    return out


def warm_kernels() -> dict:
    """Call the public PSM functions once on small simulated data; return seconds and kernels compiled.

    Returns
    -------
    dict
        ``seconds``, ``compiled`` (kernels with at least one compiled signature) and
        ``not_compiled`` (kernels this warm-up does not reach).
    """
    t0 = time.perf_counter()
    import numpy as np

    from . import partition, rp
    from .design import make_design
    from .houtman_maks import houtman_maks, houtman_maks_decision
    from .pooled import pool
    from .rationality import random_choice_tests
    from .simulate import random_quadratic_agent, simulate_quadratic, simulate_random

    d = make_design(0)
    a = simulate_quadratic(random_quadratic_agent(0), d, noise=0.3, seed=0, model="sim-warm-a")
    b = simulate_random(d, seed=1, model="sim-warm-b")
    for ds in (a, b):
        E = rp.psm_expenditure_matrix(ds)
        rp.ccei_exact(E)
        rp.ccei(E)
        rp.garp(E, 0.5)
    random_choice_tests([a, b], n_datasets=4, seed=0)
    random_choice_tests([a, b], n_datasets=4, seed=0, index="origin/1-e")
    pooled = pool({"sim-warm-a": a, "sim-warm-b": b}, rounds={"sim-warm-a": range(20), "sim-warm-b": range(20, 40)})
    partition.partition_types(pooled, 0.5, seed=0)
    from .nlls.model import corner_signs, predict_corner

    v = a.valid()
    for form in ("exact", "paper"):
        for jac in (False, True):
            predict_corner(np.full(5, 0.2), np.full(5, 2.5), corner_signs(v.corners), v.corners.astype(float),
                           v.prices.astype(float), form, jac=jac)
    E = rp.psm_expenditure_matrix(b)[:25, :25]
    houtman_maks(E)
    houtman_maks_decision(E, 10)
    ds = dispatchers()
    return {"seconds": time.perf_counter() - t0, "compiled": sorted(k for k, f in ds.items() if f.signatures),
            "not_compiled": sorted(k for k, f in ds.items() if not f.signatures)}


if __name__ == "__main__":  # pragma: no cover
    r = warm_kernels()
    print(f"{len(r['compiled'])} kernels compiled or loaded in {r['seconds']:.1f} s; not reached: {r['not_compiled']}")
