"""Benchmark: CPU milliseconds per NLLS solve (eq. (11)) on this checkout against a reference checkout.

The solves are those of notebook 03's bootstrap (and of notebook 07's paired refits): each committed PSM
respondent is fitted once (``fit_utility``, not timed), then ``--n`` resamples of its answered rounds are
refitted from the estimate with ``_Problem.solve``, the call behind ``fit_answers``' bootstrap and
``refit_rounds``. Each checkout runs in its own process (``PYTHONPATH`` = the checkout), in turns
(reference, this, reference, ...) so that both see the same load; a turn's figure is the CPU time
(``time.process_time``) of all its solves divided by their number, and the record keeps the fastest turn
of each checkout. The fitted parameters of every solve are hashed in both processes: ``identical`` says
whether they are equal bit for bit (a speed change must not change a result).

Usage::

    nice .venv/bin/python benchmarks/bench_nlls_solve.py --reference ../moralkit-ref [--n 30] [--repeat 3]

One line ``BENCH {json}`` (benchmarks/_record.py): ``ms_per_solve_ref``, ``ms_per_solve``, ``ratio``,
``n_solves``, ``identical``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))


def _worker(n: int, repeat: int) -> dict:
    """Runs inside the checkout's process: build the problems, time their solves, hash the estimates."""
    import numpy as np

    from moralkit.psm import nlls
    from moralkit.psm.dataset import load_psm
    from moralkit.psm.nlls import fit as F
    from moralkit.psm.nlls.model import to_corner_linear

    _, datasets = load_psm(None)
    problems = []
    for m in sorted(datasets):
        v = datasets[m].valid()
        est = nlls.fit_utility(datasets[m])
        theta = F._ab_to_theta(est.a, est.b)
        y = to_corner_linear(v.choices, v.corners)
        rng = np.random.default_rng(2025)
        for _ in range(n):
            idx = np.sort(rng.integers(0, len(y), len(y)))
            problems.append((v.corners.astype(float)[idx], v.prices[idx], y[idx], theta))

    def run():
        xs = []
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for corners, prices, y, theta in problems:
                xs.append(F._Problem(corners, prices, y, "exact", 12.0).solve(theta).x)
        return xs

    run()  # numba's kernels loaded, SciPy imported
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        xs = run()
        best = min(best, time.process_time() - t)
    digest = hashlib.sha256(b"".join(np.asarray(x, dtype=np.float64).tobytes() for x in xs)).hexdigest()
    return {"ms_per_solve": 1e3 * best / len(problems), "n_solves": len(problems), "sha256": digest}


def _run(tree: Path, n: int, repeat: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--n", str(n), "--repeat", str(repeat)]
    p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{tree}: the worker failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", type=Path, help="checkout of the reference commit")
    ap.add_argument("--n", type=int, default=30, help="bootstrap resamples per committed respondent")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per process (the fastest is kept)")
    ap.add_argument("--turns", type=int, default=2, help="processes per checkout, alternating")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(_worker(a.n, a.repeat)))
        return 0
    if a.reference is None:
        ap.error("--reference is required")
    from _record import emit, load

    t0 = load()
    res = {"ref": [], "this": []}
    for _ in range(max(1, a.turns)):
        res["ref"].append(_run(a.reference.resolve(), a.n, a.repeat))
        res["this"].append(_run(ROOT, a.n, a.repeat))
    ref = min(r["ms_per_solve"] for r in res["ref"])
    this = min(r["ms_per_solve"] for r in res["this"])
    shas = {r["sha256"] for r in res["ref"] + res["this"]}
    emit("nlls_solve", "bootstrap_refit_exact", t0, ms_per_solve_ref=round(ref, 3), ms_per_solve=round(this, 3),
         ratio=round(this / ref, 3), n_solves=res["this"][0]["n_solves"], turns=max(1, a.turns), repeat=a.repeat,
         identical=len(shas) == 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
