"""Benchmark: README command 1's notebook run, first (numba compiling) and second (numba's cache warm).

Runs ``run_all.py`` twice into a scratch build folder, with figures and tables in scratch folders too
(the committed ones are not touched), and ``NUMBA_CACHE_DIR`` set to an empty folder for the first run,
so that the first run pays numba's compilation as on a fresh clone and the second loads the cache.
Also times notebook 02 alone both ways, to give the compile share of one notebook.

Usage::

    nice .venv/bin/python benchmarks/bench_run_all.py [--quick] [--only-02]

Every figure is one line ``BENCH {json}`` (benchmarks/_record.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _record import emit, load  # noqa: E402


def timed_run(args, env):
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "run_all.py", *args], cwd=HERE.parent, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"run_all.py {' '.join(args)} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only-02", action="store_true", help="only notebook 02, cold and warm")
    args = ap.parse_args(argv)
    extra = ["--quick"] if args.quick else []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "numba"), "MORALKIT_FIGURES_DIR": str(tmp / "figures"),
               "MPLBACKEND": "Agg"}
        cases = [("notebook02", ["--only", "02"])]
        if not args.only_02:
            cases.append(("all", []))
        for key, sel in cases:
            for run in ("first", "second"):
                if run == "first":  # an empty numba cache, as on a fresh clone
                    subprocess.run(["rm", "-rf", str(tmp / "numba")], check=True)
                l0 = load()
                s = timed_run([*sel, *extra, "--out", str(tmp / f"build-{key}")], env)
                emit("run_all", f"{key}-{run}", l0, s=round(s, 1), quick=args.quick,
                     numba_cache="empty" if run == "first" else "warm")


if __name__ == "__main__":
    main()
