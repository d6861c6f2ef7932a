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


def test_data_readme_lists_every_committed_run_as_the_runs_command_prints_it():
    """data/README.md's run table is `python -m moralkit runs` on data/raw: it cannot drift from the data."""
    import re

    text = (paths.project_root() / "data" / "README.md").read_text()
    m = re.search(r"<!-- runs: python -m moralkit runs -->\n(.*?)\n<!-- /runs -->", text, re.S)
    assert m, "data/README.md has lost its runs table markers"
    expected = summary.runs_markdown(summary.find_runs(paths.data_dir() / "raw"))
    assert m.group(1) == expected, ("data/README.md's run table is out of date: replace it with the output of "
                                    "`python -m moralkit runs`")


def test_moralchoice_completed_counts_scenarios_by_m():
    att = [dict(scenario_id=s, question_type=q, ordering=o)
           for s, m in (("a", 5), ("b", 5), ("c", 1)) for q in ("ab", "repeat", "compare") for o in (0, 1)
           for _ in range(m)]
    att += [dict(scenario_id="c", question_type="ab", ordering=0)] * 2  # c: one form extended, the rest not
    assert summary._moralchoice_completed(att) == "3 scenarios, 68 answers; M = 5 on 2, M = 1 on 1"


def test_runs_markdown_of_an_api_model_without_licence(tmp_path):
    """Issue 26: `moralkit runs` crashed under pandas 3 (AttributeError: 'float' object has no attribute
    'replace') for any model outside the bundled registry, whose licence is unknown (None -> NaN)."""
    run = tmp_path / "psm-api"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(dict(
        survey="psm", label="gpt-x", backend="openai", sampling={"temperature": 1.0}, seed=0, max_attempts=3,
        backend_info={"backend": "openai", "model": "gpt-x"}, created="2026-11-26T00:00:00Z",
        sessions=[{"argv": ["python", "-m", "moralkit", "collect", "psm", "--model", "gpt-x"]}])))
    (run / "records.jsonl").write_text(json.dumps(dict(kind="attempt", task="r000", attempt=1, status="ok",
                                                       parsed=[1, 2, 3, 4, 5], latency_s=0.1)) + "\n")
    text = summary.runs_markdown([run])
    row = text.splitlines()[2]
    assert row.startswith("| psm-api | psm | gpt-x |  | 1.0 | 0 |"), row  # the unknown licence is an empty cell
    assert "`python -m moralkit collect psm --model gpt-x`" in row


def test_find_runs_defaults_to_the_projects_raw_runs_from_moralkit_runs(tmp_path, monkeypatch):
    """Without a root, find_runs looks where moralkit.runs says the collector's runs live (MORALKIT_DATA_DIR)."""
    from moralkit import runs

    run = _run(tmp_path, {"r000": ["ok"]})
    monkeypatch.setenv("MORALKIT_DATA_DIR", str(tmp_path / "data"))
    assert summary.find_runs() == []  # no raw/ folder yet
    raw = runs.run_dir("raw")
    raw.mkdir(parents=True)
    run.rename(raw / run.name)
    assert summary.find_runs() == [raw / "psm-sim"]
    assert summary.find_runs(survey="moralchoice") == []


def test_a_run_is_read_once_until_its_records_change(tmp_path, monkeypatch):
    """The tables of notebook 01 read each run several times: the records are decoded once, and again only
    after the record file changes (a run resumed meanwhile)."""
    run = _run(tmp_path, {"r000": ["ok"], "r001": ["no_option", "ok"]})
    reads = []
    real = summary.read_records
    monkeypatch.setattr(summary, "read_records", lambda path, *a, **k: reads.append(path) or real(path, *a, **k))
    monkeypatch.setattr(summary, "_READ", {})
    first = summary.psm_quality_table([run])
    assert summary.status_table([run])["ok"].iloc[0] == 2 and summary.runs_table([run])["requests"].iloc[0] == 3
    assert len(reads) == 1
    with gzip.open(run / "records.jsonl.gz", "wt") as f:  # the run gains an attempt (resumed)
        for t, k, s in (("r000", 1, "ok"), ("r001", 1, "no_option"), ("r001", 2, "ok"), ("r002", 1, "ok")):
            f.write(json.dumps(dict(kind="attempt", task=t, attempt=k, status=s, latency_s=0.1,
                                    parsed=[1, 2, 3, 4, 5])) + "\n")
    again = summary.psm_quality_table([run])
    assert len(reads) == 2 and again["requests"].iloc[0] == first["requests"].iloc[0] + 1
