"""Run summaries of notebook 01: rounds by the attempt that answered them, parse statuses."""

from __future__ import annotations

import gzip
import json

import matplotlib

matplotlib.use("Agg")

from moralkit import paths  # noqa: E402
from moralkit.collect import summary  # noqa: E402


def _run(tmp_path, statuses_by_task):
    """A run directory whose records are SIMULATED statuses (no model answer in them)."""
    run = tmp_path / "psm-sim"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(dict(survey="psm", label="sim-agent", backend="simulated",
                                                       sampling={"temperature": 1.0}, seed=0, max_attempts=3)))
    recs = [dict(kind="attempt", task=t, attempt=k, status=s, latency_s=0.1, parsed=[1, 2, 3, 4, 5])
            for t, ss in statuses_by_task.items() for k, s in enumerate(ss, 1)]
    with gzip.open(run / "records.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)
    return run


def test_rounds_are_counted_by_the_attempt_that_answered_them(tmp_path):
    run = _run(tmp_path, {"r000": ["ok"], "r001": ["ok"], "r002": ["no_option", "ok"],
                          "r003": ["no_option", "refusal", "ok"], "r004": ["no_option"] * 3,
                          "r005": ["out_of_range", "no_option"]})  # r005: still open (2 of 3 attempts)
    row = summary.psm_quality_table([run]).iloc[0]
    assert (row["rounds"], row["answered"], row["missing"]) == (4, 3, 1)
    assert (row["rounds_1_attempts"], row["rounds_2_attempts"], row["rounds_3_attempts"]) == (1, 1, 1)
    assert row["requests"] == 12 and row["refusals"] == 1 and row["invalid"] == 7


def test_committed_runs_add_up_and_the_figure_draws():
    runs = summary.find_runs(paths.data_dir() / "raw", survey="psm")
    q = summary.psm_quality_table(runs)
    parts = q[[c for c in q.columns if c.startswith("rounds_") and c.endswith("_attempts")]].sum(axis=1)
    assert ((parts + q["missing"]) == q["rounds"]).all()
    assert (q["answered"] == parts).all()
    axes = summary.plot_psm_quality(runs)
    assert len(axes[0].patches) == len(runs) * 4  # answered at attempt 1, 2, 3 and missing, per run
