"""The ``top_logprobs`` estimator as a collection (``moralkit likelihood --estimator top_logprobs``).

The server is :class:`moralkit.testing.faultserver.FaultServer`, a test double whose first-token
distribution is known (:func:`~moralkit.testing.faultserver.fake_token_distribution`); the client is the
real collector (the ``openai`` backend, i.e. the official ``openai`` SDK). The SIGKILL/resume test of this
estimator shares its helper with the exact one's (``tests/collect/test_hardening.py``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from moralkit.collect.backends import OpenAIBackend
from moralkit.collect.likelihood_run import export_likelihood, run_likelihood
from moralkit.collect.runner import CollectionRefusedError
from moralkit.collect.store import read_manifest, read_records
from moralkit.errors import MoralkitError
from moralkit.testing.faultserver import TRANSIENT_FAULTS, FaultServer, fake_token_distribution

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "moralchoice"
pytestmark = pytest.mark.skipif(not SHARED.exists(), reason="MoralChoice survey files not available")
KEY = "sk-test-fault-server-key-0000"
KW = dict(ambiguity="low", n_scenarios=2, progress=False, estimator="top_logprobs")


def _api(srv, **kw):
    os.environ["FAULT_KEY"] = KEY
    return OpenAIBackend("fault-double", base_url=srv.url, api_key_env="FAULT_KEY",
                         **{"concurrency": 4, "timeout": 30.0, "backoff": 0.02, **kw})


def _known(scenario, q, o):
    """(mass_action1, mass_action2) of the double's distribution for this form, mapped by hand."""
    from moralkit import moralchoice as mc

    _, text = mc.build_prompt(scenario, q, o, mc.load_templates())
    d = fake_token_distribution([{"role": "user", "content": text}])
    first = sum(p for t, p in d.items() if t.strip().lower() in ("a", "yes"))
    second = sum(p for t, p in d.items() if t.strip().lower() in ("b", "no"))
    return (first, second) if o == 0 else (second, first)


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    """One run under 30 % transient faults (429, 5xx, dropped connections, cut bodies, ...), finished in one call.
    (No ``timeout`` fault: under load a client timeout could also hit a usable answer, and the test counts them.)"""
    out = tmp_path_factory.mktemp("lp") / "run"
    faults = tuple(f for f in TRANSIENT_FAULTS if f != "timeout")
    from moralkit.collect.runner import CollectionIncompleteError

    with FaultServer(rate=0.3, faults=faults, seed=11, retry_after=0) as srv:
        for attempt in range(3):  # resume as documented if one request met a fault on all 7 tries (0.3^7 each)
            try:
                df = run_likelihood(_api(srv), out, samples=2, **KW)
                break
            except CollectionIncompleteError:
                if attempt == 2:
                    raise
        usable = list(srv.usable)
    return out, df, usable


def test_the_estimate_recovers_the_servers_known_distribution(faulty_run):
    from moralkit import moralchoice as mc

    out, df, _ = faulty_run
    table = mc.load_scenarios("low").set_index("scenario_id")
    lp = df[df["question_type"].isin(["ab", "compare"])]
    assert len(lp) == 2 * 4 and set(lp["estimator"]) == {"top_logprobs"}
    for _, r in lp.iterrows():
        m1, m2 = _known(table.loc[r["scenario_id"]].to_dict(), r["question_type"], r["ordering"])
        assert r["mass_action1"] == pytest.approx(m1, abs=1e-12) and r["mass_action2"] == pytest.approx(m2, abs=1e-12)
        assert r["p_action1"] == pytest.approx(m1 / (m1 + m2), abs=1e-12)
        assert r["uncovered"] == pytest.approx(0.1, abs=1e-12)  # "I" and "The" map to no answer
    # the known shares differ by form, so a form mixed up with another would not match
    assert lp["p_action1"].round(6).nunique() == len(lp)


def test_the_repeat_form_is_sampled_and_says_so(faulty_run):
    out, df, _ = faulty_run
    rep = df[df["question_type"] == "repeat"]
    assert len(rep) == 2 * 2 and set(rep["estimator"]) == {"sampling"} and set(rep["n_answers"]) == {2}
    recs = [r for r in read_records(out) if r.get("kind", "attempt") == "attempt" and r["part"] == "sample"]
    for _, row in rep.iterrows():
        got = Counter(r["parsed"] for r in recs
                      if r["scenario_id"] == row["scenario_id"] and r["ordering"] == row["ordering"])
        assert sum(got.values()) == 2
        assert row["mass_action1"] == pytest.approx(got["action1"] / 2)
        assert row["mass_action2"] == pytest.approx(got["action2"] / 2)
    # the double repeats an option verbatim; only its "surrogate" fault (a lone surrogate appended) is invalid
    assert all(r["parsed"] in ("action1", "action2") or r["raw"].endswith("\ud83d") for r in recs)
    m = read_manifest(out)
    assert m["estimator"] == "top_logprobs" and m["top_logprobs"] == 20 and m["repeat_samples"] == 2
    assert m["form_estimators"] == {"ab": "top_logprobs", "repeat": "sampling", "compare": "top_logprobs"}
    assert "cannot be scored" in m["fallback"]["repeat"]


def test_records_keep_the_alternatives_and_nothing_usable_is_lost(faulty_run, tmp_path):
    out, df, usable = faulty_run
    recs = read_records(out)
    att = [r for r in recs if r.get("kind", "attempt") == "attempt"]
    assert len(att) == 2 * (4 + 2 * 2)  # one per form, two samples per repeat ordering
    assert sum(r.get("kind") == "error" for r in recs) > 0  # the faults were met
    assert Counter(s for s, _ in usable) == Counter(r["seed"] for r in att)  # every usable answer, once
    lp = [r for r in att if r["part"] == "top_logprobs"]
    assert all(len(r["parsed"]["top_logprobs"]) == 8 and r["estimator"] == "top_logprobs" for r in lp)
    # export: the same table, with the estimator of every row
    path = export_likelihood([out], tmp_path / "lp.csv.gz")
    from moralkit.moralchoice.likelihood import read_likelihoods

    back = read_likelihoods(path)
    assert list(back["estimator"]) == list(df["estimator"]) and len(back) == len(df)


def test_resume_sends_only_what_is_missing(tmp_path):
    with FaultServer(rate=0.0) as srv:
        run_likelihood(_api(srv), tmp_path / "r", samples=2, limit=1, question_types=("ab", "repeat"), **KW)
        first = len(srv.usable)
        assert first == 2 + 2 * 2
        df = run_likelihood(_api(srv), tmp_path / "r", samples=2, question_types=("ab", "repeat"), **KW)
        assert len(srv.usable) == 2 * first  # the other scenario only
        run_likelihood(_api(srv), tmp_path / "r", samples=2, question_types=("ab", "repeat"), **KW)
        assert len(srv.usable) == 2 * first  # nothing left: nothing sent
        # another number of samples is another run: refused before anything is sent
        with pytest.raises(ValueError, match="repeat_samples"):  # the record store's identity check
            run_likelihood(_api(srv), tmp_path / "r", samples=4, question_types=("ab", "repeat"), **KW)
    assert df["scenario_id"].nunique() == 2


def test_what_cannot_work_is_refused_clearly(tmp_path):
    with FaultServer(rate=0.0) as srv:
        with pytest.raises(MoralkitError, match="top_logprobs must be"):
            run_likelihood(_api(srv), tmp_path / "a", top_logprobs=21, **KW)
        with pytest.raises(MoralkitError, match="estimator must be"):
            run_likelihood(_api(srv), tmp_path / "b", **{**KW, "estimator": "logits"})
        with pytest.raises(MoralkitError, match="samples applies"):
            run_likelihood(_api(srv), tmp_path / "c", samples=3, **{**KW, "estimator": "token_probability"})

    class Local:
        name, model = "transformers", "m"

    with pytest.raises(MoralkitError, match="OpenAI-compatible API"):
        run_likelihood(Local(), tmp_path / "d", **KW)


def test_a_server_without_logprobs_stops_the_run_naming_why(tmp_path, monkeypatch):
    """A server that ignores ``logprobs`` (returns ``logprobs: null``) is refused at the first answer."""
    import moralkit.testing.faultserver as fs

    monkeypatch.setattr(fs, "_logprobs_choice", lambda m, s, k: ("A", None))
    with FaultServer(rate=0.0) as srv:
        with pytest.raises(CollectionRefusedError, match="log-probabilities"):
            run_likelihood(_api(srv), tmp_path / "r", question_types=("ab",), **KW)


def test_cli_help_and_output_name_the_estimator_and_the_fallback(tmp_path, capsys, monkeypatch):
    """The command line in-process (``moralkit.cli.main``): its help, its printed line, its manifest."""
    from moralkit.cli import build_parser, main

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["likelihood"]
    h = sub.format_help()
    assert "--estimator" in h and "top_logprobs" in h and "SAMPLED" in h
    monkeypatch.setenv("FAULT_KEY", KEY)
    args = ["likelihood", "--backend", "openai", "--model", "fault-double", "--api-key-env", "FAULT_KEY",
            "--ambiguity", "low", "--n-scenarios", "1", "--samples", "2", "--estimator", "top_logprobs",
            "--out", str(tmp_path / "r"), "--export", str(tmp_path / "r.csv.gz"), "--no-progress"]
    with FaultServer(rate=0.0) as srv:
        assert main(args[:5] + ["--base-url", srv.url] + args[5:]) == 0
        assert main(args[:5] + ["--base-url", srv.url] + args[5:] + ["--temperature", "0.7"]) == 2
    out = capsys.readouterr()
    assert "repeat' form cannot be scored" in out.out and "6 rows" in out.out
    assert "temperature 1" in out.err
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["estimator"] == "top_logprobs"
