"""Run every benchmark and collect its figures into ``benchmarks/results.jsonl`` (one JSON line each).

Every timing the README quotes comes from a line of that file. A benchmark that prints records
(``BENCH {json}`` lines, see ``benchmarks/_record.py``) contributes those lines; one that prints a
single JSON object as its last line contributes it as one record (key ``summary``), stamped with the
date and the load average before and after it ran. The machine is shared: run it with ``nice`` and
read each figure with its load.

Usage::

    nice .venv/bin/python benchmarks/run_all_benchmarks.py [--only houtman_maks,run_all] [--out benchmarks/results.jsonl]

Existing records of the benchmarks that are re-run are replaced; the others are kept.
``--from-log FILE`` collects the ``BENCH`` lines of a benchmark run by hand (e.g. in the background,
with its own arguments, written to FILE) instead of running it: its records replace those of the
same benchmark name.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _record import PREFIX, emit, load  # noqa: E402

# name -> arguments; the order is the order they run in
BENCHMARKS = {
    "houtman_maks": ["bench_houtman_maks.py", "--reps", "3", "--cuts-time-limit", "120"],
    "rationality": ["bench_rationality.py"],
    "partition": ["bench_partition.py", "--milp-instances", "1", "--time-limit", "60"],
    "run_all": ["bench_run_all.py"],
    # needs the book sources of a full run in build/ (README command 1); without them it records only a skip
    "book_tail": ["bench_book_tail.py"],
    "numba_compile": ["bench_numba_compile.py"],
    "stem_cache": ["bench_stem_cache.py"],
    "imports": ["bench_imports.py"],
    "stem_tokenize": ["bench_stem_tokenize.py", "--repeat", "3"],
    "dask": ["bench_dask.py", "--T", "200"],
    "audit": ["bench_audit.py"],
    "figure_save": ["bench_figure_save.py", "--repeat", "5"],
    "pool": ["bench_pool.py"],
    # uvicorn and starlette are not dependencies: `pip install --target /tmp/asgi uvicorn==0.54.0 starlette==1.10.0`
    "serve_framework": ["bench_serve_framework.py", "--asgi-path", "/tmp/asgi"],
    "serve_abuse": ["bench_serve_abuse.py", "--reps", "5"],
    "likelihood_dtype": ["bench_likelihood_dtype.py", "--n", "3", "--threads", "1"],
    # the wall times recorded by the committed collection runs (data/raw/*), not a timing of this machine
    "backends": ["bench_backends.py", "records", *sorted(str(p) for p in (HERE.parent / "data" / "raw").glob("*")
                                                         if p.is_dir())],
}


def run_one(name: str, args: list[str]) -> list[dict]:
    l0 = load()
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    p = subprocess.run([sys.executable, str(HERE / args[0]), *args[1:]], capture_output=True, text=True, env=env,
                       cwd=HERE.parent)
    recs = [json.loads(line[len(PREFIX):]) for line in p.stdout.splitlines() if line.startswith(PREFIX)]
    if recs and p.returncode != 0:  # records of a benchmark that then failed are not a complete run
        raise SystemExit(f"benchmark {name} failed (exit {p.returncode}) after {len(recs)} record(s):\n"
                         f"{p.stderr[-2000:]}")
    if not recs:
        last = [line for line in p.stdout.splitlines() if line.strip().startswith("{")]
        if p.returncode != 0 or not last:
            raise SystemExit(f"benchmark {name} failed (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        recs = [emit(name, "summary", l0, **json.loads(last[-1]))]
    return recs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated benchmark names: " + ", ".join(BENCHMARKS))
    ap.add_argument("--out", default=str(HERE / "results.jsonl"))
    ap.add_argument("--from-log", default=None, help="collect BENCH lines from this file instead of running")
    args = ap.parse_args(argv)
    if args.from_log:
        text = Path(args.from_log).read_text()
        new = [json.loads(line[len(PREFIX):]) for line in text.splitlines() if line.startswith(PREFIX)]
        if not new:
            raise SystemExit(f"no {PREFIX.strip()} lines in {args.from_log}")
        return _write(Path(args.out), {r["bench"] for r in new}, new)
    names = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    new = []
    for n in names:
        print(f"running {n} ...", flush=True)
        new += run_one(n, BENCHMARKS[n])
    _write(Path(args.out), set(names), new)


def _write(out: Path, names: set, new: list[dict]) -> None:
    """Replace the records of the benchmarks ``names`` in ``out`` by ``new``; keep the others."""
    kept = []
    if out.exists():
        kept = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
        kept = [r for r in kept if r.get("bench") not in names]
    out.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept + new))
    print(f"wrote {len(new)} record(s) to {out}")


if __name__ == "__main__":
    main()
