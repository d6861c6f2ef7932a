"""Benchmark: CPU seconds of single notebooks on this checkout against a reference checkout, side by side.

A speed change is judged by the CPU seconds a notebook costs (on a shared machine its wall time says more
about the other processes), measured in turns: reference, this checkout, reference, ... so that both see
the same load. Each notebook runs alone (``run_all.py --only NN --jobs 1 --no-book``: ``n_jobs=1``, as in
README command 1), with its figures and tables in scratch folders, and the tables of the two checkouts are
compared byte for byte (a speed change must not change a result).

Usage::

    git worktree add /tmp/ref <commit>        # or: git archive <commit> | tar -x -C /tmp/ref
    nice .venv/bin/python benchmarks/bench_notebook_cpu.py --reference /tmp/ref --only 03,06,07 [--repeat 2]

Each notebook gives one line ``BENCH {json}`` (benchmarks/_record.py): ``cpu_s_ref`` and ``cpu_s`` (the
medians over ``--repeat`` turns, from each run's ``run.json``: the kernel's and papermill's CPU),
``ratio`` (``cpu_s / cpu_s_ref``), ``wall_s_ref``/``wall_s`` and ``tables_identical`` (with the names of
the tables that differ, if any). The reference needs the MoralChoice survey files as this checkout does
(``MORALKIT_MORALCHOICE_DIR`` is passed on; default ``<this checkout>/../shared/moralchoice``).
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


def _run(tree: Path, nb: str, scratch: Path, env: dict) -> tuple[float, float]:
    """One run of notebook ``nb`` from checkout ``tree``; its (cpu, wall) seconds from run.json."""
    out = scratch / "build"
    cmd = [sys.executable, str(tree / "run_all.py"), "--only", nb, "--jobs", "1", "--no-book", "--out", str(out),
           "--figures-dir", str(scratch / "figures"), "--tables-dir", str(scratch / "tables")]
    p = subprocess.run(cmd, cwd=tree, env=dict(env, PYTHONPATH=str(tree)), capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{tree}: notebook {nb} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    rec = [r for r in json.loads((out / "run.json").read_text())["notebooks"] if r["name"].startswith(nb)][0]
    return float(rec["cpu_seconds"]), float(rec["seconds"])


def _differing(a: Path, b: Path, nb: str) -> list[str]:
    names = sorted({p.name for p in a.glob(f"{nb}_*.csv")} | {p.name for p in b.glob(f"{nb}_*.csv")})
    return [n for n in names if not ((a / n).exists() and (b / n).exists()
                                     and (a / n).read_bytes() == (b / n).read_bytes())]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", required=True, type=Path, help="checkout of the reference commit")
    ap.add_argument("--only", required=True, help="notebooks, e.g. 03,06,07")
    ap.add_argument("--repeat", type=int, default=1, help="turns per checkout (the medians are reported)")
    a = ap.parse_args(argv)
    env = dict(os.environ, TQDM_DISABLE="1")
    env.setdefault("MORALKIT_MORALCHOICE_DIR", str((ROOT.parent / "shared" / "moralchoice").resolve()))
    trees = {"ref": a.reference.resolve(), "this": ROOT}
    for nb in [s.strip() for s in a.only.split(",") if s.strip()]:
        t0 = load()
        with tempfile.TemporaryDirectory(prefix="nbcpu-") as tmp:
            scratch = {k: Path(tmp) / k for k in trees}
            times = {k: [] for k in trees}
            for _ in range(max(1, a.repeat)):
                for k, tree in trees.items():
                    times[k].append(_run(tree, nb, scratch[k], env))
            diff = _differing(scratch["ref"] / "tables", scratch["this"] / "tables", nb)
            n_tables = len(list((scratch["this"] / "tables").glob(f"{nb}_*.csv")))
        cpu = {k: statistics.median(c for c, _ in v) for k, v in times.items()}
        wall = {k: statistics.median(w for _, w in v) for k, v in times.items()}
        emit("notebook_cpu", f"notebook{nb}", t0, cpu_s_ref=round(cpu["ref"], 1), cpu_s=round(cpu["this"], 1),
             ratio=round(cpu["this"] / cpu["ref"], 3), wall_s_ref=round(wall["ref"], 1),
             wall_s=round(wall["this"], 1), repeat=max(1, a.repeat), tables=n_tables,
             tables_identical=not diff, tables_differing=diff)
    return 0


if __name__ == "__main__":
    sys.exit(main())
