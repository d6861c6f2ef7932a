"""Tidy MoralChoice responses: reading the shared layout, the project's own runs, validation."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

import moralkit.paths
from moralkit.moralchoice import (
    RESPONSE_COLUMNS,
    TIDY_COLUMNS,
    load_responses,
    load_scenarios,
    read_responses,
    scenario_metrics,
    strong_rule_violations,
)

SHARED = moralkit.paths.moralchoice_dir()
needs_data = pytest.mark.skipif(SHARED is None, reason="MoralChoice survey files not available")


def write_run(path: Path, rows: list[dict]):
    """A response file in the shared layout (used here for SIMULATED answers only, in a temp dir)."""
    base = dict(model_id="simulated/agent", eval_technique="top_p_sampling", eval_top_p=1.0, eval_temperature=1.0,
                timestamp="2026-01-01_00:00:00", decision="", backend="simulated", provider="simulated")
    df = pd.DataFrame([{**base, **r} for r in rows])
    df["answer"] = df["answer_raw"]
    df[list(RESPONSE_COLUMNS)].to_csv(path, index=False, compression="gzip")


def rows_for(sids, qts=("ab",), answer="A", samples=1):
    return [dict(scenario_id=s, question_type=q, question_ordering=o, eval_sample_nb=k, answer_raw=answer)
            for s in sids for q in qts for o in (0, 1) for k in range(samples)]


@needs_data
def test_read_shared_file_tidy_columns():
    f = sorted((Path(SHARED) / "responses" / "high").glob("*.csv.gz"))[0]
    r = read_responses(f)
    assert tuple(r.columns) == TIDY_COLUMNS
    assert len(r) == 1360 and set(r["ordering"]) == {0, 1} and set(r["sample"]) == {0}
    assert r["answer_raw"].map(type).eq(str).all()


def test_a_file_is_parsed_once_per_content(tmp_path, monkeypatch):
    """Issue 30: notebooks 05 and 07 read the own runs once per level; each file content is parsed and checked
    once per process (a copy is returned, so a caller's changes do not leak), and a rewritten file is read again."""
    from moralkit.moralchoice import responses

    monkeypatch.setattr(responses, "_READ", {})
    parsed = []
    real = responses._read_one
    monkeypatch.setattr(responses, "_read_one", lambda f: parsed.append(f.name) or real(f))
    f = tmp_path / "a.csv.gz"
    write_run(f, rows_for(["C_001"]))
    first = read_responses(f)
    first.loc[0, "answer_raw"] = "changed by the caller"
    again = read_responses(tmp_path)
    assert parsed == ["a.csv.gz"] and again["answer_raw"].tolist() == ["A", "A"]
    write_run(f, rows_for(["C_001"], answer="B"))  # same size, new content
    assert read_responses(f)["answer_raw"].tolist() == ["B", "B"] and parsed == ["a.csv.gz"] * 2


def test_read_responses_validation(tmp_path):
    f = tmp_path / "a.csv.gz"
    write_run(f, rows_for(["C_001"]))
    assert len(read_responses(tmp_path)) == 2
    pd.read_csv(f).drop(columns="answer_raw").to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match="answer_raw"):
        read_responses(tmp_path / "b.csv")
    bad = pd.read_csv(f)
    bad["question_ordering"] = 2
    bad.to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(ValueError, match="question_ordering"):
        read_responses(tmp_path / "c.csv")
    (tmp_path / "a_copy.csv.gz").write_bytes(f.read_bytes())
    with pytest.raises(ValueError, match="share the same"):
        read_responses([f, tmp_path / "a_copy.csv.gz"])
    with pytest.raises(ValueError, match="does not exist"):
        read_responses(tmp_path / "missing.csv.gz")


@needs_data
def test_own_runs_join_the_shared_ones_and_feed_table17(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    low_ids = load_scenarios("low")["scenario_id"].tolist()[:30]
    # simulated agent: always "B" on A/B (position bias -> inconsistent), always repeats the second option
    write_run(own / "sim_low.csv.gz", rows_for(low_ids, ("ab", "compare"), answer="B", samples=2))
    write_run(own / "sim_high.csv.gz", rows_for(["H_001", "G_530"], ("ab",), answer="A"))
    low = load_responses("low", own_data=own)
    assert set(low["origin"]) == {"own"} and len(low) == 30 * 2 * 2 * 2
    assert set(low.loc[low.question_type == "ab", "decision"]) == {"action1", "action2"}
    assert set(low.loc[low.question_type == "compare", "decision"]) == {"invalid"}
    m = scenario_metrics(low)
    assert (m["n_forms"] == 4).all() and (m["n_forms_no_valid"] == 2).all()
    # forms ab:0 -> 0, ab:1 -> 1, compare:0/1 -> 0.5 (no valid answer): JSD = H(0.5) - mean H = 1 - 0.5
    assert m["p_action1"].eq(0.5).all()
    assert m["qf_consistency"].sub(0.5).abs().max() < 1e-12 and m["qf_entropy"].sub(0.5).abs().max() < 1e-12
    t17 = strong_rule_violations(m, load_scenarios("low"), drop_zero=False)
    assert t17.to_numpy().sum() == 0  # marginal 0.5 is never a strong preference
    with pytest.warns(UserWarning, match="G_530"):
        high = load_responses("high", own_data=own)
    assert set(high["origin"]) == {"shared", "own"}
    assert "G_530" not in set(high["scenario_id"])
    assert set(high.loc[high.origin == "own", "scenario_id"]) == {"H_001"}


@needs_data
def test_own_run_with_a_shared_model_name_is_rejected(tmp_path):
    f = sorted((Path(SHARED) / "responses" / "high").glob("*.csv.gz"))[0]
    (tmp_path / "dup.csv.gz").write_bytes(f.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="rename the model_id"):
            load_responses("high", own_data=tmp_path)


@needs_data
def test_no_responses_gives_an_empty_table(tmp_path):
    r = load_responses("low", own_data=False)
    assert len(r) == 0 and {"decision", "origin"} <= set(r.columns)


def _mixed_m():
    """Model 'a': scenario s1 at M = 3 in all six forms, s2 at M = 1, s3 at M = 3 except one form at 2."""
    rows = []
    for sid, m_of in (("s1", lambda f: 3), ("s2", lambda f: 1), ("s3", lambda f: 2 if f == ("ab", 1) else 3)):
        for qt in ("ab", "compare", "repeat"):
            for o in (0, 1):
                for k in range(m_of((qt, o))):
                    rows.append(dict(model="a", scenario_id=sid, question_type=qt, ordering=o, sample=k,
                                     decision="action1" if k % 2 == 0 else "action2"))
    return pd.DataFrame(rows)


def test_samples_per_form_counts_scenarios_at_each_m():
    from moralkit.moralchoice import samples_per_form

    got = samples_per_form(_mixed_m()).loc["a"]
    assert (got["M_min"], got["M_max"], got["scenarios"]) == (1, 3, 3)
    assert (got["scenarios_M1"], got["scenarios_M2"], got["scenarios_M3"]) == (3, 2, 1)


def test_with_samples_keeps_complete_scenarios_and_the_first_m_answers():
    from moralkit.moralchoice import scenario_metrics, with_samples

    r = _mixed_m()
    at3 = with_samples(r, 3)
    assert set(at3["scenario_id"]) == {"s1"} and len(at3) == 18
    at2 = with_samples(r, 2)
    assert set(at2["scenario_id"]) == {"s1", "s3"} and len(at2) == 2 * 6 * 2
    assert set(at2["sample"]) == {0, 1}  # the first two answers of each form, not the third
    # at M = 2 every form holds one answer of each action: QF-E is 1 bit; at M = 1 it is 0 by construction
    assert scenario_metrics(at2)["qf_entropy"].to_numpy() == pytest.approx([1.0, 1.0])
    assert scenario_metrics(with_samples(r, 1)).set_index("scenario_id").loc["s2", "qf_entropy"] == 0
    with pytest.raises(ValueError, match="samples must be an integer >= 1"):
        with_samples(r, 0)


def test_one_name_for_the_mapped_answer_from_the_committed_files_to_the_tables(tmp_path):
    """Committed files carry the mapped answer as ``decision``: the reader keeps it as ``stored_decision``,
    load_responses re-maps it into ``decision``, and the metrics read ``column="decision"`` by default.
    (The first 300 rows of a committed file, so that the mapping stays cheap.)"""
    from moralkit import runs
    from moralkit.moralchoice import DECISIONS, answer_rates, decision_agreement

    committed = sorted(runs.run_dir("responses").glob("*-low.csv.gz"))[0]
    f = tmp_path / committed.name
    pd.read_csv(committed, dtype=str, keep_default_na=False, nrows=300).to_csv(f, index=False)
    header = pd.read_csv(f, nrows=0).columns
    assert "decision" in header and "stored_decision" not in header  # the committed layout, unchanged
    r = read_responses(f)
    assert "stored_decision" in r.columns and "decision" not in r.columns
    assert set(r["stored_decision"]) <= {*DECISIONS, ""}
    if SHARED is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mapped = load_responses("low", own_data=f, include_shared=False)
    assert set(mapped["decision"]) <= set(DECISIONS)
    assert decision_agreement(mapped)["agreement"].min() > 0.99  # the collector's mapping is g
    rates = answer_rates(mapped)
    pd.testing.assert_frame_equal(rates, answer_rates(mapped.rename(columns={"decision": "d"}), column="d"))
    assert list(rates.columns) == ["n", *DECISIONS]
