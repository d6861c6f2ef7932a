"""Compile (or load from numba's on-disk cache) the PSM kernels once, before the notebooks run.

Every ``@njit(cache=True)`` kernel of :mod:`moralkit.psm` is compiled the first time a process calls
it, and the machine code is cached next to its source (``moralkit/psm/__pycache__``, or
``NUMBA_CACHE_DIR``). :func:`warm_kernels` calls the public functions once on a small SIMULATED dataset,
with the argument types the notebooks use, so that every kernel the notebooks call is compiled or loaded
(``python -m moralkit.psm.warmup``; ``benchmarks/bench_numba_compile.py`` measures it per kernel).
:func:`moralkit.psm.kernel_cache.build` runs it to write the compiled cache the package ships, which a
fresh clone installs instead of compiling; ``run_all.py`` does not call it.
"""

from __future__ import annotations

import sys
import time

__all__ = ["GROUPS", "dispatchers", "warm_group", "warm_kernels"]

#: The notebooks' kernels in two groups (``"ccei"``: the CCEI of one matrix and of many random
#: datasets; ``"pooled"``: GARP, pooled models, subsets and the parametric fit).
GROUPS = ("ccei", "pooled")


def dispatchers() -> dict:
    """Every numba dispatcher of the PSM kernel modules (``moralkit.psm._*_kernels``), by ``module.name``."""
    from numba.core.registry import CPUDispatcher

    from . import houtman_maks, partition, rp  # noqa: F401  (they load every kernel module)

    out = {}
    for modname, mod in sorted(sys.modules.items()):
        if modname.startswith(__package__ + "._") and modname.endswith("_kernels"):
            for name, obj in vars(mod).items():
                if isinstance(obj, CPUDispatcher):
                    out[f"{modname.rsplit('.', 1)[-1]}.{name}"] = obj
    return out


def _data():
    from .design import make_design
    from .simulate import random_quadratic_agent, simulate_quadratic, simulate_random

    d = make_design(0)
    a = simulate_quadratic(random_quadratic_agent(0), d, noise=0.3, seed=0, model="sim-warm-a")
    b = simulate_random(d, seed=1, model="sim-warm-b")
    return a, b


def warm_group(group: str) -> float:
    """Compile (or load) the kernels of one of :data:`GROUPS`; returns the processor seconds it took.

    Each call passes the argument types the notebooks pass (int64/float64 C-ordered arrays: the public
    functions convert their inputs to these, so one specialisation per kernel serves every caller).
    """
    t0 = time.process_time()
    import numpy as np

    from . import rp

    a, b = _data()
    if group == "ccei":
        from .rationality import random_choice_tests

        for ds in (a, b):
            E = rp.psm_expenditure_matrix(ds)
            rp.ccei_exact(E)  # psm_levels_batch
            rp.ccei(E / 12.0)  # min_cycle_ratio (float matrices)
        random_choice_tests([a, b], n_datasets=4, seed=0)  # level_lists_direct, psm_levels_choices
        random_choice_tests([a, b], n_datasets=4, seed=0, index="origin/1-e")  # ccei_float_choices
    elif group == "pooled":
        from . import ccei_many, partition
        from .nlls.model import corner_signs, predict_corner
        from .pooled import pool

        E = rp.psm_expenditure_matrix(b)
        rp.garp(E, 0.5)  # relation_signs, scc_labels
        ccei_many.ccei_subsets(E, [np.arange(40), np.arange(20)])  # int_ratio_levels, subset_levels
        pooled = pool({"sim-warm-a": a, "sim-warm-b": b},
                      rounds={"sim-warm-a": range(20), "sim-warm-b": range(20, 40)})
        partition.violating_cycle(pooled, 0.5)  # violating_cycle_obs
        partition.partition_types(pooled, 0.5, seed=0)  # max_subsets
        v = a.valid()
        for form in ("exact", "paper"):
            for jac in (False, True):
                predict_corner(np.full(5, 0.2), np.full(5, 2.5), corner_signs(v.corners), v.corners.astype(float),
                               v.prices.astype(float), form, jac=jac)
    else:
        from ..errors import MoralkitError

        raise MoralkitError(f"unknown kernel group {group!r}; use one of {GROUPS}")
    return time.process_time() - t0


def warm_kernels(hm: bool = True) -> dict:
    """Call the public PSM functions once on small simulated data; return seconds and kernels compiled.

    Parameters
    ----------
    hm : bool, default True
        Also the Houtman–Maks kernels (:mod:`moralkit.psm.houtman_maks`), which no notebook calls.

    Returns
    -------
    dict
        ``seconds``, ``compiled`` (kernels with at least one compiled signature) and
        ``not_compiled`` (kernels this warm-up does not reach).
    """
    t0 = time.perf_counter()
    for g in GROUPS:
        warm_group(g)
    if hm:
        from . import rp
        from .houtman_maks import houtman_maks, houtman_maks_decision

        E = rp.psm_expenditure_matrix(_data()[1])[:25, :25]
        houtman_maks(E)
        houtman_maks_decision(E, 10)
    ds = dispatchers()
    return {"seconds": time.perf_counter() - t0, "compiled": sorted(k for k, f in ds.items() if f.signatures),
            "not_compiled": sorted(k for k, f in ds.items() if not f.signatures)}


if __name__ == "__main__":  # pragma: no cover
    r = warm_kernels()
    print(f"{len(r['compiled'])} kernels compiled or loaded in {r['seconds']:.1f} s; not reached: {r['not_compiled']}")
