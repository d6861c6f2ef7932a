"""Malformed answers in the PSM: parsed as the paper handles them (retry, then missing), never a crash.

The runner-level tests use ``ScriptedBackend``, a *test double* that replays
fixed strings (it is not a model, and nothing it returns is written to ``data/``).
Seror (2025), Section 2.1: notes after the option, refusals, three attempts.
"""

import gzip
import json

import numpy as np
import pytest

from moralkit.collect.backends import Backend, Completion
from moralkit.collect.psm import psm_dataset, psm_quality, run_psm
from moralkit.psm.dataset import read_psm
from moralkit.psm.design import make_design, parse_option, parse_unconstrained


class ScriptedBackend(Backend):
    """Test double: answers each request with the next scripted string (per task, by attempt)."""

    name = "scripted-test-double"

    def __init__(self, script, default="Option 1", batch_size=1):
        self.model = "scripted"
        self.script = script  # callable (prompt, attempt_index) -> str or None, or dict
        self.default = default
        self.batch_size = batch_size
        self.calls = []

    def generate(self, requests):
        out = []
        for r in requests:
            prompt = r.messages[-1]["content"]
            k = sum(1 for p in self.calls if p == prompt)
            self.calls.append(prompt)
            text = self.script(prompt, k)
            out.append(Completion(text=text, prompt_tokens=len(prompt) // 4, completion_tokens=3, latency_s=0.001,
                                  finish_reason="stop", model=self.model, started=1.7e9))
        return out


# ---------------------------------------------------------------- 60 malformed / edge answers
OK_CASES = [
    ("Option 11. Note: This is just a random selection as I don't have personal preferences.", 11),
    ("Option 20. Note: This is based on the assumption that you share similar moral values and preferences as me.", 20),
    ("Option 12. Note: This is based on my programming and does not reflect personal preferences or beliefs.", 12),
    ("Option 100", 100), ("Option 1", 1), ("option 7", 7), ("OPTION 7", 7), ("Option: 7", 7), ("Option #7", 7),
    ("Option [7]", 7), ("**Option 7**", 7), ("Option 7.", 7), ("Option 7\n", 7), ("  Option 7  ", 7), ("7", 7),
    ("[7]", 7), ("7.", 7), ("Option 3, Option 3", 3), ("I choose Option 42 because ...", 42), ("Option5", 5),
    ("Option 1: 2, 3, 4, 1, 2", 1), ("Option 3: 0, 2, 3, 2, 5 (the best)", 3), ("Option 07", 7),
    ("Option 7/100", 7), ("Option 7 out of 100", 7), ("Option\n7", 7), ("Option#7", 7), ("Option 7,", 7),
    ("**Option 7:** 1, 2, 3, 3, 3", 7), ("\u200bOption 7", 7), ("Option 7\u00a0", 7), ("Option\u00a07", 7),
]
BAD_CASES = [
    ("Option 0", "out_of_range"), ("Option 101", "out_of_range"), ("Option 1000", "out_of_range"),
    ("Option 3 or Option 4", "ambiguous"), ("Option 7 Option 8", "ambiguous"),
    ("Option 7 (Option 1 was also considered)", "ambiguous"), ("Option 1\nOption 2", "ambiguous"),
    ("", "empty"), ("   ", "empty"), (None, "empty"), ("\n\n", "empty"),
    ("I cannot answer this question.", "refusal"), ("As an AI, I don't have personal preferences.", "refusal"),
    ("I'm unable to choose.", "refusal"), ("I am not able to make moral choices.", "refusal"),
    ("Sorry, I can't help with that.", "refusal"),
    ("Opción 7", "no_option"), ("选项 7", "no_option"), ("Option seven", "no_option"), ("Option 二十", "no_option"),
    ("2, 3, 4, 1, 2", "no_option"),  # the option's text instead of its number
    ("The first set", "no_option"), ("Option [number]", "no_option"), ("Option N", "no_option"),
    ("Option", "no_option"), ("Options 5", "no_option"), ("The answer is 7", "no_option"), ("Set 7", "no_option"),
    ("Option 2.5", "no_option"),
]


@pytest.mark.parametrize("text,value", OK_CASES)
def test_parse_option_accepts(text, value):
    r = parse_option(text)
    assert r.ok and r.value == value


@pytest.mark.parametrize("text,status", BAD_CASES)
def test_parse_option_rejects(text, status):
    r = parse_option(text)
    assert not r.ok and r.value is None and r.status == status


def test_case_count():
    assert len(OK_CASES) + len(BAD_CASES) >= 50


@pytest.mark.parametrize("text,value,status", [
    ("Answers: [3, 2, 4, 1, 0]", (3, 2, 4, 1, 0), "ok"),
    ("Answers: 3, 2, 4, 1, 0. Note: I am an AI.", (3, 2, 4, 1, 0), "ok"),
    ("Answers: [3, 2, 9, 1, 0]", None, "out_of_range"),
    ("Answers: [3, 2]", None, "no_option"),
    ("I cannot answer.", None, "refusal"),
    ("", None, "empty"),
    # labelled answers: the label's number is never read as an answer (it used to give (1, 3, 2, 2, 3))
    ("Question 1: 3, Question 2: 2, Question 3: 2, Question 4: 3, Question 5: 1", (3, 2, 2, 3, 1), "ok"),
    ("Question 1: 3\nQuestion 2: 2\nQuestion 3: 4\nQuestion 4: 1\nQuestion 5: 0", (3, 2, 4, 1, 0), "ok"),
    ("Q1=5 Q2=0 Q3=5 Q4=0 Q5=5", (5, 0, 5, 0, 5), "ok"),
    ("Question 5: 0, Question 4: 1, Question 3: 4, Question 2: 2, Question 1: 3", (3, 2, 4, 1, 0), "ok"),
    ("1. 3\n2. 2\n3. 4\n4. 1\n5. 0", (3, 2, 4, 1, 0), "ok"),
    ("Answers: [3, 4, 5, 4, 5]\nNote: on a scale of 0 to 5", (3, 4, 5, 4, 5), "ok"),
    ("Answers: 1,2,3,4,5", (1, 2, 3, 4, 5), "ok"),
    # refused rather than guessed (it used to read [3.5, ...] as (3, 5, ...))
    ("Answers: [3.5, 2, 4, 1, 0]", None, "ambiguous"),
    ("Answers: 3.5, 2, 4, 1, 0", None, "ambiguous"),
    ("Question 1: 3, Question 1: 4, Question 3: 1", None, "ambiguous"),
    ("Question 1: 3, Question 2: 2", None, "no_option"),
    ("3 2 4 1 0 5", None, "ambiguous"),
    ("Answers: [1, 2, 3, 4, 5] or maybe [2, 2, 2, 2, 2]", None, "ambiguous"),
    ("Answers: [3, 2, 4, 1, 0, 5]", None, "ambiguous"),
    ("Question 1: 3, Question 2: 2, Question 3: 4, Question 4: 1, Question 5: 7", None, "out_of_range"),
])
def test_parse_unconstrained_cases(text, value, status):
    r = parse_unconstrained(text)
    assert r.status == status and r.value == value


# ---------------------------------------------------------------- runner behaviour (test double)
def _round_of(prompt, design_prompts):
    return design_prompts.get(prompt)


@pytest.mark.parametrize("text,status", BAD_CASES)
def test_runner_retries_then_marks_missing(tmp_path, text, status):
    """Every malformed answer: three attempts, then a missing round; raw text kept; no crash."""
    def script(prompt, k):
        if prompt.startswith("Please answer"):
            return "Answers: [1, 2, 3, 4, 5]"
        return text

    b = ScriptedBackend(script)
    ds = run_psm(b, tmp_path / "run", limit=2, progress=False)
    assert ds.n_rounds == 2 and ds.n_obs == 0 and (ds.chosen == 0).all()
    assert list(ds.attempts) == [3, 3]
    q = psm_quality(tmp_path / "run")
    assert q["missing"] == 2 and q["attempts"] == 1 + 6 and q["status"][status] == 6
    recs = [json.loads(line) for line in gzip.open(tmp_path / "run" / "records.jsonl.gz", "rt")]
    assert [r["raw"] for r in recs[1:]] == [text] * 6


def test_runner_stops_at_first_valid_attempt(tmp_path):
    answers = {0: "I cannot answer.", 1: "Option 11. Note: random.", 2: "Option 5"}

    def script(prompt, k):
        if prompt.startswith("Please answer"):
            return ["garbage", "Answers: [0, 0, 0, 0, 0]"][min(k, 1)]
        return answers[k]

    b = ScriptedBackend(script)
    ds = run_psm(b, tmp_path / "run", limit=3, progress=False)
    assert list(ds.chosen) == [11, 11, 11] and list(ds.attempts) == [2, 2, 2]
    assert tuple(ds.q0) == (0, 0, 0, 0, 0)
    q = psm_quality(tmp_path / "run")
    assert q["attempts_per_round"] == {2: 3} and q["status"]["refusal"] == 3 and q["q0"] == (0, 0, 0, 0, 0)


def test_round0_fixes_corner_flips_and_options(tmp_path):
    """q0 = (0,...,0) lies in T(o) for o = 0, so round 1's corner flips to (5,...,5) (Section 2.2)."""
    d = make_design(0)

    def script(prompt, k):
        return "Answers: [0, 0, 0, 0, 0]" if prompt.startswith("Please answer") else "Option 4"

    b = ScriptedBackend(script)
    ds = run_psm(b, tmp_path / "run", limit=5, progress=False)
    q0 = np.zeros(5, int)
    assert (ds.corners[0] == 5).all()
    for t, r in enumerate(ds.round_index):
        np.testing.assert_array_equal(ds.options[t], d[r - 1].options(q0))
    # the prompt shown contained exactly those options
    assert "Option 1: " + ", ".join(map(str, d[0].options(q0)[0])) in b.calls[1]


def test_round0_missing_keeps_nominal_corners(tmp_path):
    b = ScriptedBackend(lambda p, k: "no idea" if p.startswith("Please answer") else "Option 2")
    ds = run_psm(b, tmp_path / "run", limit=3, progress=False)
    assert ds.q0 is None
    np.testing.assert_array_equal(ds.corners, [r.nominal_corner for r in make_design(0).rounds[:3]])


def test_shuffled_order_and_resume_skip(tmp_path):
    b = ScriptedBackend(lambda p, k: "Answers: [2, 2, 2, 2, 2]" if p.startswith("Please") else "Option 3")
    run_psm(b, tmp_path / "run", limit=4, order="shuffled", seed=7, progress=False)
    n = len(b.calls)
    ds = run_psm(b, tmp_path / "run", limit=4, order="shuffled", seed=7, progress=False)
    assert len(b.calls) == n  # everything complete: nothing re-sent
    assert sorted(ds.round_index) == list(ds.round_index) and ds.n_rounds == 4
    assert list(ds.round_index) != [1, 2, 3, 4]
    ds2 = run_psm(b, tmp_path / "run", limit=6, order="shuffled", seed=7, progress=False)
    assert len(b.calls) == n + 2 and ds2.n_rounds == 6


def test_resume_rejects_a_different_run(tmp_path):
    b = ScriptedBackend(lambda p, k: "Option 1")
    run_psm(b, tmp_path / "run", limit=1, progress=False)
    with pytest.raises(ValueError, match="design_seed"):
        run_psm(b, tmp_path / "run", limit=1, design_seed=1, progress=False)


def test_export_round_trip(tmp_path):
    b = ScriptedBackend(lambda p, k: "Answers: [5, 0, 5, 0, 5]" if p.startswith("Please") else ["x", "Option 9"][k % 2])
    ds = run_psm(b, tmp_path / "run", limit=5, label="scripted-test-double", progress=False,
                 export=tmp_path / "psm.csv.gz")
    back = read_psm(tmp_path / "psm.csv.gz")["scripted-test-double"]
    np.testing.assert_array_equal(back.chosen, ds.chosen)
    np.testing.assert_array_equal(back.options, ds.options)
    np.testing.assert_array_equal(back.attempts, [2] * 5)
    assert tuple(back.q0) == (5, 0, 5, 0, 5)
    assert psm_dataset(tmp_path / "run").n_obs == 5


def test_bad_arguments(tmp_path):
    b = ScriptedBackend(lambda p, k: "Option 1")
    with pytest.raises(ValueError, match="label"):
        run_psm(b, tmp_path / "r", label="a/b", progress=False)
    with pytest.raises(ValueError, match="max_attempts"):
        run_psm(b, tmp_path / "r", max_attempts=0, progress=False)
    with pytest.raises(ValueError, match="order"):
        run_psm(b, tmp_path / "r", order="random", progress=False)


def test_a_psm_spec_is_the_runs_identity(tmp_path):
    """run_psm(spec=PSMSpec) writes the manifest identity and the answers of the same keywords; a spec given
    with identity keywords, or checks that fail, raise a MoralkitError before the run directory exists."""
    from moralkit.collect.psm import PSM_IDENTITY, PSMSpec
    from moralkit.collect.store import read_manifest
    from moralkit.errors import MoralkitError

    def script(prompt, k):
        return "Answers: [1, 2, 3, 4, 5]" if prompt.startswith("Please answer") else f"Option {k + 3}"

    kw = dict(label="lab", design_seed=2, seed=5, system="Be brief.", max_attempts=2)
    by_kw = run_psm(ScriptedBackend(script), tmp_path / "kw", limit=3, progress=False, **kw)
    spec = PSMSpec.for_backend(ScriptedBackend(script), **kw)
    assert PSM_IDENTITY == tuple(spec.identity())
    by_spec = run_psm(ScriptedBackend(script), tmp_path / "spec", spec=spec, limit=3, progress=False)
    np.testing.assert_array_equal(by_kw.chosen, by_spec.chosen)
    m_kw, m_spec = read_manifest(tmp_path / "kw"), read_manifest(tmp_path / "spec")
    assert {k: m_kw[k] for k in PSM_IDENTITY} == {k: m_spec[k] for k in PSM_IDENTITY} == spec.identity()
    with pytest.raises(MoralkitError, match=r"either as spec= or as keywords, not both \(\['seed'\]\)"):
        run_psm(ScriptedBackend(script), tmp_path / "both", spec=spec, seed=1, progress=False)
    for bad, message in ((dict(max_attempts=0), "max_attempts must be an integer >= 1, got 0"),
                         (dict(limit=2.5), r"limit must be an integer, got 2.5"),
                         (dict(order="random"), "order must be one of 'paper', 'shuffled', got 'random'")):
        with pytest.raises(MoralkitError, match=message):
            run_psm(ScriptedBackend(script), tmp_path / "bad", progress=False, **bad)
    assert not (tmp_path / "bad").exists() and not (tmp_path / "both").exists()
