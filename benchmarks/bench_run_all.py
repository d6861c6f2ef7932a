"""Benchmark: README command 1's notebook run, first (numba compiling) and second (numba's cache warm).

Runs ``run_all.py`` twice into a scratch build folder, with figures and tables in scratch folders too
(the committed ones are not touched), and ``NUMBA_CACHE_DIR`` set to an empty folder for the first run,
as on a fresh clone: the first run installs the compiled kernels the package ships
(:mod:`moralkit.psm.kernel_cache`; ``shipped_cache``: ``used``, or why numba cannot use them here), or with
``--no-shipped-cache`` compiles them; the second run loads numba's cache.
Also times notebook 02 alone both ways, to give the compile share of one notebook.

Usage::

    nice .venv/bin/python benchmarks/bench_run_all.py [--quick] [--only-02]

Every figure is one line ``BENCH {json}`` (benchmarks/_record.py): ``s`` the wall seconds, ``cpu_s`` the
CPU seconds of ``run_all.py`` and everything it started (kernels, the book build), and from the run's
``run.json``: ``notebooks_s`` (the sum of the notebooks' wall times), ``side_by_side`` (that sum over the
wall time of the notebook phase: 1 when one notebook runs at a time, up to ``--jobs``), ``book_s`` (the book
build after the last notebook ended, until ``index.html``; since the early build, with ``--jobs`` >= 2 most
of the build runs before, beside the last notebook, and takes ``early_book_s``; records before 2026-11-27
03:00 UTC have no early build), and per notebook its wall and CPU seconds (``per_notebook``). On a loaded
machine compare ``cpu_s``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _record import emit, load  # noqa: E402


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_run(args, env, out: Path) -> dict:
    """Run ``run_all.py ARGS --out OUT``; wall and CPU seconds, and what its run.json says."""
    t, c = time.perf_counter(), _children_cpu()
    p = subprocess.run([sys.executable, "run_all.py", *args, "--out", str(out)], cwd=HERE.parent, env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"run_all.py {' '.join(args)} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    wall, cpu = time.perf_counter() - t, _children_cpu() - c
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    nbs = run["notebooks"]
    notebooks_s = sum(n["seconds"] for n in nbs)
    phase = run["seconds"] - run.get("book_seconds", 0.0)
    return {"s": round(wall, 1), "cpu_s": round(cpu, 1), "notebooks_s": round(notebooks_s, 1),
            "side_by_side": round(notebooks_s / phase, 2) if phase > 0 else None,
            "book_s": round(run.get("book_seconds", 0.0), 1), "jobs": run.get("jobs"),
            "early_book_s": None if run.get("early_book_seconds") is None else round(run["early_book_seconds"], 1),
            "per_notebook": {n["name"][:2]: [round(n["seconds"], 1), None if n.get("cpu_seconds") is None
                                             else round(n["cpu_seconds"], 1)] for n in nbs}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only-02", action="store_true", help="only notebook 02, cold and warm")
    ap.add_argument("--no-shipped-cache", action="store_true",
                    help="MORALKIT_KERNEL_CACHE=0: the first run compiles the kernels instead of installing the "
                         "compiled cache the package ships (moralkit.psm.kernel_cache), as before issue 30's fix")
    ap.add_argument("--figures", default=None, metavar="DIR",
                    help="write the figures and tables there (kept, e.g. to compare the tables with another "
                         "checkout's) instead of a scratch folder")
    args = ap.parse_args(argv)
    extra = ["--quick"] if args.quick else []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        figures = Path(args.figures).resolve() if args.figures else tmp / "figures"
        # PYTHONPATH: the kernels import this checkout's moralkit, not the one the environment has installed
        # (an editable install points at one clone; a second worktree would otherwise time the first's code)
        path = os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "numba"), "MORALKIT_FIGURES_DIR": str(figures),
               "MPLBACKEND": "Agg", "PYTHONPATH": path}
        if args.no_shipped_cache:
            env["MORALKIT_KERNEL_CACHE"] = "0"
            shipped = "off"
        else:
            from moralkit.psm.kernel_cache import status

            st = status()
            shipped = "used" if st["usable"] else "not usable: " + "; ".join(st["reasons"])
        cases = [("notebook02", ["--only", "02"])]
        if not args.only_02:
            cases.append(("all", []))
        for key, sel in cases:
            for run in ("first", "second"):
                if run == "first":  # an empty numba cache, as on a fresh clone
                    subprocess.run(["rm", "-rf", str(tmp / "numba")], check=True)
                l0 = load()
                res = timed_run([*sel, *extra], env, tmp / f"build-{key}")
                emit("run_all", f"{key}-{run}", l0, **res, quick=args.quick,
                     numba_cache="empty" if run == "first" else "warm", shipped_cache=shipped)


if __name__ == "__main__":
    main()
