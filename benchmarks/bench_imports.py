"""Benchmark: CPU seconds of ``import moralkit.book, papermill`` (papermill loads nbformat, as run_all's own process, each
worker running notebooks side by side and the Sphinx build do), with and without the blocked optional import.

``moralkit.book`` keeps jsonschema from importing the optional ``rfc3987_syntax`` (38 Lark grammars built at
import; see ``moralkit/book/__init__.py``). The comparison case imports jsonschema first, which loads it as
before. Each case runs ``--reps`` times in fresh interpreters, in turns (lean, full, lean, ...) so that both
see the same load; the figures are the medians of the processes' CPU seconds (user + system).

Usage::

    nice .venv/bin/python benchmarks/bench_imports.py [--reps 5]

Records (``BENCH {json}``, benchmarks/_record.py): key ``book-lean`` and ``book-full`` with ``cpu_s``, and
``book-saved`` with ``cpu_s_saved`` (full minus lean) and ``ratio`` (lean over full).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _record import emit, load  # noqa: E402

# what a notebook worker loads: moralkit.book, then papermill (nbformat, jsonschema) on its first notebook
CASES = {"book-lean": "import moralkit.book, papermill",
         "book-full": "import jsonschema, moralkit.book, papermill"}


def _cpu(code: str) -> float:
    """CPU seconds of one fresh interpreter running ``code`` from the checkout's root."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], cwd=HERE.parent, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    l0 = load()
    got = {k: [] for k in CASES}
    for _ in range(args.reps):
        for k, code in CASES.items():
            got[k].append(_cpu(code))
    med = {k: round(statistics.median(v), 3) for k, v in got.items()}
    for k in CASES:
        emit("imports", k, l0, cpu_s=med[k], reps=args.reps)
    emit("imports", "book-saved", l0, cpu_s_saved=round(med["book-full"] - med["book-lean"], 3),
         ratio=round(med["book-lean"] / med["book-full"], 3), reps=args.reps)


if __name__ == "__main__":
    main()
