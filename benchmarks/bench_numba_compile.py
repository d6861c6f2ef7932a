"""Benchmark: what numba's compilation of the PSM kernels costs a fresh clone, kernel by kernel.

Every ``@njit(cache=True)`` kernel of :mod:`moralkit.psm` is compiled the first time a process calls
it and then cached next to its source; a fresh clone has no cache, so its first ``run_all.py`` pays
the compilation inside the notebooks (later runs load the cache). This script runs
:func:`moralkit.psm.warmup.warm_kernels` (every public PSM path, with the notebooks' argument types)
in a new process with an empty ``NUMBA_CACHE_DIR``, records the processor time of each top-level
compilation through numba's event API, then runs it again on the filled cache (what a second run
pays to load it).

Usage::

    .venv/bin/python benchmarks/bench_numba_compile.py [--reference /tmp/ref] [--repeat 1]

One line ``BENCH {json}`` (benchmarks/_record.py) per checkout: ``compile_cpu_s`` (sum over kernels,
median over ``--repeat``), ``kernel_cpu_s`` ({module.kernel: CPU seconds} of the first repeat),
``first_kernel`` (the first compilation of a process also pays numba's own start-up, about 1 s),
``load_cpu_s`` (the same calls with the cache filled) and ``reference`` (the commit of the other checkout measured).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _record import emit, load  # noqa: E402

_CHILD = r"""
import json, time
from numba.core import event

depth, records = [0], []


class Timer(event.Listener):
    def on_start(self, ev):
        depth[0] += 1
        if depth[0] == 1:
            self.t = time.process_time()

    def on_end(self, ev):
        depth[0] -= 1
        if depth[0] == 0:
            f = getattr(ev.data["dispatcher"], "py_func", None)
            name = f"{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}" if f else str(ev.data["dispatcher"])
            records.append([name, time.process_time() - self.t])


event.register("numba:compile", Timer())
t0 = time.process_time()
from moralkit.psm.warmup import warm_kernels

warm_kernels()
print(json.dumps({"records": records, "cpu_s": time.process_time() - t0}))
"""


def _child(tree: Path, cache: str) -> dict:
    # MORALKIT_KERNEL_CACHE=0: compile, rather than install the compiled cache the package ships
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(tree), MORALKIT_KERNEL_CACHE="0")
    out = subprocess.run([sys.executable, "-c", _CHILD], cwd=tree, env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(tree: Path, repeat: int) -> dict:
    """Compile (empty cache) then load (filled cache) in new processes, ``repeat`` times."""
    totals, loads, first = [], [], None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
            cold = _child(tree, cache)
            warm = _child(tree, cache)
        totals.append(sum(s for _, s in cold["records"]))
        loads.append(warm["cpu_s"])
        first = first or cold
    kernels: dict[str, float] = {}
    for name, s in first["records"]:
        kernels[name] = round(kernels.get(name, 0.0) + s, 3)
    return {"compile_cpu_s": round(statistics.median(totals), 2), "load_cpu_s": round(statistics.median(loads), 2),
            "kernel_cpu_s": dict(sorted(kernels.items(), key=lambda kv: -kv[1])),
            "first_kernel": first["records"][0][0] if first["records"] else None}


def _commit(tree: Path) -> str:
    """The reference checkout's commit (short hash), not its path: records carry no machine paths."""
    import subprocess

    out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or tree.name


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", type=Path, help="another checkout to measure the same way (before/after)")
    p.add_argument("--repeat", type=int, default=1)
    a = p.parse_args(argv)
    for tree in ([a.reference] if a.reference else []) + [ROOT]:
        start = load()
        emit("numba_compile", "warm_kernels", start, reference=_commit(tree) if tree != ROOT else None,
             repeat=a.repeat, **measure(tree.resolve(), a.repeat))


if __name__ == "__main__":
    main()
