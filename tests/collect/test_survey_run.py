"""Notebook 01's live collection (``collect = True``) as a package function: ``moralkit.collect.survey_run``.

Driven through the official ``openai`` SDK against the local fake OpenAI API (:mod:`moralkit.testing.fake_openai`,
answers are a hash of prompt and seed: never presented as LLM output); a few requests per test.
"""

import pytest

from moralkit.collect.store import read_records
from moralkit.collect.survey_run import collect_survey, collection_estimate, run_dir_name
from moralkit.errors import MoralkitError
from moralkit.testing.fake_openai import FakeOpenAI

KEY = "sk-test-survey-run-000000"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("SURVEY_RUN_KEY", KEY)


def _api(srv):
    return dict(backend="openai", base_url=srv.url, api_key_env="SURVEY_RUN_KEY", progress=False)


def test_psm_collection_is_named_like_the_command_line_and_resumes_without_sending(tmp_path):
    """(The first test of the file pays the imports of the openai SDK and the collectors, about 1 s of CPU.)"""
    with FakeOpenAI() as srv:
        first = collect_survey("psm", "fake-chat", quick=True, data=tmp_path, **_api(srv))
        sent = len(srv.bodies("/chat/completions"))
        again = collect_survey("psm", "fake-chat", limit=2, data=tmp_path, **_api(srv))
        resent = len(srv.bodies("/chat/completions")) - sent
    assert first.run_dir == tmp_path / "raw" / "psm-fake-chat-t1-s0" and first.complete
    assert first.quality["rounds"] == 2 and sent >= 3  # round 0 and two constrained rounds
    assert {r["kind"] for r in read_records(first.run_dir)} >= {"attempt"}
    assert "rounds (incl. round 0)" in first.line
    assert first.summary("shown/dir").startswith("shown/dir {") and first.summary().endswith(first.line)
    assert again.complete and resent == 0 and again.quality == first.quality  # resumed: nothing sent again


def test_a_budget_stop_is_kept_resumable_and_said(tmp_path):
    with FakeOpenAI() as srv:
        stopped = collect_survey("psm", "fake-chat", limit=2, out=tmp_path / "run", max_cost=1e-9, price_in=1000.0,
                                 price_out=1000.0, **_api(srv))
        done = collect_survey("psm", "fake-chat", limit=2, out=tmp_path / "run", **_api(srv))
    assert not stopped.complete and stopped.quality is None and stopped.summary() == stopped.line
    assert "resum" in stopped.line.lower() or "re-run" in stopped.line.lower()
    assert (tmp_path / "run" / "manifest.json").exists()
    assert done.complete and done.quality["rounds"] == 2


def test_moralchoice_collection_and_its_estimate(tmp_path):
    with FakeOpenAI() as srv:
        run = collect_survey("moralchoice", "fake-chat", n_scenarios=1, samples=1, seed=3, ambiguity="high",
                             data=tmp_path, **_api(srv))
        n = len(srv.bodies("/chat/completions"))
    assert run.run_dir.name == "mc-high-fake-chat-t1-s3" and run.complete
    assert n == 6  # six question forms x M = 1 sample of one scenario
    assert sum(run.quality["decision"].values()) == 6
    est = collection_estimate("moralchoice", "fake-chat", "openai", ambiguity="high", n_scenarios=1, samples=1,
                              price_in=1.0, price_out=4.0)
    assert est.loc[est["mode"] == "online", "requests"].item() == 6
    psm = collection_estimate("psm", "fake-chat", "openai", quick=True)  # quick: 2 constrained rounds
    assert psm.loc[psm["mode"] == "online", "requests"].item() == 3


def test_bad_survey_and_misplaced_base_url_are_refused(tmp_path):
    with pytest.raises(MoralkitError, match="survey must be"):
        collect_survey("moral", "m", out=tmp_path / "x")
    with pytest.raises(MoralkitError, match="survey must be"):
        run_dir_name("ab", "m")
    with pytest.raises(MoralkitError, match="base_url applies to backend='openai' only"):
        collect_survey("psm", "m", backend="anthropic", base_url="http://127.0.0.1:1/v1", out=tmp_path / "x")
