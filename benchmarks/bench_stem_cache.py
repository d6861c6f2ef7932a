"""Benchmark: notebook 07's reading of the MoralChoice answers with and without the stem cache.

Notebook 07 reads the project's MoralChoice runs twice (``moralkit.studies.crossmethod.load_own_runs``,
high and low ambiguity); most of that is the answer mapping's stemmed match (NLTK's tokenizer and Porter
stemmer). ``run_all.py`` keeps the stems in ``build/memo`` (``MORALKIT_MEMO_DIR``), so the second
notebook to read the answers, and every later run, reads them from the file. This script runs the two
calls in a new process with an empty cache folder (what the first notebook pays), then in another one
with the file it wrote (what notebook 07 pays after notebook 05, and later runs), and checks that the
mapped decisions are the same.

Usage::

    .venv/bin/python benchmarks/bench_stem_cache.py [--repeat 3]

One line ``BENCH {json}`` (benchmarks/_record.py): ``cold_cpu_s`` and ``warm_cpu_s`` (medians over
``--repeat`` pairs of processes), ``cache_mb`` (the file's size) and ``identical`` (same decisions).
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
import hashlib, json, time
import pandas  # imported by the notebook's first cell, not part of what is timed
from moralkit.studies import crossmethod as xm
from moralkit import moralchoice as mc

t0 = time.process_time()
h = hashlib.sha256()
for ambiguity in ("high", "low"):
    psm, metrics, _ = xm.load_own_runs(ambiguity=ambiguity)
    h.update(metrics.to_csv().encode())
print(json.dumps({"cpu_s": time.process_time() - t0, "metrics": h.hexdigest()}))
"""


def _child(cache: str) -> dict:
    env = dict(os.environ, MORALKIT_MEMO_DIR=cache, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    start = load()
    cold, warm, same, size = [], [], True, 0.0
    for _ in range(a.repeat):
        with tempfile.TemporaryDirectory(prefix="stem-cache-") as d:
            c, w = _child(d), _child(d)
            size = sum(f.stat().st_size for f in Path(d).glob("*.json")) / 1e6
        cold.append(c["cpu_s"])
        warm.append(w["cpu_s"])
        same = same and c["metrics"] == w["metrics"]
    emit("stem_cache", "notebook07_load_own_runs", start, cold_cpu_s=round(statistics.median(cold), 2),
         warm_cpu_s=round(statistics.median(warm), 2), repeat=a.repeat, cache_mb=round(size, 1), identical=same)


if __name__ == "__main__":
    main()
