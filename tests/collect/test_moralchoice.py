"""MoralChoice runner: six forms x M samples, headers, mapping, resume, export layout.

Uses a *test double* backend (scripted strings, never written to ``data/``); the real-model
path is covered in ``test_collect_server.py``. Scherrer et al. (2023), Section 3.3, Appendix B.
"""

import warnings
from pathlib import Path

import pandas as pd
import pytest

import moralkit.moralchoice as mc
from moralkit.collect.backends import Backend, Completion
from moralkit.collect.moralchoice import (
    RESPONSE_COLUMNS,
    export_moralchoice,
    moralchoice_quality,
    run_moralchoice,
    select_scenarios,
)
from moralkit.collect.store import read_records

SHARED = Path(__file__).resolve().parents[3] / "shared" / "moralchoice"


class EchoFirst(Backend):
    """Test double: 'A' / 'yes' / repeats the first option shown. Records the messages it got."""

    name = "scripted-test-double"
    model = "echo-first"

    def __init__(self, batch_size=4):
        self.batch_size = batch_size
        self.seen = []

    def generate(self, requests):
        out = []
        for r in requests:
            self.seen.append(r)
            q = r.messages[-1]["content"]
            if "Respond solely with A or B" in q:
                t = "A"
            elif "Respond solely with yes or no" in q:
                t = "Yes"
            else:
                t = q.split("\n- ")[1].strip()
            out.append(Completion(text=t, prompt_tokens=50, completion_tokens=2, latency_s=0.01, model=self.model,
                                  started=1.7e9, finish_reason="stop"))
        return out


@pytest.fixture(scope="module")
def low():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mc.load_scenarios("low")


def test_six_forms_headers_and_mapping(tmp_path, low):
    b = EchoFirst()
    ids = list(low["scenario_id"][:3])
    df = run_moralchoice(b, tmp_path / "r", ambiguity="low", scenarios=ids, samples=2, progress=False)
    assert len(df) == 3 * 6 * 2 and list(df.columns) == list(RESPONSE_COLUMNS)
    # the respondent's label is the model id (as in the PSM export); the backend has its own column
    assert set(df["model_id"]) == {b.model} and set(df["backend"]) == {b.name}
    # the first option shown is chosen: action1 under ordering 0, action2 under ordering 1
    assert (df.loc[df.question_ordering == 0, "decision"] == "action1").all()
    assert (df.loc[df.question_ordering == 1, "decision"] == "action2").all()
    t = mc.load_templates()
    sc = low.set_index("scenario_id").loc[ids[0]]
    for r in b.seen:
        assert r.messages[0]["role"] == "system" and len(r.messages) == 2
    h, q = mc.build_prompt(sc.rename(None).to_dict() | {"context": sc["context"]}, "repeat", 1, t)
    assert any(r.messages == ({"role": "system", "content": h}, {"role": "user", "content": q}) for r in b.seen)
    assert (df.eval_temperature == 1.0).all() and (df.eval_technique == "top_p_sampling").all()
    assert set(df.eval_sample_nb) == {0, 1} and (df.answer == df.answer_raw).all()
    q = moralchoice_quality(tmp_path / "r")
    assert q["answers"] == 36 and q["decision"] == {"action1": 18, "action2": 18}


def test_prepend_header_and_resume(tmp_path, low):
    b = EchoFirst(batch_size=5)
    run_moralchoice(b, tmp_path / "r", ambiguity="low", n_scenarios=2, samples=1, header="prepend",
                    question_types=("ab",), progress=False)
    assert all(len(r.messages) == 1 and r.messages[0]["content"].startswith("You are an AI assistant")
               for r in b.seen)
    n = len(b.seen)
    run_moralchoice(b, tmp_path / "r", ambiguity="low", n_scenarios=2, samples=1, header="prepend",
                    question_types=("ab",), progress=False)
    assert len(b.seen) == n  # complete: nothing re-sent
    run_moralchoice(b, tmp_path / "r", ambiguity="low", n_scenarios=2, samples=2, header="prepend",
                    question_types=("ab",), progress=False)
    assert len(b.seen) == 2 * n  # extended with a second sample
    keys = [r["task"] for r in read_records(tmp_path / "r")]
    assert len(keys) == len(set(keys)) == 8


def test_export_matches_shared_layout(tmp_path, low):
    run_moralchoice(EchoFirst(), tmp_path / "r", ambiguity="low", n_scenarios=2, samples=1, progress=False)
    out = export_moralchoice(tmp_path / "r", tmp_path / "x.csv.gz")
    back = pd.read_csv(out, keep_default_na=False)
    ref_files = sorted((SHARED / "responses" / "high").glob("*.csv.gz"))
    if ref_files:
        ref = pd.read_csv(ref_files[0], keep_default_na=False, nrows=3)
        # the shared layout, then the backend and provider of the project's own runs
        assert list(back.columns) == list(ref.columns) + ["backend", "provider"]
        assert len(back.timestamp[0]) == len(ref.timestamp[0])  # YYYY-MM-DD_HH:MM:SS
    # the analysis reader accepts it
    tidy = mc.read_responses(out)
    assert len(tidy) == 12 and set(tidy["model"]) == {"echo-first"}
    assert set(back["backend"]) == {"scripted-test-double"} and set(back["provider"]) == {""}


def test_subsets_and_errors(low):
    a = select_scenarios(low, n=50, seed=0)
    assert len(a) == 50 and a.equals(select_scenarios(low, n=50, seed=0))
    assert list(a.scenario_id) == [s for s in low.scenario_id if s in set(a.scenario_id)]  # table order
    with pytest.raises(ValueError, match="unknown scenario ids"):
        select_scenarios(low, ids=["nope"])
    with pytest.raises(ValueError, match="either"):
        select_scenarios(low, ids=["C_001"], n=2)
    with pytest.raises(ValueError, match="n_scenarios"):
        select_scenarios(low, n=10_000)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="question types"):
        run_moralchoice(EchoFirst(), tmp_path / "r", ambiguity="low", question_types=("xy",), progress=False)
    with pytest.raises(ValueError, match="header"):
        run_moralchoice(EchoFirst(), tmp_path / "r", ambiguity="low", header="user", progress=False)
    with pytest.raises(ValueError, match="samples"):
        run_moralchoice(EchoFirst(), tmp_path / "r", ambiguity="low", samples=0, progress=False)


def test_shuffled_order_and_limit_complete_random_scenarios(tmp_path, low):
    """--order shuffled --limit k: each session completes the next k scenarios of a seeded random order
    (all six forms and samples), a later session the next ones; the answers equal a run in table order."""
    ids = list(low["scenario_id"][:12])
    b = EchoFirst(batch_size=4)
    first = run_moralchoice(b, tmp_path / "s", ambiguity="low", scenarios=ids, samples=2, order="shuffled",
                            limit=3, progress=False)
    got = first.groupby("scenario_id").size()
    assert len(got) == 3 and (got == 12).all()  # three complete scenarios: 6 forms x 2 samples
    assert list(got.index) != ids[:3]  # not the table's first three (the table is grouped by rule)
    second = run_moralchoice(b, tmp_path / "s", ambiguity="low", scenarios=ids, samples=2, order="shuffled",
                             limit=4, progress=False)
    assert second["scenario_id"].nunique() == 7 and set(got.index) < set(second["scenario_id"])
    # the same seed gives the same order: a fresh run with limit 7 completes the same seven scenarios
    again = run_moralchoice(EchoFirst(batch_size=4), tmp_path / "t", ambiguity="low", scenarios=ids, samples=2,
                            order="shuffled", limit=7, progress=False)
    assert set(again["scenario_id"]) == set(second["scenario_id"])
    # order is not part of the run's identity: finishing in table order completes the run
    rest = run_moralchoice(b, tmp_path / "s", ambiguity="low", scenarios=ids, samples=2, progress=False)
    full = run_moralchoice(EchoFirst(batch_size=4), tmp_path / "u", ambiguity="low", scenarios=ids, samples=2,
                           progress=False)
    cols = ["scenario_id", "question_type", "question_ordering", "eval_sample_nb", "decision"]
    pd.testing.assert_frame_equal(rest[cols], full[cols])
    with pytest.raises(ValueError, match="order must be"):
        run_moralchoice(b, tmp_path / "v", ambiguity="low", scenarios=ids, order="random", progress=False)


def test_the_spec_is_the_manifests_identity_and_options_build_the_same_run(tmp_path, low):
    """Issue 29: ``MoralChoiceSpec`` holds exactly the manifest's identity; a run built from a spec and a plan
    equals one built from keyword options; mixing both ways, or an unknown option, is refused by name."""
    from moralkit.collect.moralchoice import MC_IDENTITY, MoralChoicePlan, MoralChoiceSpec
    from moralkit.collect.store import read_manifest
    from moralkit.errors import MoralkitError

    ids = list(low["scenario_id"][:2])
    spec = MoralChoiceSpec.for_backend(EchoFirst(), ambiguity="low", seed=3, max_tokens=12)
    plan = MoralChoicePlan(scenarios=ids, samples=1)
    a = run_moralchoice(EchoFirst(), tmp_path / "a", spec, plan, progress=False)
    b = run_moralchoice(EchoFirst(), tmp_path / "b", ambiguity="low", seed=3, max_tokens=12, scenarios=ids, samples=1,
                        progress=False)
    assert a.drop(columns="timestamp").equals(b.drop(columns="timestamp"))
    m = read_manifest(tmp_path / "a")
    assert {k: m[k] for k in MC_IDENTITY} == spec.identity() == {k: read_manifest(tmp_path / "b")[k] for k in MC_IDENTITY}
    assert spec.sampling["max_tokens"] == {"ab": 12, "compare": 12, "repeat": 12}
    with pytest.raises(MoralkitError, match="not both"):
        run_moralchoice(EchoFirst(), tmp_path / "c", spec, seed=4, progress=False)
    with pytest.raises(MoralkitError, match="unknown options"):
        run_moralchoice(EchoFirst(), tmp_path / "c", n_sceanrios=2, progress=False)
    with pytest.raises(MoralkitError, match="samples must be"):
        run_moralchoice(EchoFirst(), tmp_path / "c", spec, MoralChoicePlan(samples=0), progress=False)
    assert not (tmp_path / "c").exists()  # refused before the run directory is touched


def test_bad_options_raise_the_moralkit_error_family(tmp_path, low):
    """Issue 29: the collectors' checks raise MoralkitError / DataError (not a plain ValueError)."""
    from moralkit.collect.localmodels import local_model_path
    from moralkit.collect.personas import get_persona
    from moralkit.collect.psm import run_psm
    from moralkit.errors import DataError, MoralkitError

    with pytest.raises(MoralkitError, match="not both"):
        select_scenarios(low, ids=["x"], n=2)
    with pytest.raises(MoralkitError, match="unknown scenario ids"):
        select_scenarios(low, ids=["no-such-id"])
    with pytest.raises(MoralkitError, match="n_scenarios must be"):
        select_scenarios(low, n=0)
    with pytest.raises(MoralkitError, match="unknown persona"):
        get_persona("nihilist")
    with pytest.raises(MoralkitError, match="unknown local model"):
        local_model_path("no-such-model")
    with pytest.raises(MoralkitError, match="order must be"):
        run_psm(EchoFirst(), tmp_path / "p", order="backwards", progress=False)
    with pytest.raises(MoralkitError, match="max_attempts"):
        run_psm(EchoFirst(), tmp_path / "p", max_attempts=0, progress=False)
    ids = list(low["scenario_id"][:1])
    run_moralchoice(EchoFirst(), tmp_path / "a", ambiguity="low", scenarios=ids, samples=1, progress=False)
    run_moralchoice(EchoFirst(), tmp_path / "b", ambiguity="low", scenarios=ids, samples=1, label="other",
                    progress=False)
    with pytest.raises(DataError, match="one model"):
        export_moralchoice([tmp_path / "a", tmp_path / "b"], tmp_path / "x.csv.gz")
