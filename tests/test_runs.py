"""moralkit.runs: the project's own runs in one room (folder names, the default of every reader, the estimator)."""

import ast
from pathlib import Path

import pandas as pd
import pytest

from moralkit import runs
from moralkit.errors import DataError, MoralkitError

ROOT = Path(__file__).resolve().parents[1]


def test_run_dirs_follow_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MORALKIT_DATA_DIR", str(tmp_path))
    assert runs.run_dir("psm") == tmp_path / "psm"
    assert runs.run_dir("responses") == tmp_path / "moralchoice"
    assert runs.run_dir("likelihoods") == tmp_path / "moralchoice_likelihood"
    assert runs.run_dir("derived") == tmp_path / "derived"
    assert runs.run_dir("responses", "/elsewhere") == Path("/elsewhere/moralchoice")
    with pytest.raises(MoralkitError, match="kind must be one of"):
        runs.run_dir("moralchoice")


def test_own_runs_defaults_to_the_committed_folder_only_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("MORALKIT_DATA_DIR", str(tmp_path))
    assert runs.own_runs("responses") is False  # a fresh project: no runs yet
    (tmp_path / "moralchoice").mkdir()
    assert runs.own_runs("responses") == tmp_path / "moralchoice"
    assert runs.own_runs("responses", False) is False
    f = tmp_path / "x.csv"
    f.write_text("")
    assert runs.own_runs("responses", f) == f
    with pytest.raises(DataError, match=r"own_data_path='nowhere' does not exist.*None for the committed runs"):
        runs.own_runs("responses", "nowhere", name="own_data_path")


def test_every_reader_of_the_own_runs_takes_its_default_from_runs(tmp_path, monkeypatch):
    """load_responses, load_likelihoods, findings, crossmethod and the data check read MORALKIT_DATA_DIR's runs."""
    from moralkit import moralchoice as mc
    from moralkit.book.run import check_data
    from moralkit.moralchoice.likelihood import load_likelihoods
    from moralkit.studies import crossmethod

    monkeypatch.setenv("MORALKIT_DATA_DIR", str(tmp_path))
    bad = tmp_path / "moralchoice"
    bad.mkdir()
    (bad / "broken.csv").write_text("not,a,response,file\n1,2,3,4\n")
    with pytest.raises(DataError, match="broken.csv"):
        check_data()
    with pytest.raises(DataError, match="broken.csv"):
        mc.load_responses("high", include_shared=False)
    with pytest.raises(DataError, match="broken.csv"):
        crossmethod.load_own_runs(psm_path=ROOT / "data" / "psm", likelihood_path=False)
    assert load_likelihoods("high").empty  # no likelihood folder under this data dir


def test_the_psm_readers_find_the_committed_runs_through_runs(tmp_path, monkeypatch):
    """load_psm and hm_table1 (its default_dir, input hashes and command defaults) ask runs.run_dir: moving a
    folder in RUN_DIRS moves where they look."""
    import warnings

    from moralkit.psm import hm_table1
    from moralkit.psm.dataset import load_psm

    monkeypatch.setenv("MORALKIT_DATA_DIR", str(tmp_path))
    monkeypatch.setitem(runs.RUN_DIRS, "psm", "psm_elsewhere")
    monkeypatch.setitem(runs.RUN_DIRS, "derived", "derived_elsewhere")
    assert runs.run_dir("derived") == tmp_path / "derived_elsewhere"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "No PSM data yet"
        path, data = load_psm()
    assert (path, data) == (tmp_path / "psm_elsewhere", {})
    assert hm_table1.default_dir() == tmp_path / "derived_elsewhere"
    (tmp_path / "psm_elsewhere").mkdir()
    (tmp_path / "psm_elsewhere" / "a.csv.gz").write_bytes(b"x")
    assert list(hm_table1.input_hashes()) == ["a.csv.gz"]
    table, meta, why = hm_table1.load()
    assert table is None and meta is None and "derived_elsewhere/" in why


def test_no_reader_spells_a_run_folder_name():
    """The folder names live in runs.RUN_DIRS only: no ``"moralchoice_likelihood"`` literal elsewhere in the
    modules that read the own runs."""
    for rel in ("moralkit/moralchoice/responses.py", "moralkit/moralchoice/likelihood.py",
                "moralkit/studies/findings.py", "moralkit/studies/crossmethod.py", "notebooks/05_moralchoice.py"):
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        lits = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not lits & {"moralchoice_likelihood", "psm/"}, rel
        assert "moralchoice_likelihood" not in " ".join(lits), rel


def _metrics(model, ids, estimator):
    return pd.DataFrame({"model": model, "scenario_id": ids, "estimator": estimator})


def test_prefer_exact_and_best_estimate_differ_only_on_partial_likelihoods():
    sampled = pd.concat([_metrics("a", ["s1", "s2"], "sampling"), _metrics("b", ["s1", "s2"], "sampling")])
    exact = pd.concat([_metrics("a", ["s1", "s2", "s3"], "exact"), _metrics("b", ["s1"], "exact")])
    out, notes = runs.prefer_exact(sampled, exact)
    assert out.groupby("model")["estimator"].first().to_dict() == {"a": "exact", "b": "sampling"}
    assert any("cover 1 of the 2" in n for n in notes)
    best = runs.best_estimate({"high": sampled}, {"high": exact.assign(model=exact["model"] + "-x")}, suffix="-x")
    assert list(best) == ["high"]
    assert best["high"].groupby("model")["estimator"].first().to_dict() == {"a-x": "exact", "b-x": "exact"}
    assert best["high"]["model"].iloc[0] == "a-x"  # the exact rows first
    only_sampled = runs.best_estimate({"low": sampled}, {})
    assert only_sampled["low"].equals(sampled.reset_index(drop=True))
