"""Exact MoralChoice likelihoods in float32 and bfloat16: seconds per scenario, and how far the two disagree.

Loads Qwen2.5-Coder-0.5B-Instruct with the transformers backend (one thread) in each dtype in turn and
scores, with the exact scorer of ``likelihood`` (:class:`moralkit.collect.exact_scoring.TreeScorer`,
teacher forcing), every question form of ``--n`` high-ambiguity scenarios with their canonical answers
(six forms per scenario, as a ``likelihood`` run does). One scenario is scored first as a warm-up and not
timed. Per dtype one record: the median wall and CPU (``time.process_time``) seconds per scenario, the
tokens of the scored items per scenario (each item's question continuation and answer, summed over the
items: shared tokens are scored once by the tree, so this overstates the forward pass), the model's load
time; then one record of the log-probability
differences between the two dtypes on the same answers (nats), which is why the committed likelihood runs
use float32. The machine is shared: read the seconds with the record's load; the two dtypes run one after
the other, not interleaved. Cost: the model is loaded twice (float32, then bfloat16); at load ~6 the
whole run took 13 minutes of wall time.

    nice .venv/bin/python benchmarks/bench_likelihood_dtype.py [--n 3] [--threads 1]

References
----------
Scherrer et al. (2023), Section 3.3 (action likelihoods from token probabilities).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _record import emit, load  # noqa: E402

MODEL = "qwen2.5-coder-0.5b-instruct"


def score(dtype, scenarios, threads):
    """(record fields, {(scenario, form, answer): log-probability}) for one dtype."""
    from moralkit import moralchoice as mc
    from moralkit.collect.backends import TransformersBackend
    from moralkit.collect.exact_scoring import TreeScorer, persona_system, scenario_items

    l0 = load()
    t = time.perf_counter()
    b = TransformersBackend(MODEL, dtype=dtype, batch_size=1, threads=threads)
    load_s = time.perf_counter() - t
    ts = TreeScorer(b)
    templates = mc.load_templates()
    ts.set_templates({q: persona_system(templates.questions[q].question_header) for q in templates.questions})
    lps, wall, cpu, tokens = {}, [], [], []
    for k, (_, s) in enumerate(scenarios.iterrows()):
        items, meta = scenario_items(ts, s, templates)
        t, c = time.perf_counter(), time.process_time()
        out = ts.score(items)
        if k:  # the first scenario is the warm-up
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            tokens.append(sum(len(it[1]) + len(it[2]) for it in items))
        for (q, o, ans, _), lp in zip(meta, out):
            lps[(s["scenario_id"], f"{q}:{o}", ans)] = lp
    forms = len({k[1] for k in lps})
    rec = dict(model=MODEL, dtype=dtype, threads=threads, scenarios=len(wall), forms_per_scenario=forms,
               s_per_scenario=round(statistics.median(wall), 2), cpu_s_per_scenario=round(statistics.median(cpu), 2),
               wall_s=[round(x, 2) for x in wall], tokens_per_scenario=round(statistics.median(tokens)),
               load_s=round(load_s, 1))
    return l0, rec, lps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=3, help="timed scenarios per dtype (one more is the warm-up)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    from moralkit import moralchoice as mc

    scenarios = mc.load_scenarios("high").head(a.n + 1)
    res = {}
    for dtype in ("float32", "bfloat16"):
        l0, rec, lps = score(dtype, scenarios, a.threads)
        emit("likelihood_dtype", dtype, l0, **rec)
        res[dtype] = lps
    diff = sorted(abs(res["float32"][k] - res["bfloat16"][k]) for k in res["float32"])
    emit("likelihood_dtype", "float32-vs-bfloat16", load(), answers=len(diff),
         median_abs_diff_nats=round(statistics.median(diff), 3), max_abs_diff_nats=round(diff[-1], 3))


if __name__ == "__main__":
    main()
